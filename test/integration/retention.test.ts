import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../../src/db/client.ts';
import { sweepTenant } from '../../src/lifecycle/retention.ts';
import { registerModel, storeEmbeddings } from '../../src/memory/facts/vectors.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { retentionHandler } from '../../workers/retention.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { insertFact, uniqueTenant } from '../helpers/factories.ts';
import { seedFacts } from '../../support/seed.ts';

const DAY = 24 * 3600 * 1000;
const past = (ms: number) => new Date(Date.now() - ms);

/** The retention sweep (DESIGN §4) against real Postgres, checked as the tables' owner. */
describe('retention sweep', () => {
  let t: TestDatabase;
  const model = 'test-model-3';

  beforeAll(async () => {
    t = await createTestDatabase();
    await registerModel(t.app.db, model, 3);
  });
  afterAll(() => t.drop());

  /** A fact, its revisions and its vectors, read as the owner (behind row-level security's back). */
  const stored = async (tenantId: string, id: string) => {
    const owner = t.admin;
    return owner.begin(async (sql) => {
      await sql`select set_config('app.tenant_id', ${tenantId}, true)`;
      const [fact] = await sql`select id, version, content, invalidation_reason, invalidated_at, created_at from facts where id = ${id}`;
      const revisions = await sql`select version, content, invalidation_reason from fact_revisions where fact_id = ${id} order by version`;
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from fact_embeddings where fact_id = ${id}`;
      return { fact: fact!, revisions, vectors: row!.n };
    });
  };

  const withVector = async (tenantId: string, fact: { id: string; version: number }) =>
    withTenant(t.app.db, tenantId, (tx) => storeEmbeddings(tx, tenantId, model, 3, [{ ...fact, embedding: [1, 0, 0] }]));

  it('expires exactly the facts past expiresAt, never one under legal hold', async () => {
    const tenantId = uniqueTenant('expire');
    const due = await insertFact(t.app.db, tenantId, { expiresAt: new Date(Date.now() + DAY) });
    const held = await insertFact(t.app.db, tenantId, { expiresAt: past(60_000), legalHold: true });
    const later = await insertFact(t.app.db, tenantId, { expiresAt: new Date(Date.now() + DAY) });
    const forever = await insertFact(t.app.db, tenantId);
    // Embedded while live (a fact past its expiry gets no vector), then its expiry passes.
    expect(await withVector(tenantId, due)).toBe(1);
    await t.admin`update facts set expires_at = now() - interval '1 minute' where tenant_id = ${tenantId} and id = ${due.id}`;

    const result = await sweepTenant(t.app.db, tenantId, { purgeGraceMs: 7 * DAY });
    expect(result).toEqual({ expired: 1, purged: 0, idempotencyRecords: 0 });

    const expired = await stored(tenantId, due.id);
    expect(expired.fact).toMatchObject({ version: 2, invalidation_reason: 'expired', content: due.content });
    expect(expired.revisions.map((r) => r.invalidation_reason)).toEqual([null, 'expired']);
    // Still inside the grace period: content and vectors are kept for now.
    expect(expired.vectors).toBe(1);
    for (const fact of [held, later, forever]) {
      const kept = await stored(tenantId, fact.id);
      expect(kept.fact).toMatchObject({ version: 1, invalidation_reason: null, content: fact.content });
    }
    // A second sweep finds nothing more to do.
    expect(await sweepTenant(t.app.db, tenantId, { purgeGraceMs: 7 * DAY })).toEqual({ expired: 0, purged: 0, idempotencyRecords: 0 });
  });

  it('purges deleted and expired content from the fact, every revision and every vector after the grace period; ids, versions and times remain', async () => {
    const tenantId = uniqueTenant('purge');
    const deletedLongAgo = await insertFact(t.app.db, tenantId, { version: 1 });
    const deletedJustNow = await insertFact(t.app.db, tenantId);
    const expiredLongAgo = await insertFact(t.app.db, tenantId, { expiresAt: past(10 * DAY) });
    const heldDeleted = await insertFact(t.app.db, tenantId, { legalHold: true });
    const live = await insertFact(t.app.db, tenantId);
    for (const fact of [deletedLongAgo, deletedJustNow, heldDeleted, live]) await withVector(tenantId, fact);
    // Close them as a delete does (the sweep only reads invalidated_at and the reason), 8 and 0 days ago.
    await t.admin.begin(async (sql) => {
      await sql`select set_config('app.tenant_id', ${tenantId}, true)`;
      await sql`update facts set invalidated_at = now() - interval '8 days', invalidation_reason = 'deleted' where id in (${deletedLongAgo.id}, ${heldDeleted.id})`;
      await sql`update facts set invalidated_at = now(), invalidation_reason = 'deleted' where id = ${deletedJustNow.id}`;
    });
    // The expired one is closed by this sweep, at now(): inside the grace period too.
    const first = await sweepTenant(t.app.db, tenantId, { purgeGraceMs: 7 * DAY });
    expect(first).toEqual({ expired: 1, purged: 1, idempotencyRecords: 0 });

    const purged = await stored(tenantId, deletedLongAgo.id);
    expect(purged.fact).toMatchObject({ id: deletedLongAgo.id, version: 1, content: null, invalidation_reason: 'deleted' });
    expect(purged.fact.created_at).toEqual(deletedLongAgo.createdAt);
    expect(purged.revisions.map((r) => r.content)).toEqual([null]);
    expect(purged.vectors).toBe(0);
    for (const fact of [deletedJustNow, heldDeleted, live]) {
      const kept = await stored(tenantId, fact.id);
      expect(kept.fact.content).toEqual(fact.content);
      expect(kept.vectors).toBe(1);
    }

    // With no grace (as erasure uses), the rest of the closed content goes, the held fact excepted.
    const second = await sweepTenant(t.app.db, tenantId, { purgeGraceMs: 0 });
    expect(second).toEqual({ expired: 0, purged: 2, idempotencyRecords: 0 });
    for (const fact of [deletedJustNow, expiredLongAgo]) {
      const gone = await stored(tenantId, fact.id);
      expect(gone.fact.content).toBeNull();
      expect(gone.revisions.every((r) => r.content === null)).toBe(true);
      expect(gone.revisions.length).toBe(gone.fact.version);
      expect(gone.vectors).toBe(0);
    }
    expect((await stored(tenantId, heldDeleted.id)).fact.content).toEqual(heldDeleted.content);
    expect((await stored(tenantId, live.id)).fact.content).toEqual(live.content);
  });

  it('drops Idempotency-Key records past their 24 hours, and any that shows content it purged; live ones stay', async () => {
    const tenantId = uniqueTenant('keys');
    const purgedFact = await insertFact(t.app.db, tenantId);
    const liveFact = await insertFact(t.app.db, tenantId);
    const record = (key: string, body: string, expiresIn: string, tenant = tenantId) => t.admin`
      insert into idempotency_keys (tenant_id, key, request_hash, response_status, response_body, created_at, expires_at)
      values (${tenant}, ${key}, 'h', 201, ${body}, now() - interval '1 hour', now() + ${expiresIn}::interval)`;
    const neighbour = uniqueTenant('keys-neighbour');
    await insertFact(t.app.db, neighbour);
    await record('old-elsewhere', '{}', '-1 minute', neighbour);
    // More expired records than one batch, so the sweep has to come back for the rest.
    for (let i = 0; i < 7; i++) await record(`old-${i}`, JSON.stringify(liveFact), '-1 minute');
    await record('shows-purged', JSON.stringify({ data: [liveFact, purgedFact] }), '23 hours');
    await record('shows-live', JSON.stringify(liveFact), '23 hours');
    await record('no-fact', JSON.stringify({ id: randomUUID(), status: 'pending' }), '23 hours');
    await t.admin`update facts set invalidated_at = now() - interval '8 days', invalidation_reason = 'deleted' where tenant_id = ${tenantId} and id = ${purgedFact.id}`;

    expect(await sweepTenant(t.app.db, tenantId, { purgeGraceMs: 7 * DAY, batch: 3 })).toEqual({ expired: 0, purged: 1, idempotencyRecords: 8 });
    const left = await t.admin<{ key: string }[]>`select key from idempotency_keys where tenant_id = ${tenantId} order by key`;
    expect(left.map((r) => r.key)).toEqual(['no-fact', 'shows-live']);
    // Nothing due: nothing dropped. Another tenant's expired record waits for that tenant's sweep.
    expect(await sweepTenant(t.app.db, tenantId, { purgeGraceMs: 7 * DAY })).toEqual({ expired: 0, purged: 0, idempotencyRecords: 0 });
    expect(await t.admin`select key from idempotency_keys where tenant_id = ${neighbour}`).toEqual([{ key: 'old-elsewhere' }]);
  });

  it('two sweeps at once share the work: every expired fact closed exactly once', async () => {
    const tenantId = uniqueTenant('race');
    const n = 600;
    await t.admin.begin(async (sql) => {
      await sql`select set_config('app.tenant_id', ${tenantId}, true)`;
      await sql`insert into tenants (id) values (${tenantId}) on conflict do nothing`;
      await seedFacts(sql, {
        tenantId,
        last: n,
        type: 'test.note',
        text: sql`'n' || i`,
        assertedBy: 'test',
        columns: { expires_at: sql`now() - interval '1 minute'` },
        revisions: true,
      });
    });
    const logger = createLogger('error', {}, () => {});
    const sweep = retentionHandler({ db: t.app.db, purgeGraceMs: 7 * DAY });
    const results = (await Promise.all([sweep({}, { job: {} as never, logger }), sweep({}, { job: {} as never, logger })])) as { expired: number }[];
    // The owner here is a superuser, whom row-level security does not filter: the tenant is named.
    const [counts] = await t.admin<{ closed: number; revisions: number }[]>`
      select (select count(*)::int from facts where tenant_id = ${tenantId} and invalidation_reason = 'expired') as closed,
             (select count(*)::int from fact_revisions where tenant_id = ${tenantId} and invalidation_reason = 'expired') as revisions`;
    expect(counts!.closed).toBe(n);
    expect(counts!.revisions).toBe(n);
    // Other tenants of this database may have had due facts too; this tenant's n were split, not doubled.
    expect(results[0]!.expired + results[1]!.expired).toBeGreaterThanOrEqual(n);
  }, 120_000);
});
