/**
 * The metrics recorded below the HTTP layer, read from this process's registry as a scrape would:
 * the reconcile pass's embedding backlog (missing and stale vectors, over a real database), a
 * search by meaning's duration (a real embeddings endpoint), and jobs run by the in-process runner
 * (the embedded mode's jobs: durations, waits, failures and queue depth).
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { needs } from '../helpers/needs.ts';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import type { Principal } from '../../src/auth/permissions.ts';
import { createEmbeddingProviders, type EmbeddingProviders } from '../../src/embeddings/registry.ts';
import { startInProcessJobs } from '../../src/jobs/in-process.ts';
import { type BullQueues, closeQueues, createQueues, defineQueue, embedQueue, reconcileQueue } from '../../src/jobs/queues.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { embedPending, ensureConfiguredModel, type ModelInfo } from '../../src/memory/facts/vectors.ts';
import { writeFact } from '../../src/memory/facts/insert.ts';
import { supersedeFact } from '../../src/memory/facts/revise.ts';
import { retrieve } from '../../src/memory/retrieval/retrieve.ts';
import { registry } from '../../src/foundation/metrics.ts';
import { reconcileHandler } from '../../workers/reconcile.ts';
import { type FakeEmbeddings, startFakeEmbeddings } from '../../support/fake-embeddings.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { parseMetrics, type Sample, valueOf } from '../helpers/metrics.ts';
import { eventually } from '../../support/wait.ts';

const logger = createLogger('error');
const metrics = async (): Promise<Sample[]> => parseMetrics(await registry.metrics());
const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin-1', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

describe('embedding backlog and search by meaning', needs('redis'), () => {
  let t: TestDatabase;
  let fake: FakeEmbeddings;
  let providers: EmbeddingProviders;
  let model: ModelInfo;
  let producer: Redis;
  let queues: BullQueues;

  beforeAll(async () => {
    [t, fake] = await Promise.all([createTestDatabase(), startFakeEmbeddings()]);
    providers = createEmbeddingProviders({ kind: 'openai-compat', url: fake.url, model: fake.model, apiKey: undefined, batchSize: 16 });
    model = await ensureConfiguredModel(t.app.db, providers.configured);
    producer = createRedis(inject('redisUrl'), 'producer');
    // The reconcile pass queues embed jobs here; nothing runs them.
    queues = createQueues(producer, [reconcileQueue, embedQueue], `mnemo-test-${randomBytes(4).toString('hex')}`);
  });
  afterAll(async () => {
    if (queues) {
      await Promise.all([...queues.values()].map((q) => q.obliterate({ force: true })));
      await closeQueues(queues);
    }
    await producer?.quit();
    await fake?.close();
    await t?.drop();
  });

  it('mnemo_embedding_backlog is what the last reconcile pass found missing or stale, over every tenant', async () => {
    const reconcile = reconcileHandler({ db: t.app.db, queues, embeddings: { configured: providers.configured } });
    const pass = () => reconcile({}, { job: undefined as never, logger });
    const backlog = async () => valueOf(await metrics(), 'mnemo_embedding_backlog', { model: model.model });
    const [one, two] = [uniqueTenant('backlog'), uniqueTenant('backlog')];
    const written = [];
    for (const [tenantId, n] of [[one, 2], [two, 1]] as const) {
      for (let i = 0; i < n; i++) written.push(await writeFact({ db: t.app.db, principal: admin(tenantId) }, { type: 'acme.note', content: { text: `fact ${i} of ${tenantId}` } }));
    }

    const before = Date.now() / 1000;
    await pass();
    expect(await backlog()).toBe(3);
    expect(valueOf(await metrics(), 'mnemo_reconcile_last_pass_timestamp_seconds')).toBeGreaterThanOrEqual(Math.floor(before));

    // Written between passes: the gauge holds the last pass's figure until the next one.
    await writeFact({ db: t.app.db, principal: admin(one) }, { type: 'acme.note', content: { text: 'one more' } });
    expect(await backlog()).toBe(3);

    for (const tenantId of [one, two]) while ((await embedPending(t.app.db, providers.configured, tenantId, model, { batch: 16 })) > 0);
    await pass();
    expect(await backlog()).toBe(0);

    // A new revision makes its vector stale.
    await supersedeFact({ db: t.app.db, principal: admin(two) }, written[2]!.id, { content: { text: 'changed' } });
    await pass();
    expect(await backlog()).toBe(1);
  });

  it('a search by meaning is timed under mode="semantic"', async () => {
    const tenantId = uniqueTenant('semantic');
    const embedder = { embed: async (name: string, text: string) => (await providers.forModel(name).embed([text]))[0]! };
    const count = async () => valueOf(await metrics(), 'mnemo_retrieval_duration_seconds_count', { mode: 'semantic' }) ?? 0;
    const before = await count();
    const { journal } = await retrieve({ db: t.app.db, principal: admin(tenantId), embedder }, { mode: 'semantic', query: 'anything' });
    expect(journal).toMatchObject({ mode: 'semantic', embeddingModel: model.model });
    expect(await count()).toBe(before + 1);
  });
});

describe('jobs run in-process', () => {
  let t: TestDatabase;

  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('report their durations, waits, failures and queue depth as BullMQ workers do', async () => {
    const queueName = `metrics-${randomBytes(3).toString('hex')}`;
    const echo = defineQueue({ name: queueName, payload: z.strictObject({ fail: z.boolean() }), jobOptions: { attempts: 1 } });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const jobs = startInProcessJobs({
      definitions: [echo],
      registry: {
        [queueName]: async ({ fail }: { fail: boolean }) => {
          await gate;
          if (fail) throw new Error('failed on purpose');
        },
      },
      db: t.app.db,
      logger,
      concurrency: 1,
      reconcileEveryMs: 3_600_000,
      retentionEveryMs: 3_600_000,
    });
    const value = async (name: string, labels: Record<string, string>) => valueOf(await metrics(), name, { queue: queueName, ...labels });
    try {
      const queue = jobs.queues.get(queueName)!;
      await queue.add(queueName, { payload: { fail: false } });
      await queue.add(queueName, { payload: { fail: true } });
      // One runs (held at the gate), the other waits behind it (concurrency 1).
      await eventually(async () => (await value('mnemo_queue_jobs', { state: 'active' })) === 1, 5000, () => 'no active job');
      expect(await value('mnemo_queue_jobs', { state: 'waiting' })).toBe(1);
      expect(await value('mnemo_queue_jobs', { state: 'delayed' })).toBe(0);

      release();
      await eventually(async () => (await value('mnemo_job_failures_total', { final: 'true' })) === 1, 5000, () => 'no failure counted');
      expect(await value('mnemo_job_duration_seconds_count', { outcome: 'completed' })).toBe(1);
      expect(await value('mnemo_job_duration_seconds_count', { outcome: 'failed' })).toBe(1);
      expect(await value('mnemo_job_wait_seconds_count', {})).toBe(2);
      expect(await value('mnemo_queue_jobs', { state: 'active' })).toBe(0);
    } finally {
      release();
      await jobs.close();
    }
    // A closed runner's queues are no longer reported.
    expect(await value('mnemo_queue_jobs', { state: 'waiting' })).toBeUndefined();
  });
});
