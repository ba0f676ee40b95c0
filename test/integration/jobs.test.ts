import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { UnrecoverableError, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { z } from 'zod';
import { withTenant } from '../../src/db/client.ts';
import { outbox } from '../../src/db/schema.ts';
import { dispatchOutbox, pendingOutbox, recordOutbox } from '../../src/jobs/outbox.ts';
import { createEmbeddingProviders, type EmbeddingProviders } from '../../src/embeddings/registry.ts';
import { scheduleEmbedding } from '../../src/jobs/embedding-jobs.ts';
import { closeQueues, createQueues, defineQueue, embedQueue, type BullQueues, type JobData, reconcileQueue } from '../../src/jobs/queues.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { checkRegistry, HandlerRegistryError, type JobHandler, startWorkers } from '../../src/jobs/worker.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { ensureConfiguredModel } from '../../src/memory/facts/vectors.ts';
import { embedHandler } from '../../workers/embed.ts';
import { reconcileHandler } from '../../workers/reconcile.ts';
import { type FakeEmbeddings, startFakeEmbeddings } from '../../support/fake-embeddings.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { eventually as eventuallyHolds, sleep } from '../../support/wait.ts';
import { needs } from '../helpers/needs.ts';
import { seedFacts } from '../../support/seed.ts';

const logger = createLogger('error');

/** A queue of the test's own that records what it processed. */
const echoQueue = defineQueue({
  name: 'echo',
  payload: z.object({ n: z.number().int() }).strict(),
  jobOptions: { attempts: 3, backoff: { type: 'fixed', delay: 10 } },
});

describe('jobs', needs('redis'), () => {
  let t: TestDatabase;
  let producer: Redis;
  let connection: Redis;
  let prefix: string;
  let queues: BullQueues;
  let workers: Worker<JobData>[] = [];

  beforeAll(async () => {
    t = await createTestDatabase();
    producer = createRedis(inject('redisUrl'), 'producer');
    connection = createRedis(inject('redisUrl'), 'worker');
  });

  // Each test gets fresh queues under a unique prefix, obliterated afterwards.
  const freshQueues = () => {
    prefix = `mnemo-test-${randomBytes(4).toString('hex')}`;
    queues = createQueues(producer, [echoQueue, reconcileQueue], prefix);
    return queues;
  };

  afterEach(async () => {
    await Promise.all(workers.map((w) => w.close()));
    workers = [];
    if (queues) {
      await Promise.all([...queues.values()].map((q) => q.obliterate({ force: true })));
      await closeQueues(queues);
    }
  });

  afterAll(async () => {
    await Promise.all([producer.quit(), connection.quit()]);
    await t.drop();
  });

  const run = (handlers: Record<string, JobHandler>) => {
    workers = startWorkers({
      definitions: [echoQueue, reconcileQueue],
      registry: handlers,
      connection,
      prefix,
      db: t.app.db,
      logger,
    });
  };

  const outboxRow = (tenantId: string, id: string) =>
    withTenant(t.app.db, tenantId, async (tx) => (await tx.select().from(outbox).where(eq(outbox.id, id)))[0]!);

  /** Polls Postgres until the predicate holds (jobs finish asynchronously). */
  async function eventually<T>(read: () => Promise<T>, holds: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
    const started = Date.now();
    for (;;) {
      const value = await read();
      if (holds(value)) return value;
      if (Date.now() - started > timeoutMs) return value;
      await sleep(25);
    }
  }

  it('refuses to start when a queue has no handler, or a handler no queue', () => {
    expect(() => checkRegistry([echoQueue, reconcileQueue], { echo: async () => {} })).toThrow(
      new HandlerRegistryError('no handler for queue(s): reconcile'),
    );
    expect(() =>
      checkRegistry([echoQueue], { echo: async () => {}, embed: async () => {} }),
    ).toThrow('handler(s) for unknown queue(s): embed');
    freshQueues();
    expect(() => run({ echo: async () => {} })).toThrow(HandlerRegistryError);
    expect(workers).toEqual([]);
  });

  it('runs outbox work after commit and marks the row done', async () => {
    freshQueues();
    const seen: number[] = [];
    run({ echo: async ({ n }: { n: number }) => void seen.push(n), reconcile: async () => {} });
    const tenant = uniqueTenant();
    const row = await withTenant(t.app.db, tenant, (tx) => recordOutbox(tx, tenant, 'echo', { n: 7 }));
    expect(await dispatchOutbox(queues, [row])).toEqual({ enqueued: 1, skipped: 0 });

    const done = await eventually(() => outboxRow(tenant, row.id), (r) => r.doneAt !== null);
    expect(done).toMatchObject({ attempts: 1, lastError: null, failedAt: null });
    expect(done.doneAt).toBeInstanceOf(Date);
    expect(seen).toEqual([7]);
  });

  it('enqueues an outbox row once however often it is dispatched', async () => {
    const q = freshQueues();
    const tenant = uniqueTenant();
    const row = await withTenant(t.app.db, tenant, (tx) => recordOutbox(tx, tenant, 'echo', { n: 1 }));
    await dispatchOutbox(queues, [row, row]);
    await dispatchOutbox(queues, [row]);
    expect(await q.get('echo')!.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it('re-enqueues, tenant by tenant, work that Redis lost; nothing once it is done', async () => {
    freshQueues();
    const seen: string[] = [];
    const tenants = [uniqueTenant('lost-a'), uniqueTenant('lost-b')];
    // Recorded but never dispatched: what a crash between commit and enqueue, or a Redis
    // that lost its data, leaves behind.
    const rows = await Promise.all(
      tenants.map((tenant, i) => withTenant(t.app.db, tenant, (tx) => recordOutbox(tx, tenant, 'echo', { n: i }))),
    );
    const reconcile = reconcileHandler({ db: t.app.db, queues, graceMs: 0 });
    run({
      echo: async ({ n }: { n: number }, { job }) => void seen.push(`${job.data.outbox?.tenantId}:${n}`),
      reconcile: async () => {},
    });

    // Earlier tests in this file leave undone rows too; the reconciler must enqueue exactly
    // the undone rows of the queues it runs, across every tenant.
    const undone = async () => {
      const [row] = await t.admin<{ n: number }[]>`
        select count(*)::int as n from outbox
        where done_at is null and failed_at is null and queue in ('echo', 'reconcile')`;
      return row!.n;
    };
    const undoneBefore = await undone();
    const first = (await reconcile({}, { job: undefined as never, logger })) as { enqueued: number };
    expect(first.enqueued).toBe(undoneBefore);
    expect(undoneBefore).toBeGreaterThanOrEqual(2);
    for (const [i, tenant] of tenants.entries()) {
      const row = await eventually(() => outboxRow(tenant, rows[i]!.id), (r) => r.doneAt !== null);
      expect(row.doneAt, tenant).not.toBeNull();
    }
    expect(seen).toEqual(expect.arrayContaining([`${tenants[0]}:0`, `${tenants[1]}:1`]));

    // Those rows are done: a second pass does not enqueue them again.
    const again = (await reconcile({}, { job: undefined as never, logger })) as { enqueued: number };
    expect(again.enqueued).toBe(await undone());
    for (const tenant of tenants) {
      expect(await withTenant(t.app.db, tenant, (tx) => pendingOutbox(tx, tenant, new Date(), 100))).toEqual([]);
    }
  });

  it('leaves rows of queues this build does not run for a worker that does', async () => {
    freshQueues();
    const tenant = uniqueTenant();
    const row = await withTenant(t.app.db, tenant, (tx) => recordOutbox(tx, tenant, 'from-the-future', {}));
    expect(await dispatchOutbox(queues, [row])).toEqual({ enqueued: 0, skipped: 1 });
    expect(await outboxRow(tenant, row.id)).toMatchObject({ doneAt: null, failedAt: null });
  });

  it('fails an invalid payload for good, without retries, and records why', async () => {
    freshQueues();
    let calls = 0;
    run({ echo: async () => void calls++, reconcile: async () => {} });
    const tenant = uniqueTenant();
    const row = await withTenant(t.app.db, tenant, (tx) => recordOutbox(tx, tenant, 'echo', { n: 'seven' }));
    await dispatchOutbox(queues, [row]);

    const failed = await eventually(() => outboxRow(tenant, row.id), (r) => r.failedAt !== null);
    expect(failed).toMatchObject({ attempts: 1, doneAt: null });
    expect(failed.lastError).toMatch(/invalid payload/);
    expect(calls).toBe(0);
    const job = await queues.get('echo')!.getJob(`outbox-${row.id}`);
    expect(job?.attemptsMade).toBe(1);
  });

  it('retries a transient failure and stops at UnrecoverableError', async () => {
    freshQueues();
    let transientCalls = 0;
    run({
      echo: async ({ n }: { n: number }) => {
        if (n === 1 && ++transientCalls === 1) throw new Error('embedding endpoint timed out');
        if (n === 2) throw new UnrecoverableError('fact was erased');
      },
      reconcile: async () => {},
    });
    const tenant = uniqueTenant();
    const [transient, fatal] = await withTenant(t.app.db, tenant, async (tx) => [
      await recordOutbox(tx, tenant, 'echo', { n: 1 }),
      await recordOutbox(tx, tenant, 'echo', { n: 2 }),
    ]);
    await dispatchOutbox(queues, [transient!, fatal!]);

    const recovered = await eventually(() => outboxRow(tenant, transient!.id), (r) => r.doneAt !== null);
    expect(recovered).toMatchObject({ attempts: 2, lastError: null, failedAt: null });
    const stopped = await eventually(() => outboxRow(tenant, fatal!.id), (r) => r.failedAt !== null);
    expect(stopped).toMatchObject({ attempts: 1, lastError: 'fact was erased', doneAt: null });
  });
});

/**
 * Embed jobs are per tenant, not per fact: however many writes ask, the endpoint sees batches of
 * KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE, and a request never gets lost in the merge.
 */
describe('embed jobs', needs('redis'), () => {
  const BATCH = 16;
  let t: TestDatabase;
  let fake: FakeEmbeddings;
  let providers: EmbeddingProviders;
  let producer: Redis;
  let connection: Redis;
  let queues: BullQueues;
  let workers: Worker<JobData>[] = [];
  const prefix = `mnemo-test-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    [t, fake] = await Promise.all([createTestDatabase(), startFakeEmbeddings()]);
    providers = createEmbeddingProviders({ kind: 'openai-compat', url: fake.url, model: fake.model, apiKey: undefined, batchSize: BATCH });
    await ensureConfiguredModel(t.app.db, providers.configured);
    producer = createRedis(inject('redisUrl'), 'producer');
    connection = createRedis(inject('redisUrl'), 'worker');
    queues = createQueues(producer, [embedQueue, reconcileQueue], prefix);
  });

  afterEach(async () => {
    await Promise.all(workers.map((w) => w.close()));
    workers = [];
    fake.setMode({ kind: 'ok' });
  });

  afterAll(async () => {
    await Promise.all([...queues.values()].map((q) => q.obliterate({ force: true })));
    await closeQueues(queues);
    await Promise.all([producer.quit(), connection.quit(), fake.close()]);
    await t.drop();
  });

  const startEmbedWorker = (batchesPerJob?: number) => {
    workers = startWorkers({
      definitions: [embedQueue],
      registry: { embed: embedHandler({ db: t.app.db, queues, providers, batch: BATCH, ...(batchesPerJob ? { batchesPerJob } : {}) }) },
      connection,
      prefix,
      db: t.app.db,
      logger,
    });
  };

  /** `n` facts of a new tenant, written straight to the table (what many API writes leave). */
  async function factsOf(tenantId: string, n: number): Promise<void> {
    await t.admin.begin(async (sql) => {
      await sql`insert into tenants (id) values (${tenantId}) on conflict do nothing`;
      await seedFacts(sql, { tenantId, last: n, type: 'acme.note', text: sql`${tenantId} || ' note ' || i`, assertedBy: 'test' });
    });
  }

  /** Live facts of the tenant with exactly one vector at their version, and all of its live facts. */
  async function vectors(tenantId: string): Promise<{ live: number; once: number }> {
    const [row] = await t.admin<{ live: number; once: number }[]>`
      select count(*)::int as live,
             count(*) filter (where (select count(*) from fact_embeddings e where e.tenant_id = f.tenant_id and e.fact_id = f.id and e.version = f.version) = 1
                              and (select count(*) from fact_embeddings e where e.tenant_id = f.tenant_id and e.fact_id = f.id) = 1)::int as once
      from facts f where f.tenant_id = ${tenantId} and f.invalidated_at is null`;
    return row!;
  }

  const allEmbedded = (tenantId: string, timeoutMs = 20_000) =>
    eventuallyHolds(
      async () => {
        const v = await vectors(tenantId);
        return v.once === v.live ? v : undefined;
      },
      timeoutMs,
      async () => `not embedded: ${JSON.stringify(await vectors(tenantId))}`,
      50,
    );

  const unfinished = async () =>
    Object.values(await queues.get(embedQueue.name)!.getJobCounts('active', 'waiting', 'delayed', 'prioritized')).reduce((a, b) => a + b, 0);

  it('200 writes of one tenant are one job, and the endpoint sees full batches', async () => {
    const tenantId = uniqueTenant('embed-merge');
    await factsOf(tenantId, 200);
    // As 200 API writes do, concurrently: each asks for the tenant's vectors once it committed.
    await Promise.all(Array.from({ length: 200 }, () => scheduleEmbedding(queues, tenantId)));
    expect(await unfinished()).toBe(1);

    const requestsBefore = fake.requests();
    startEmbedWorker();
    expect(await allEmbedded(tenantId)).toEqual({ live: 200, once: 200 });
    expect(fake.requests() - requestsBefore).toBe(Math.ceil(200 / BATCH));
    await eventuallyHolds(async () => (await unfinished()) === 0, 5000, () => 'the job did not finish');
  });

  it("a request while the tenant's job runs is kept: a fact committed after the job's last read is embedded without the reconciler", async () => {
    const tenantId = uniqueTenant('embed-late');
    await factsOf(tenantId, 1);
    fake.setMode({ kind: 'slow', delayMs: 500 });
    startEmbedWorker();
    await scheduleEmbedding(queues, tenantId);
    // The job has read the one fact and waits for the endpoint: a write commits and asks now.
    await eventuallyHolds(async () => fake.inFlight() > 0, 5000, () => 'the job never asked the endpoint');
    await factsOf(tenantId, 1);
    await scheduleEmbedding(queues, tenantId);
    fake.setMode({ kind: 'ok' });
    expect(await allEmbedded(tenantId, 10_000)).toEqual({ live: 2, once: 2 });
  });

  it('one reconcile run hands a whole backlog to the pipeline, past what one job takes', async () => {
    const tenantId = uniqueTenant('embed-backlog');
    // More than the 1,000 facts a reconcile run used to hand over, and many jobs' share (8 × 16).
    await factsOf(tenantId, 1500);
    const reconcile = reconcileHandler({ db: t.app.db, queues, embeddings: { configured: providers.configured } });
    const result = (await reconcile({}, { job: undefined as never, logger })) as { embedJobs: number };
    expect(result.embedJobs).toBe(1);
    const started = performance.now();
    startEmbedWorker(8);
    expect(await allEmbedded(tenantId, 60_000)).toEqual({ live: 1500, once: 1500 });
    console.info(`[embed jobs] a backlog of 1,500 facts embedded in ${Math.round(performance.now() - started)} ms after one reconcile run`);
    await sleep(100);
    expect(await unfinished()).toBe(0);
    // Nothing left: a second run asks for nothing.
    expect(((await reconcile({}, { job: undefined as never, logger })) as { embedJobs: number }).embedJobs).toBe(0);
  }, 90_000);
});
