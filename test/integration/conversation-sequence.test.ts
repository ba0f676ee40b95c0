/**
 * Conversation sequences in SQL (src/memory/facts/sequence.ts) and the neighbour statement of
 * `expand` (src/memory/retrieval/expand.ts): the index facts_sequence_idx serves it, the value
 * helpers order turns as the SQL does, and nothing is read when there is nothing to expand.
 */
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { type Tx, withTenant } from '../../src/db/client.ts';
import { facts } from '../../src/db/schema.ts';
import { registerTenant } from '../../src/db/tenants.ts';
import { factsByIds } from '../../src/memory/facts/read.ts';
import { compareInSequence, inSequence, SEQUENCE_INDEX, sequenceKey, sequenceOrder } from '../../src/memory/facts/sequence.ts';
import { neighbourStatement, neighboursOf } from '../../src/memory/retrieval/expand.ts';
import { seedFacts } from '../../support/seed.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';

const SESSIONS = 200;
const TURNS = 40;

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });
const member = (tenantId: string): Principal => ({ tenantId, sub: 'u-1', role: 'member', projects: { read: [], write: ['p1'] }, orgs: { read: [], write: [] } });

describe('conversation sequences in SQL', () => {
  let t: TestDatabase;
  const tenantId = uniqueTenant('seq');

  beforeAll(async () => {
    t = await createTestDatabase();
    await withTenant(t.app.db, tenantId, (tx) => registerTenant(tx, tenantId));
    // 8,000 turns in 200 sessions of 20 threads, observed a second apart and written out of order
    // (row i is turn (k * 7) mod 40 of session i mod 200, k = i / 200), and as many facts outside any sequence.
    const q = t.admin;
    const turn = q`(((i / ${SESSIONS}) * 7) % ${TURNS})`;
    await seedFacts(q, {
      tenantId,
      last: SESSIONS * TURNS,
      type: 'chat.turn',
      text: q`'turn ' || i`,
      assertedBy: 'seed',
      columns: {
        memory_kind: q`'episodic'`,
        project_id: q`'p1'`,
        thread_id: q`'t' || (i % 20)`,
        session_id: q`'s' || (i % ${SESSIONS})`,
        observed_at: q`timestamptz '2026-05-01' + (${turn} * interval '1 second')`,
      },
    });
    await seedFacts(q, { tenantId, last: SESSIONS * TURNS, type: 'chat.note', text: q`'note ' || i`, assertedBy: 'seed', columns: { project_id: q`'p1'` } });
    await t.admin`analyze facts`;
  }, 120_000);
  afterAll(() => t?.drop());

  const inTenant = <T>(fn: (tx: Tx) => Promise<T>) => withTenant(t.app.db, tenantId, fn);
  const session = (id: string) =>
    inTenant((tx) =>
      tx
        .select({ id: facts.id })
        .from(facts)
        .where(and(eq(facts.tenantId, tenantId), eq(facts.sessionId, id), inSequence(facts)))
        .orderBy(...sequenceOrder(facts)),
    );

  it('reads the neighbours of many hits from facts_sequence_idx, a few entries per hit, with no sort of a session', async () => {
    const hits = (await session('s7')).slice(5, 10).map((r) => r.id);
    const plan = await inTenant(async (tx) => {
      const statement = neighbourStatement(tx, admin(tenantId), hits, { before: 2, after: 3 });
      return tx.execute<{ 'QUERY PLAN': string }>(sql`explain (analyze, costs off, timing off, summary off) ${statement.getSQL()}`);
    });
    const text = plan.map((row) => row['QUERY PLAN']).join('\n');
    // Both sides: one backward and one forward scan of the index per hit, each stopping at its limit.
    expect(text).toContain(`Index Scan Backward using ${SEQUENCE_INDEX}`);
    expect(text).toMatch(new RegExp(`Index Scan using ${SEQUENCE_INDEX}`));
    // Thread, session and position all index conditions, for the app role under row-level security.
    expect(text).toMatch(/Index Cond: .*thread_id IS NULL.*session_id IS NULL.*ROW\(CASE WHEN \(observed_at IS NULL\)/);
    expect(text).not.toMatch(/Seq Scan|Bitmap Heap Scan on facts/);
  });

  it('finds the turns just before and after each hit, for a member too', async () => {
    const order = (await session('s9')).map((r) => r.id);
    for (const principal of [admin(tenantId), member(tenantId)]) {
      const found = await inTenant(async (tx) => {
        const hits = await factsByIds(tx, tenantId, [order[0]!, order[20]!, order[39]!]);
        return neighboursOf(tx, principal, [...hits.values()], { before: 3, after: 2 });
      });
      const ids = (id: string) => [found.get(id)?.before.map((f) => f.id) ?? [], found.get(id)?.after.map((f) => f.id) ?? []];
      expect(ids(order[0]!)).toEqual([[], order.slice(1, 3)]);
      expect(ids(order[20]!)).toEqual([order.slice(17, 20), order.slice(21, 23)]);
      expect(ids(order[39]!)).toEqual([order.slice(36, 39), []]);
    }
  });

  it('orders turns by value as the SQL does (sequenceKey, compareInSequence)', async () => {
    const rows = await t.admin<{ id: string }[]>`select id from facts where tenant_id = ${tenantId} and session_id in ('s3', 's4')`;
    const loaded = await inTenant((tx) => factsByIds(tx, tenantId, rows.map((r) => r.id)));
    const all = [...loaded.values()];
    expect(new Set(all.map(sequenceKey)).size).toBe(2);
    for (const id of ['s3', 's4']) {
      const byValue = all.filter((f) => f.scope.sessionId === id).sort(compareInSequence).map((f) => f.id);
      expect(byValue).toEqual((await session(id)).map((r) => r.id));
    }
    expect(sequenceKey({ memoryKind: 'episodic', scope: { projectId: 'p1' } })).toBeNull();
    expect(sequenceKey({ memoryKind: 'semantic', scope: { projectId: 'p1', sessionId: 's1' } })).toBeNull();
    expect(sequenceKey({ memoryKind: 'episodic', scope: { projectId: 'p1', sessionId: 's1' } })).not.toEqual(
      sequenceKey({ memoryKind: 'episodic', scope: { projectId: 'p1', threadId: 's1' } }),
    );
  });

  it('reads nothing when no hit is a turn or both sides are 0', async () => {
    const [turn] = await session('s1');
    const [note] = await t.admin<{ id: string }[]>`select id from facts where tenant_id = ${tenantId} and type = 'chat.note' limit 1`;
    const loaded = await inTenant((tx) => factsByIds(tx, tenantId, [turn!.id, note!.id]));
    // A transaction that fails any statement: these calls must not send one.
    const noStatements = new Proxy({} as Tx, {
      get: () => {
        throw new Error('a statement was sent');
      },
    });
    expect(await neighboursOf(noStatements, admin(tenantId), [loaded.get(turn!.id)!, loaded.get(note!.id)!], { before: 0, after: 0 })).toEqual(new Map());
    expect(await neighboursOf(noStatements, admin(tenantId), [loaded.get(note!.id)!], { before: 5, after: 5 })).toEqual(new Map());
    expect(await neighboursOf(noStatements, admin(tenantId), [], { before: 1 })).toEqual(new Map());
  });
});
