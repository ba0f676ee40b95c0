/**
 * Vectors against erasure, purge and deletion (issue 10, defect 2): an embed job reads a fact's
 * text, asks the endpoint (outside any transaction), then stores. Whatever happens to the fact in
 * between — erased, deleted, purged, superseded — a vector of content that is gone must never be
 * stored, and an erasure that reports `completed` must leave no vector behind. Each ordering is
 * forced here step by step, then all of them at once in a race.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { withTenant } from '../../src/db/client.ts';
import { registerTenant } from '../../src/db/tenants.ts';
import type { EmbeddingProvider } from '../../src/embeddings/provider.ts';
import { type ErasureTarget, requestErasure, runErasure } from '../../src/lifecycle/erasure.ts';
import { sweepTenant } from '../../src/lifecycle/retention.ts';
import { markOutboxAttemptFailed } from '../../src/jobs/outbox.ts';
import {
  embedPending,
  factsNeedingEmbedding,
  type ModelInfo,
  registerModel,
  storeEmbeddings,
} from '../../src/memory/facts/vectors.ts';
import { writeFact } from '../../src/memory/facts/insert.ts';
import { deleteFact, supersedeFact } from '../../src/memory/facts/revise.ts';
import { TEST_ERASURE_KEY } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { insertFact, uniqueTenant } from '../helpers/factories.ts';
import { sleep } from '../../support/wait.ts';
import { needs } from '../helpers/needs.ts';

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin-1', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });
const person = (id: string): ErasureTarget => ({ kind: 'participant', id });

describe('vectors never outlive erased, deleted or purged content', () => {
  let t: TestDatabase;
  let model: ModelInfo;

  beforeAll(async () => {
    t = await createTestDatabase();
    model = await registerModel(t.app.db, 'erasure-race-3', 3);
  });
  afterAll(() => t.drop());

  /** Rows as the owner (row-level security does not filter it, so the tenant is named). */
  const vectorsOf = async (tenantId: string, model?: string) => {
    const [row] = await t.admin<{ n: number }[]>`
      select count(*)::int as n from fact_embeddings where tenant_id = ${tenantId} and (${model ?? null}::text is null or model = ${model ?? null})`;
    return row!.n;
  };
  const contentLeft = async (tenantId: string) => {
    const [row] = await t.admin<{ facts: number; revisions: number }[]>`
      select (select count(*)::int from facts where tenant_id = ${tenantId} and content is not null) as facts,
             (select count(*)::int from fact_revisions where tenant_id = ${tenantId} and content is not null) as revisions`;
    return row!;
  };
  /** Sessions of this test database waiting for a lock (a transaction blocked on another's rows). */
  const waitingOnLocks = async () => {
    const [row] = await t.admin<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = ${t.name} and wait_event_type = 'Lock'`;
    return row!.n;
  };
  const erase = async (tenantId: string, target: ErasureTarget) => {
    const { erasure } = await requestErasure({ db: t.app.db, principal: admin(tenantId) }, target, TEST_ERASURE_KEY);
    return erasure.id;
  };
  const erasureRow = async (id: string) => {
    const [row] = await t.admin<{ status: string; facts_erased: number; embeddings_deleted: number }[]>`
      select status, facts_erased, embeddings_deleted from erasures where id = ${id}`;
    return row!;
  };
  const store = (tenantId: string, facts: readonly { id: string; version: number }[], into = model) =>
    withTenant(t.app.db, tenantId, (tx) =>
      storeEmbeddings(tx, tenantId, into.model, into.dims, facts.map((f, i) => ({ id: f.id, version: f.version, embedding: [1, i, 0] }))),
    );
  /** Resolves once `promise` settles or some session is blocked on a row lock, whichever is first. */
  const settledOrBlocked = async (promise: Promise<unknown>) => {
    let settled = false;
    void promise.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let i = 0; i < 200 && !settled; i++) {
      if ((await waitingOnLocks()) > 0) return 'blocked' as const;
      await sleep(10);
    }
    return settled ? ('settled' as const) : ('neither' as const);
  };

  it('a vector read before an erasure and stored after it is refused', async () => {
    const tenantId = uniqueTenant('read-erase-store');
    const fact = await insertFact(t.app.db, tenantId, { projectId: 'p1', participantId: 'end-9' });
    const pending = await withTenant(t.app.db, tenantId, (tx) => factsNeedingEmbedding(tx, tenantId, model.model, 10));
    expect(pending.map((p) => p.id)).toEqual([fact.id]);

    const erasureId = await erase(tenantId, person('end-9'));
    expect(await runErasure(t.app.db, tenantId, erasureId, person('end-9'))).toBe('completed');

    // The job that read the text before the erasure now stores its vector.
    expect(await store(tenantId, pending)).toBe(0);
    expect(await vectorsOf(tenantId)).toBe(0);
    expect(await contentLeft(tenantId)).toEqual({ facts: 0, revisions: 0 });
  });

  it('a store not yet committed when the erasure starts: the erasure waits for it, then deletes its vector', needs('postgres-server'), async () => {
    const tenantId = uniqueTenant('store-then-erase');
    const fact = await insertFact(t.app.db, tenantId, { projectId: 'p1', participantId: 'end-9' });
    const erasureId = await erase(tenantId, person('end-9'));

    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const storing = withTenant(t.app.db, tenantId, async (tx) => {
      const stored = await storeEmbeddings(tx, tenantId, model.model, model.dims, [{ id: fact.id, version: fact.version, embedding: [1, 0, 0] }]);
      await released;
      return stored;
    });
    await sleep(50);
    const erasing = runErasure(t.app.db, tenantId, erasureId, person('end-9'));
    // The erasure must not finish while the store is open: it waits on the fact's row.
    const seen = await settledOrBlocked(erasing).finally(release);
    expect(seen).toBe('blocked');
    expect(await storing).toBe(1);
    expect(await erasing).toBe('completed');

    expect(await vectorsOf(tenantId)).toBe(0);
    expect(await erasureRow(erasureId)).toMatchObject({ status: 'completed', facts_erased: 1, embeddings_deleted: 1 });
  });

  it('a store waiting while the fact is being deleted stores nothing once the delete commits', needs('postgres-server'), async () => {
    const tenantId = uniqueTenant('delete-then-store');
    const fact = await insertFact(t.app.db, tenantId, { projectId: 'p1' });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const deleting = withTenant(t.app.db, tenantId, async (tx) => {
      await deleteFact({ db: t.app.db, principal: admin(tenantId), tx }, fact.id);
      await released;
    });
    await sleep(50);
    const storing = store(tenantId, [fact]);
    const seen = await settledOrBlocked(storing).finally(release);
    await deleting;
    expect(seen).toBe('blocked');
    expect(await storing).toBe(0);
    expect(await vectorsOf(tenantId)).toBe(0);
  });

  it('a vector of an old version is not stored once a supersede moved the fact on', async () => {
    const tenantId = uniqueTenant('supersede');
    const fact = await insertFact(t.app.db, tenantId, { projectId: 'p1' });
    const pending = await withTenant(t.app.db, tenantId, (tx) => factsNeedingEmbedding(tx, tenantId, model.model, 10));
    await supersedeFact({ db: t.app.db, principal: admin(tenantId) }, fact.id, { content: { text: 'new words' } });
    expect(await store(tenantId, pending)).toBe(0);
    // The current version is still wanted, and stored when its own job comes.
    const now = await withTenant(t.app.db, tenantId, (tx) => factsNeedingEmbedding(tx, tenantId, model.model, 10));
    expect(now).toMatchObject([{ id: fact.id, version: 2 }]);
    expect(await store(tenantId, now)).toBe(1);
    expect(await vectorsOf(tenantId)).toBe(1);
  });

  it('a vector read before a delete and purge is not stored after them', async () => {
    const tenantId = uniqueTenant('purge');
    const fact = await insertFact(t.app.db, tenantId, { projectId: 'p1' });
    const pending = await withTenant(t.app.db, tenantId, (tx) => factsNeedingEmbedding(tx, tenantId, model.model, 10));
    await deleteFact({ db: t.app.db, principal: admin(tenantId) }, fact.id);
    expect(await sweepTenant(t.app.db, tenantId, { purgeGraceMs: 0 })).toEqual({ expired: 0, purged: 1, idempotencyRecords: 0 });
    expect(await store(tenantId, pending)).toBe(0);
    expect(await vectorsOf(tenantId)).toBe(0);
  });

  it('a vector of a model retired meanwhile is not stored', async () => {
    const tenantId = uniqueTenant('retired');
    const fact = await insertFact(t.app.db, tenantId, { projectId: 'p1' });
    const old = await registerModel(t.app.db, 'retire-me-3', 3);
    // Another database's worth of models: this file's own model is active, so 'retire-me-3' backfills.
    expect(old.state).toBe('backfilling');
    const pending = await withTenant(t.app.db, tenantId, (tx) => factsNeedingEmbedding(tx, tenantId, old.model, 10));
    expect(pending).toHaveLength(1);
    // Retired as a switch retires a model: its vectors removed, then a late job stores.
    await t.admin`update embedding_models set state = 'retired', retired_at = now() where model = ${old.model}`;
    expect(await store(tenantId, pending, old)).toBe(0);
    expect(await vectorsOf(tenantId, old.model)).toBe(0);
    expect(fact.id).toBe(pending[0]!.id);
  });

  it('a write naming the person, still open when the erasure starts, is erased too', needs('postgres-server'), async () => {
    const tenantId = uniqueTenant('write-window');
    // Known before (a tenant's very first write would hold its registration row, and the erasure
    // request would wait on that instead).
    await withTenant(t.app.db, tenantId, (tx) => registerTenant(tx, tenantId));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // The write checked for an erasure in progress (none yet) and has not committed.
    const writing = withTenant(t.app.db, tenantId, async (tx) => {
      const fact = await writeFact(
        { db: t.app.db, principal: admin(tenantId), tx },
        { type: 'acme.note', scope: { projectId: 'p1', participantId: 'end-9' }, content: { text: 'end-9 likes tea' } },
        { erasureKey: TEST_ERASURE_KEY },
      );
      await released;
      return fact;
    });
    await sleep(50);
    const erasureId = await erase(tenantId, person('end-9'));
    const erasing = runErasure(t.app.db, tenantId, erasureId, person('end-9'));
    const seen = await settledOrBlocked(erasing).finally(release);
    const written = await writing;
    expect(await erasing).toBe('completed');
    const [row] = await t.admin`select content, invalidation_reason from facts where id = ${written.id}`;
    expect(row).toEqual({ content: null, invalidation_reason: 'erased' });
    expect(await contentLeft(tenantId)).toEqual({ facts: 0, revisions: 0 });
    expect(await erasureRow(erasureId)).toMatchObject({ status: 'completed', facts_erased: 1 });
    // It got there by waiting for the write, not by luck.
    expect(seen).toBe('blocked');
  });

  it("once completed, nothing of the person's id is left in the erasure's outbox rows, not even in an earlier attempt's error", async () => {
    const tenantId = uniqueTenant('outbox-scrub');
    await insertFact(t.app.db, tenantId, { projectId: 'p1', participantId: 'end-9-outbox' });
    const { erasure, outbox } = await requestErasure({ db: t.app.db, principal: admin(tenantId) }, person('end-9-outbox'), TEST_ERASURE_KEY);
    // An earlier attempt failed with a message that quotes its statement's parameters, as a
    // driver error does.
    await markOutboxAttemptFailed(t.app.db, outbox, new Error('Failed query: select … params: end-9-outbox'), false);
    expect(await runErasure(t.app.db, tenantId, erasure.id, person('end-9-outbox'))).toBe('completed');
    const rows = await t.admin<{ payload: unknown; last_error: string | null }[]>`
      select payload, last_error from outbox where tenant_id = ${tenantId} and queue = 'erasure'`;
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain('end-9-outbox');
  });

  it('race: 400 facts of end-9 written while embed jobs run, erased midway: nothing of them is left', async () => {
    const tenantId = uniqueTenant('race');
    const ctx = { db: t.app.db, principal: admin(tenantId) };
    // A stand-in endpoint that takes a few milliseconds, as a real one does: the window in which
    // a job holds texts that the erasure is removing.
    let calls = 0;
    const provider: EmbeddingProvider = {
      model: model.model,
      describe: 'fake',
      embed: async (texts) => {
        calls++;
        await sleep(2 + Math.random() * 15);
        return texts.map((_, i) => [1, i + 1, calls]);
      },
    };
    const jobs: string[][] = [];
    let writing = true;
    let attempted = 0;
    // Four embed "workers" taking jobs as the API queues them (one per write).
    const embedders = Array.from({ length: 4 }, async () => {
      for (;;) {
        const ids = jobs.shift();
        if (!ids) {
          if (!writing) return;
          await sleep(1);
          continue;
        }
        const done = await embedPending(t.app.db, provider, tenantId, model, { ids, batch: ids.length });
        attempted += done;
      }
    });

    const n = 400;
    let next = 0;
    let refused = 0;
    let erasureRequested: Promise<string> | undefined;
    const written: string[] = [];
    const writers = Array.from({ length: 6 }, async () => {
      while (next < n && refused === 0) {
        const i = next++;
        if (i === n / 2) erasureRequested = erase(tenantId, person('end-9'));
        try {
          const fact = await writeFact(
            ctx,
            { type: 'acme.note', scope: { projectId: 'p1', participantId: 'end-9' }, content: { text: `end-9 note ${i}` } },
            { erasureKey: TEST_ERASURE_KEY },
          );
          written.push(fact.id);
          jobs.push([fact.id]);
        } catch (error) {
          if ((error as { code?: string }).code !== 'erasure-in-progress') throw error;
          refused++;
        }
      }
    });
    // The erasure runs as soon as it is requested, with writes and embeds still in flight.
    while (!erasureRequested) await sleep(1);
    const erasureId = await erasureRequested;
    const erasing = runErasure(t.app.db, tenantId, erasureId, person('end-9'));
    await Promise.all(writers);
    expect(await erasing).toBe('completed');
    writing = false;
    await Promise.all(embedders);

    const row = await erasureRow(erasureId);
    const vectors = await vectorsOf(tenantId);
    const left = await contentLeft(tenantId);
    console.info(
      `[erasure race] written=${written.length}, refused=${refused}, erased=${row.facts_erased}, embeds attempted=${attempted}, ` +
        `deleted by the erasure=${row.embeddings_deleted}, vectors left=${vectors}, content left=${left.facts + left.revisions}`,
    );
    expect(written.length).toBeGreaterThanOrEqual(n / 2);
    expect(row).toMatchObject({ status: 'completed', facts_erased: written.length });
    expect(vectors).toBe(0);
    expect(left).toEqual({ facts: 0, revisions: 0 });
  });
});
