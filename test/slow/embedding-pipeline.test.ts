/**
 * The embedding pipeline end to end (DESIGN §8–§9), with every moving part real: the API and the
 * worker as child processes (`src/server.ts`, `workers/index.ts`), PostgreSQL + pgvector, Redis,
 * and the local USE-lite model behind its OpenAI-compatible endpoint (in this test process).
 *
 * What it holds the pipeline to: "needs embedding" is derived from Postgres (a live fact at
 * version v without a `fact_embeddings` row of the model at v), so whatever happens to a worker,
 * to Redis or to the endpoint, every live fact ends with exactly one vector per model, at its
 * current version, under its own tenant.
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalEmbeddingsServer, LOCAL_MODEL_DIMS, startLocalEmbeddingsServer } from '../../src/embeddings/local-server.ts';
import { embeddingText } from '../../src/embeddings/provider.ts';
import type { JobData } from '../../src/jobs/queues.ts';
import { tokenFor } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type Deployment, startDeployment } from '../helpers/deployment.ts';
import { insertFact, uniqueTenant } from '../helpers/factories.ts';
import { alive, hasExited, type RunningProcess } from '../../support/processes.ts';
import { keysUnder } from '../../support/redis.ts';
import { eventually, sleep } from '../../support/wait.ts';

describe('embedding pipeline: API and worker processes, Postgres, Redis, the real local model', () => {
  let db: TestDatabase;
  let server: LocalEmbeddingsServer;
  let deployment: Deployment;
  let env: Record<string, string>;
  let redis: Redis;
  let embedJobs: Queue<JobData>;
  let reconcileJobs: Queue<JobData>;
  const model = 'use-lite-512';

  const kill = (p: RunningProcess) => deployment.kill(p);
  const startWorker = () => deployment.startWorker();
  const post = (token: string, path: string, body: unknown) => deployment.post(token, path, body);
  const get = (token: string, path: string) => deployment.get(token, path);
  const unfinishedEmbedJobs = () => deployment.unfinishedEmbedJobs();

  /** SIGTERM, a clean exit expected; SIGKILL if it does not come. */
  async function stop(p: RunningProcess): Promise<void> {
    const code = await deployment.stop(p, 15_000);
    if (code === 'killed') throw new Error(`process did not stop on SIGTERM; stdout: ${p.stdout().slice(-2000)}`);
    expect(code).toBe(0);
  }

  /**
   * The worker the tests share (a worker process takes seconds to start on this machine): started
   * when a test needs one running, stopped (SIGTERM, clean exit) when a test needs none.
   */
  let shared: RunningProcess | undefined;
  async function runningWorker(): Promise<RunningProcess> {
    if (!shared || hasExited(shared)) shared = await startWorker();
    return shared;
  }
  async function noWorker(): Promise<void> {
    if (shared) await stop(shared);
    shared = undefined;
  }

  /**
   * Waits for two reconcile runs to complete from now (so one ran entirely after this call), then
   * for every embed job to finish: after that, anything the pipeline would redo has been redone.
   */
  async function reconciledAndDrained(): Promise<void> {
    const from = await reconcileJobs.getCompletedCount();
    await eventually(async () => (await reconcileJobs.getCompletedCount()) >= from + 2, 20_000, () => 'no reconcile run completed');
    await eventually(async () => (await unfinishedEmbedJobs()) === 0, 20_000, async () => `embed jobs left: ${JSON.stringify(await embedJobs.getJobCounts())}`);
  }

  /** Writes facts over HTTP, a few at a time; every write must answer 201. */
  async function writeFacts(token: string, bodies: readonly unknown[], parallel = 8): Promise<{ id: string; version: number; ms: number }[]> {
    const written: { id: string; version: number; ms: number }[] = new Array(bodies.length);
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        for (let i = next++; i < bodies.length; i = next++) {
          const response = await post(token, '/v1/memory/facts', bodies[i]);
          expect(response.status, JSON.stringify(response.body)).toBe(201);
          written[i] = { id: response.body.id, version: response.body.version, ms: response.ms };
        }
      }),
    );
    return written;
  }

  interface PipelineState {
    live: number;
    /** Live facts whose one row of the model is at their current version. */
    current: number;
    /** Live facts whose row is at an older version. */
    stale: number;
    /** Live facts without a row of the model. */
    missing: number;
    /** Rows of the model for the tenant, whatever their fact. */
    rows: number;
  }

  /** The tenant's facts against its `fact_embeddings` rows, read as the owner (no RLS in the way). */
  async function state(tenantId: string): Promise<PipelineState> {
    const [facts] = await db.admin<{ live: number; current: number; stale: number; missing: number }[]>`
      select count(*)::int as live,
             count(*) filter (where e.version = f.version)::int as current,
             count(*) filter (where e.version < f.version)::int as stale,
             count(*) filter (where e.fact_id is null)::int as missing
      from facts f
      left join fact_embeddings e on e.tenant_id = f.tenant_id and e.fact_id = f.id and e.model = ${model}
      where f.tenant_id = ${tenantId} and f.invalidated_at is null`;
    const [rows] = await db.admin<{ rows: number }[]>`
      select count(*)::int as rows from fact_embeddings where tenant_id = ${tenantId} and model = ${model}`;
    return { ...facts!, rows: rows!.rows };
  }

  /** Waits until every live fact of the tenant has its vector at its current version. */
  function settled(tenantId: string, timeoutMs: number): Promise<PipelineState> {
    return eventually(
      async () => {
        const s = await state(tenantId);
        return s.live > 0 && s.current === s.live ? s : undefined;
      },
      timeoutMs,
      async () => `not every fact embedded: ${JSON.stringify(await state(tenantId))}`,
      200,
    );
  }

  /**
   * The strict end state: per (fact, model) exactly one row, at the fact's version, under the
   * fact's tenant, with the model's dimension — none missing, none stale, none extra.
   */
  async function expectExactlyOneCurrentVectorEach(tenantId: string, factIds: readonly string[]): Promise<void> {
    const rows = await db.admin<{ id: string; fact_version: number; versions: number[]; dims: number[]; tenants: string[] }[]>`
      select f.id, f.version as fact_version,
             coalesce(array_agg(e.version) filter (where e.fact_id is not null), '{}') as versions,
             coalesce(array_agg(e.dims) filter (where e.fact_id is not null), '{}') as dims,
             coalesce(array_agg(e.tenant_id) filter (where e.fact_id is not null), '{}') as tenants
      from facts f
      left join fact_embeddings e on e.fact_id = f.id and e.model = ${model}
      where f.tenant_id = ${tenantId} and f.invalidated_at is null
      group by f.id, f.version`;
    expect(rows.map((r) => r.id).sort()).toEqual([...factIds].sort());
    const wrong = rows.filter((r) => r.versions.length !== 1 || r.versions[0] !== r.fact_version || r.dims[0] !== LOCAL_MODEL_DIMS || r.tenants[0] !== tenantId);
    expect(wrong, `facts without exactly one current vector: ${JSON.stringify(wrong.slice(0, 5))}`).toEqual([]);
    const s = await state(tenantId);
    expect(s).toEqual({ live: factIds.length, current: factIds.length, stale: 0, missing: 0, rows: factIds.length });
  }

  async function vectorOf(tenantId: string, factId: string): Promise<{ version: number; embedding: string } | undefined> {
    const [row] = await db.admin<{ version: number; embedding: string }[]>`
      select version, embedding::text as embedding from fact_embeddings
      where tenant_id = ${tenantId} and fact_id = ${factId} and model = ${model}`;
    return row;
  }

  /** The tenant's embed jobs not finished yet. */
  async function unfinishedEmbedJobsOf(tenantId: string): Promise<number> {
    const jobs = await embedJobs.getJobs(['active', 'waiting', 'delayed', 'prioritized']);
    return jobs.filter((job) => (job.data.payload as { tenantId?: string }).tenantId === tenantId).length;
  }

  /** Every Redis key of this deployment (this file's prefix). */
  const keysOfPrefix = () => keysUnder(redis, deployment.prefix);

  const cosine = (a: number[], b: number[]) => {
    let dot = 0;
    let na = 0;
    let nb = 0;
    for (let i = 0; i < a.length; i++) {
      dot += a[i]! * b[i]!;
      na += a[i]! * a[i]!;
      nb += b[i]! * b[i]!;
    }
    return dot / Math.sqrt(na * nb);
  };

  /** What the endpoint answers for one text, asked directly (counts as one request). */
  async function embedDirectly(text: string): Promise<number[]> {
    const response = await fetch(`${server.url}/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, input: [text] }),
    });
    const body = (await response.json()) as { data: { embedding: number[] }[] };
    return body.data[0]!.embedding;
  }

  beforeAll(async () => {
    [db, server] = await Promise.all([createTestDatabase(), startLocalEmbeddingsServer({ port: 0 })]);
    expect(server.model).toBe(model);
    deployment = await startDeployment({
      db,
      prefix: `mnemo-pipe-${db.name}`,
      embeddings: { url: server.url, model: server.model },
      env: { KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE: '16', MNEMO_RECONCILE_EVERY_MS: '2000', MNEMO_JOB_LOCK_MS: '3000' },
    });
    ({ env, connection: redis } = deployment);
    ({ embed: embedJobs, reconcile: reconcileJobs } = deployment.queues);
    expect(deployment.api.stdout()).toContain(`  Memory search: keyword and by meaning (openai-compat ${model} at ${server.url})\n`);
  });

  afterAll(async () => {
    await deployment?.close();
    await server?.close().catch(() => {});
    await db?.drop();
  });

  it(
    'writes get embedded; a supersede moves the vector to the new version; a verify carries it without asking the endpoint',
    async () => {
      const tenantId = uniqueTenant('pipe');
      const admin = await tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' });
      await runningWorker();
      const topics = ['washing machine spare parts', 'quarterly invoice for the bakery', 'hiking boots for the alps', 'a cat that sleeps on keyboards', 'renewing the office lease', 'train delays in winter'];
      const written = await writeFacts(
        admin,
        Array.from({ length: 12 }, (_, i) => ({ type: 'acme.note', content: { text: `Note ${i}: ${topics[i % topics.length]}.` } })),
      );
      expect(written.every((w) => w.version === 1)).toBe(true);
      const ids = written.map((w) => w.id);

      const started = performance.now();
      await settled(tenantId, 30_000);
      console.info(`[pipeline] 12 writes embedded in ${Math.round(performance.now() - started)} ms`);
      await expectExactlyOneCurrentVectorEach(tenantId, ids);

      // The worker registered the model it was configured with, learning its dimension.
      expect([...(await db.admin`select model, dims, state from embedding_models`)]).toEqual([{ model, dims: LOCAL_MODEL_DIMS, state: 'active' }]);
      expect((await get(admin, `/v1/memory/facts/${ids[0]}`)).body).toMatchObject({ version: 1, embeddingModel: model });

      // Supersede with new content: the fact's one row moves to version 2, with the new text's vector.
      const [a, b] = ids as [string, string];
      const beforeA = (await vectorOf(tenantId, a))!;
      expect(beforeA.version).toBe(1);
      const superseded = await post(admin, `/v1/memory/facts/${a}/supersede`, { content: { text: 'Note 0, corrected: the customer now wants a tumble dryer belt.' } });
      expect(superseded.status).toBe(200);
      expect(superseded.body.version).toBe(2);
      const afterA = await eventually(
        async () => {
          const v = await vectorOf(tenantId, a);
          return v && v.version === 2 ? v : undefined;
        },
        20_000,
        async () => `vector of the superseded fact: ${JSON.stringify((await vectorOf(tenantId, a))?.version)}`,
      );
      expect(afterA.embedding).not.toBe(beforeA.embedding);
      // It is the new text's vector (what the endpoint says for that text), not the old one carried.
      const expected = await embedDirectly(embeddingText('acme.note', superseded.body.content));
      expect(cosine(JSON.parse(afterA.embedding) as number[], expected)).toBeGreaterThan(0.999);
      expect(cosine(JSON.parse(beforeA.embedding) as number[], expected)).toBeLessThan(0.99);
      await expectExactlyOneCurrentVectorEach(tenantId, ids);
      expect((await get(admin, `/v1/memory/facts/${a}`)).body).toMatchObject({ version: 2, embeddingModel: model });

      // Verify: same content, next version. The vector is carried in the verify's own
      // transaction, and nothing (job or reconciler) asks the endpoint again.
      await eventually(async () => (await unfinishedEmbedJobs()) === 0, 20_000, async () => `embed jobs left: ${await unfinishedEmbedJobs()}`);
      const beforeB = (await vectorOf(tenantId, b))!;
      const requestsBefore = server.requests();
      const verified = await post(admin, `/v1/memory/facts/${b}/verify`, {});
      expect(verified.status).toBe(200);
      expect(verified.body).toMatchObject({ version: 2, trust: 'verified', embeddingModel: model });
      expect(await vectorOf(tenantId, b)).toEqual({ version: 2, embedding: beforeB.embedding });
      // A whole reconcile run after the verify, and any job it or the verify caused.
      await reconciledAndDrained();
      expect(server.requests()).toBe(requestsBefore);
      expect(await vectorOf(tenantId, b)).toEqual({ version: 2, embedding: beforeB.embedding });
      await expectExactlyOneCurrentVectorEach(tenantId, ids);
    },
    60_000,
  );

  it(
    'a supersede with equal content keeps its vector (carried, not recomputed), whatever the order of its keys',
    async () => {
      const tenantId = uniqueTenant('pipe-equal');
      const admin = await tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' });
      await runningWorker();
      const single = { text: 'The customer orders a drain pump for a washing machine.' };
      // "title" before "text": PostgreSQL's jsonb keeps keys shorter-first, so it reads back as {text, title}.
      const reordered = { title: 'Spare parts', text: 'The customer orders a door seal for a washing machine.' };
      const [one, two] = await writeFacts(admin, [
        { type: 'acme.note', content: single },
        { type: 'acme.note', content: reordered },
      ]);
      await settled(tenantId, 20_000);
      await eventually(async () => (await unfinishedEmbedJobs()) === 0, 20_000, async () => `embed jobs left: ${await unfinishedEmbedJobs()}`);
      const [beforeOne, beforeTwo] = [(await vectorOf(tenantId, one!.id))!, (await vectorOf(tenantId, two!.id))!];
      const requestsBefore = server.requests();

      // Same type, same content, so the same text would be embedded: the vector is carried in the
      // supersede's own transaction, and the answer already names the model.
      const againOne = await post(admin, `/v1/memory/facts/${one!.id}/supersede`, { content: single });
      expect(againOne.status).toBe(200);
      expect(againOne.body).toMatchObject({ version: 2, embeddingModel: model });
      const carried = async (id: string, before: { embedding: string }) => {
        const now = await vectorOf(tenantId, id);
        return { version: now?.version, sameVector: now?.embedding === before.embedding };
      };
      expect(await carried(one!.id, beforeOne)).toEqual({ version: 2, sameVector: true });

      // The very same body again, for a fact whose content has two keys.
      const againTwo = await post(admin, `/v1/memory/facts/${two!.id}/supersede`, { content: reordered });
      expect(againTwo.status).toBe(200);
      expect(againTwo.body.version).toBe(2);
      expect(againTwo.body.content).toEqual(reordered);
      expect(await carried(two!.id, beforeTwo), 'the vector of an equal-content supersede was not carried').toEqual({ version: 2, sameVector: true });
      expect(againTwo.body.embeddingModel).toBe(model);

      await reconciledAndDrained();
      expect(server.requests(), 'the endpoint was asked again for an unchanged text').toBe(requestsBefore);
    },
    45_000,
  );

  it(
    'a worker killed (SIGKILL) mid-batch: a new worker finishes, every fact with exactly one vector at its version',
    async () => {
      const tenantId = uniqueTenant('pipe-kill');
      const admin = await tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' });
      const total = 200;
      const sentences = [
        'The customer orders spare parts for a washing machine and asks when the drain pump will arrive.',
        'Invoices for the bakery are paid at the end of each quarter, after the accountant has checked them.',
        'The hiking group prefers routes in the alps with huts that serve warm food in the evening.',
      ];
      const topics = ['spare parts', 'quarterly invoices', 'mountain huts', 'delivery dates', 'customer calls', 'open questions', 'returns'];
      // Written while no worker runs: the API asks for the tenant's vectors after each write, and
      // the requests merge into one job, which reads the facts from Postgres in batches.
      await noWorker();
      const writeStarted = performance.now();
      const written = await writeFacts(
        admin,
        Array.from({ length: total }, (_, i) => ({
          type: 'acme.note',
          content: { text: `Fact ${i}. ${sentences[i % 3]} Reference ${i * 7919}, filed under ${topics[(i * 7) % topics.length]}.` },
        })),
      );
      const ids = written.map((w) => w.id);
      console.info(`[pipeline] ${total} writes in ${Math.round(performance.now() - writeStarted)} ms`);
      expect(await unfinishedEmbedJobsOf(tenantId)).toBe(1);
      const requestsBefore = server.requests();

      const first = await startWorker();
      const embedStarted = performance.now();
      const atKill = await eventually(
        async () => {
          const s = await state(tenantId);
          return s.current >= 25 ? s : undefined;
        },
        30_000,
        async () => `nothing embedded yet: ${JSON.stringify(await state(tenantId))}`,
        50,
      );
      // Mid-batch: the worker holds the tenant's job (BullMQ's lock on it) when it dies.
      const heldAtKill = (await embedJobs.getJobs(['active'])).map((job) => job.id!);
      const workerPid = first.child.pid!;
      await kill(first);
      await eventually(async () => !alive(workerPid), 5000, () => `still running: ${workerPid}`);
      expect(atKill.current).toBeLessThan(total);

      // Dead for real: nothing is stored any more.
      await sleep(300);
      const frozen = await state(tenantId);
      await sleep(1200);
      expect(await state(tenantId)).toEqual(frozen);
      expect(frozen.current).toBeLessThan(total);
      console.info(`[pipeline] killed the worker with ${frozen.current}/${total} embedded, ${Math.round(performance.now() - embedStarted)} ms after it started`);

      expect(heldAtKill.length).toBeGreaterThan(0);

      shared = await startWorker();
      const resumed = performance.now();
      await settled(tenantId, 60_000);
      console.info(
        `[pipeline] a new worker embedded the other ${total - frozen.current} in ${Math.round(performance.now() - resumed)} ms; ` +
          `endpoint requests for ${total} facts in batches of ${env.KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE}: ${server.requests() - requestsBefore}`,
      );
      // Batches, not one request per fact: at most the batches of both workers' passes, and what
      // the killed worker had in flight.
      expect(server.requests() - requestsBefore).toBeLessThanOrEqual(2 * Math.ceil(total / Number(env.KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE)) + 2);
      await expectExactlyOneCurrentVectorEach(tenantId, ids);
      // The jobs the killed worker held are not stuck: their lock (MNEMO_JOB_LOCK_MS) lapsed, they
      // ran again and completed (completed embed jobs are removed; a failed one would be kept).
      await eventually(
        async () => (await Promise.all(heldAtKill.map((id) => embedJobs.getJob(id)))).every((job) => job === undefined),
        20_000,
        async () => `jobs of the killed worker: ${JSON.stringify(await Promise.all(heldAtKill.map(async (id) => [id, await (await embedJobs.getJob(id))?.getState()])))}`,
      );
      await eventually(async () => (await unfinishedEmbedJobs()) === 0, 20_000, async () => `embed jobs left: ${JSON.stringify(await embedJobs.getJobCounts())}`);
      await expectExactlyOneCurrentVectorEach(tenantId, ids);
    },
    // The real model embeds a few facts a second when the machine is loaded.
    150_000,
  );

  it(
    'Redis loses every job while no worker runs: the reconciler finds the facts in Postgres and they get embedded',
    async () => {
      const tenantId = uniqueTenant('pipe-flush');
      const admin = await tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' });
      await noWorker();
      const written = await writeFacts(
        admin,
        Array.from({ length: 24 }, (_, i) => ({ type: 'acme.note', content: { text: `Flushed ${i}: the delivery of order ${i} is late again.` } })),
      );
      const ids = written.map((w) => w.id);
      // The API asked for them (one job for the tenant), and nothing took it.
      expect(await unfinishedEmbedJobsOf(tenantId)).toBe(1);
      expect(await state(tenantId)).toMatchObject({ live: ids.length, current: 0 });

      // FLUSHDB, as it hits this deployment. The Redis of this test run is shared with the other
      // test files running in parallel (each under its own MNEMO_QUEUE_PREFIX), so a real FLUSHDB
      // would wipe their queues too; deleting every key under this file's prefix is exactly what
      // FLUSHDB does to the deployment under test, and nothing more.
      const keys = await keysOfPrefix();
      expect(keys.length).toBeGreaterThan(0);
      await redis.del(...keys);
      expect(await keysOfPrefix()).toEqual([]);
      expect(await unfinishedEmbedJobs()).toBe(0);

      const started = performance.now();
      await runningWorker();
      await settled(tenantId, 30_000);
      console.info(`[pipeline] after the flush, ${ids.length} facts embedded ${Math.round(performance.now() - started)} ms after starting a worker`);
      await expectExactlyOneCurrentVectorEach(tenantId, ids);
    },
    45_000,
  );

  it(
    'Redis loses every job while the worker runs: the reconciler keeps running and finds what was lost',
    async () => {
      const tenantId = uniqueTenant('pipe-flush-live');
      const worker = await runningWorker();
      try {
        // The worker has been reconciling on its schedule.
        await eventually(async () => (await reconcileJobs.getCompletedCount()) > 0, 10_000, () => 'no reconcile run completed');

        // FLUSHDB under the running worker (prefix-scoped, for the reason given in the test before).
        await redis.del(...(await keysOfPrefix()));
        expect(await keysOfPrefix()).toEqual([]);

        // Writes whose embed jobs Redis lost: committed in Postgres (as the API commits them before it
        // queues), with no job anywhere. Only the reconciler can find them.
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) {
          const row = await insertFact(db.app.db, tenantId, { type: 'acme.note', content: { text: `Lost job ${i}: the parcel for order ${i} went missing.` } });
          ids.push(row.id);
        }
        expect(await state(tenantId)).toMatchObject({ live: ids.length, current: 0 });

        // A reconcile run comes every 2 s (MNEMO_RECONCILE_EVERY_MS); allow five.
        await settled(tenantId, 10_000).catch(async (error: Error) => {
          throw new Error(
            `${error.message}; reconcile runs completed since the flush: ${await reconcileJobs.getCompletedCount()}, ` +
              `reconcile keys: ${JSON.stringify((await keysOfPrefix()).filter((k) => k.includes(':reconcile:')))}, worker alive: ${worker.child.exitCode === null}`,
          );
        });
        await expectExactlyOneCurrentVectorEach(tenantId, ids);
      } finally {
        // The next test gets a worker that has not been through this.
        await noWorker();
      }
    },
    45_000,
  );

  it(
    'the embeddings endpoint down for a while: writes answer 201 promptly, and vectors catch up once it is back',
    async () => {
      const tenantId = uniqueTenant('pipe-down');
      const admin = await tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' });
      const worker = await runningWorker();
      const logFrom = worker.stdout().length;
      const port = Number(new URL(server.url).port);
      const url = server.url;
      await server.close();
      const downAt = performance.now();

      const written = await writeFacts(
        admin,
        Array.from({ length: 10 }, (_, i) => ({ type: 'acme.note', content: { text: `Written during the outage ${i}: the boiler needs a new valve.` } })),
        2,
      );
      const ids = written.map((w) => w.id);
      const slowest = Math.max(...written.map((w) => w.ms));
      console.info(`[pipeline] writes while the endpoint is down: slowest ${Math.round(slowest)} ms`);
      expect(slowest).toBeLessThan(2000);

      // The worker tried and failed (and will try again); nothing was embedded meanwhile.
      const failed = /"msg":"job failed".*"queue":"embed"|"queue":"embed".*"msg":"job failed"/;
      await eventually(async () => failed.test(worker.stdout().slice(logFrom)), 20_000, () => `no failed embed job logged: ${worker.stdout().slice(logFrom, logFrom + 3000)}`);
      await sleep(Math.max(0, 4000 - (performance.now() - downAt)));
      expect(await state(tenantId)).toMatchObject({ live: ids.length, current: 0 });

      server = await startLocalEmbeddingsServer({ port });
      expect(server.url).toBe(url);
      const backAt = performance.now();
      console.info(`[pipeline] endpoint down for ${Math.round(backAt - downAt)} ms`);
      await settled(tenantId, 45_000);
      console.info(`[pipeline] caught up ${Math.round(performance.now() - backAt)} ms after the endpoint came back`);
      await expectExactlyOneCurrentVectorEach(tenantId, ids);
    },
    60_000,
  );

  it(
    'tenant isolation: each tenant\'s facts are embedded under its own tenant_id, and semantic search stays inside it',
    async () => {
      const [tenantA, tenantB] = [uniqueTenant('pipe-a'), uniqueTenant('pipe-b')];
      const [adminA, adminB] = await Promise.all([
        tokenFor({ tid: tenantA, sub: 'admin-a', role: 'admin' }),
        tokenFor({ tid: tenantB, sub: 'admin-b', role: 'admin' }),
      ]);
      const same = { type: 'acme.note', content: { text: 'Both tenants wrote this very same sentence about a red bicycle.' } };
      await runningWorker();
      const [writtenA, writtenB] = await Promise.all([
        writeFacts(adminA, [
          same,
          { type: 'acme.note', content: { text: 'Tenant A: the washing machine needs a new drain pump.' } },
          { type: 'acme.note', scope: { projectId: 'p1' }, content: { text: 'Tenant A: invoices are paid quarterly.' } },
        ]),
        writeFacts(adminB, [
          same,
          { type: 'acme.note', content: { text: 'Tenant B: the hiking boots are too small.' } },
          { type: 'acme.note', scope: { userId: 'u-9' }, content: { text: 'Tenant B: the cat sleeps on the keyboard.' } },
        ]),
      ]);
      const idsA = writtenA.map((w) => w.id);
      const idsB = writtenB.map((w) => w.id);
      await Promise.all([settled(tenantA, 30_000), settled(tenantB, 30_000)]);
      await expectExactlyOneCurrentVectorEach(tenantA, idsA);
      await expectExactlyOneCurrentVectorEach(tenantB, idsB);

      // No vector sits under another tenant than its fact's, and none without its fact.
      const crossed = await db.admin`
        select e.tenant_id, e.fact_id, f.tenant_id as fact_tenant from fact_embeddings e
        join facts f on f.id = e.fact_id where e.tenant_id <> f.tenant_id`;
      expect([...crossed]).toEqual([]);
      const orphans = await db.admin`
        select e.tenant_id, e.fact_id from fact_embeddings e
        where not exists (select 1 from facts f where f.tenant_id = e.tenant_id and f.id = e.fact_id)`;
      expect([...orphans]).toEqual([]);
      const byTenant = await db.admin<{ tenant_id: string; fact_id: string }[]>`
        select tenant_id, fact_id from fact_embeddings where tenant_id in ${db.admin([tenantA, tenantB])} order by tenant_id, fact_id`;
      expect(byTenant.filter((r) => r.tenant_id === tenantA).map((r) => r.fact_id).sort()).toEqual([...idsA].sort());
      expect(byTenant.filter((r) => r.tenant_id === tenantB).map((r) => r.fact_id).sort()).toEqual([...idsB].sort());

      // The same sentence in both tenants: two facts, two vectors, each under its own tenant.
      const sharedRows = await db.admin<{ tenant_id: string; fact_id: string }[]>`
        select tenant_id, fact_id from fact_embeddings where fact_id in ${db.admin([idsA[0]!, idsB[0]!])} order by fact_id`;
      expect(sharedRows.map((r) => [r.tenant_id, r.fact_id]).sort()).toEqual([[tenantA, idsA[0]], [tenantB, idsB[0]]].sort());

      // Search by meaning over those vectors finds only the caller's tenant's facts.
      const searchB = await post(adminB, '/v1/memory/retrieve', { mode: 'semantic', query: 'washing machine drain pump', limit: 100 });
      expect(searchB.status).toBe(200);
      const foundB = (searchB.body.results as { fact: { id: string; scope: { tenantId: string } } }[]).map((r) => r.fact);
      expect(foundB.length).toBeGreaterThan(0);
      expect(foundB.every((f) => f.scope.tenantId === tenantB && idsB.includes(f.id))).toBe(true);
      const searchA = await post(adminA, '/v1/memory/retrieve', { mode: 'semantic', query: 'washing machine drain pump', limit: 100 });
      expect(searchA.status).toBe(200);
      const foundA = (searchA.body.results as { fact: { id: string; scope: { tenantId: string } } }[]).map((r) => r.fact);
      expect(foundA[0]?.id).toBe(idsA[1]);
      expect(foundA.every((f) => f.scope.tenantId === tenantA && idsA.includes(f.id))).toBe(true);
    },
    45_000,
  );
});
