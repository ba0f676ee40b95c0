/**
 * The job pipeline as operators run it, for the fault rows that break it: the API
 * (`src/server.ts`) and workers (`workers/index.ts`) as child processes, a test database of its
 * own on the machine's PostgreSQL, a private redis-server without persistence (killable), and a
 * fake OpenAI-compatible embeddings endpoint (which can be taken down, slowed, or made to answer
 * the wrong dimension). What is left afterwards is read as the tables' owner.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { type JobData, embedQueue, erasureQueue, reconcileQueue } from '../../../src/jobs/queues.ts';
import { createRedis } from '../../../src/jobs/redis.ts';
import { TEST_ERASURE_KEY, TEST_SECRET, tokenFor } from '../../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { freePort, killProcess, type RunningProcess, startProcess, stopProcess } from '../../helpers/process.ts';
import { keysUnder } from '../../helpers/redis.ts';
import { type FakeEmbeddings, startFakeEmbeddings } from './fake-embeddings.ts';
import { type PrivateRedis, startPrivateRedis } from './redis-server.ts';

export interface HttpResult {
  status: number;
  body: any;
  ms: number;
}

/** Per live fact of a tenant, its vectors of the model: exactly one at its version is right. */
export interface VectorState {
  live: number;
  /** Live facts with exactly one row of the model, at their current version. */
  once: number;
  /** Live facts with no row of the model. */
  missing: number;
  /** Live facts whose row is at another version. */
  stale: number;
}

export interface JobsStack {
  apiUrl: string;
  db: TestDatabase;
  redis: PrivateRedis;
  fake: FakeEmbeddings;
  env: Record<string, string>;
  api: RunningProcess;
  /** Starts a worker process and waits for its startup line. */
  startWorker(extra?: Record<string, string>): Promise<RunningProcess>;
  /** SIGKILL, as a crash (the process is node itself, so the signal reaches the program). */
  kill(p: RunningProcess): Promise<void>;
  /** SIGTERM, with SIGKILL after 15 s. */
  stop(p: RunningProcess): Promise<number | null>;
  admin(tenantId: string): Promise<string>;
  post(token: string, path: string, body: unknown): Promise<HttpResult>;
  get(token: string, path: string): Promise<HttpResult>;
  vectorState(tenantId: string): Promise<VectorState>;
  /** Content left (facts and revisions) and vectors left, over the given fact ids. */
  leftOf(tenantId: string, ids: readonly string[]): Promise<{ content: number; revisionContent: number; vectors: number; notErased: number }>;
  /** Embed jobs not finished (waiting, active, delayed…). */
  unfinishedEmbedJobs(): Promise<number>;
  /** Keys of this deployment in Redis whose value (any field, member or entry) contains `text`. */
  redisKeysHolding(text: string): Promise<string[]>;
  queues: { embed: Queue<JobData>; erasure: Queue<JobData>; reconcile: Queue<JobData> };
  close(): Promise<void>;
}

export interface JobsStackOptions {
  /** Extra or overriding environment for the API and workers. */
  env?: Record<string, string>;
}

export async function startJobsStack(options: JobsStackOptions = {}): Promise<JobsStack> {
  const [db, redis, fake] = await Promise.all([createTestDatabase(), startPrivateRedis(), startFakeEmbeddings()]);
  const port = await freePort();
  const apiUrl = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    DATABASE_URL: db.appUrl,
    REDIS_URL: redis.url,
    MNEMO_JWT_SECRET: TEST_SECRET,
    MNEMO_ERASURE_KEY: TEST_ERASURE_KEY,
    PORT: String(port),
    MNEMO_QUEUE_PREFIX: 'mnemo-faults-jobs',
    KINDGI_MEMORY_EMBEDDINGS: 'openai-compat',
    KINDGI_MEMORY_EMBEDDINGS_URL: fake.url,
    KINDGI_MEMORY_EMBEDDINGS_MODEL: fake.model,
    KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE: '16',
    MNEMO_RECONCILE_EVERY_MS: '1000',
    MNEMO_JOB_LOCK_MS: '2000',
    MNEMO_SHUTDOWN_TIMEOUT_MS: '5000',
    LOG_LEVEL: 'info',
    ...options.env,
  };
  const processes = new Set<RunningProcess>();
  const connection: Redis = createRedis(redis.url, 'producer');
  // A Redis killed under the test's own handles: they reconnect by themselves; errors meanwhile are expected.
  connection.on('error', () => {});
  const queue = (name: string) => new Queue<JobData>(name, { connection, prefix: env.MNEMO_QUEUE_PREFIX });
  const queues = { embed: queue(embedQueue.name), erasure: queue(erasureQueue.name), reconcile: queue(reconcileQueue.name) };
  for (const q of Object.values(queues)) q.on('error', () => {});

  const api = startProcess('src/server.ts', [], env);
  processes.add(api);
  try {
    await api.waitFor('"api listening"', 30_000);
  } catch (error) {
    await killProcess(api);
    throw error;
  }

  const request = async (method: string, token: string, path: string, body?: unknown): Promise<HttpResult> => {
    const started = performance.now();
    const response = await fetch(`${apiUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: kept as text
    }
    return { status: response.status, body: parsed, ms: performance.now() - started };
  };

  const kill = async (p: RunningProcess) => {
    await killProcess(p);
    processes.delete(p);
  };

  return {
    apiUrl,
    db,
    redis,
    fake,
    env,
    api,
    queues,
    async startWorker(extra = {}) {
      const worker = startProcess('workers/index.ts', [], { ...env, ...extra });
      processes.add(worker);
      await worker.waitFor('"worker started"', 30_000);
      return worker;
    },
    kill,
    async stop(p) {
      const code = await stopProcess(p, 15_000);
      processes.delete(p);
      return code === 'killed' ? null : code;
    },
    admin: (tenantId) => tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' }),
    post: (token, path, body) => request('POST', token, path, body),
    get: (token, path) => request('GET', token, path),
    async vectorState(tenantId) {
      const [row] = await db.admin<VectorState[]>`
        select count(*)::int as live,
               count(*) filter (where v.n = 1 and v.versions[1] = f.version)::int as once,
               count(*) filter (where coalesce(v.n, 0) = 0)::int as missing,
               count(*) filter (where v.n >= 1 and not (f.version = all(v.versions)))::int as stale
        from facts f
        left join lateral (
          select count(*)::int as n, array_agg(e.version) as versions from fact_embeddings e
          where e.tenant_id = f.tenant_id and e.fact_id = f.id and e.model = ${fake.model}
        ) v on true
        where f.tenant_id = ${tenantId} and f.invalidated_at is null`;
      return row!;
    },
    async leftOf(tenantId, ids) {
      const [row] = await db.admin<{ content: number; revisionContent: number; vectors: number; notErased: number }[]>`
        select (select count(*)::int from facts where tenant_id = ${tenantId} and id = any(${ids}::uuid[]) and content is not null) as content,
               (select count(*)::int from fact_revisions where tenant_id = ${tenantId} and fact_id = any(${ids}::uuid[]) and content is not null) as "revisionContent",
               (select count(*)::int from fact_embeddings where tenant_id = ${tenantId} and fact_id = any(${ids}::uuid[])) as vectors,
               (select count(*)::int from facts where tenant_id = ${tenantId} and id = any(${ids}::uuid[]) and invalidation_reason is distinct from 'erased') as "notErased"`;
      return row!;
    },
    async unfinishedEmbedJobs() {
      const counts = await queues.embed.getJobCounts('active', 'waiting', 'delayed', 'prioritized', 'waiting-children');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    },
    async redisKeysHolding(text) {
      const holding: string[] = [];
      for (const key of await keysUnder(connection, env.MNEMO_QUEUE_PREFIX!)) {
        const type = await connection.type(key);
        let values: string[] = [];
        if (type === 'string') values = [(await connection.get(key)) ?? ''];
        else if (type === 'hash') values = Object.values(await connection.hgetall(key));
        else if (type === 'list') values = await connection.lrange(key, 0, -1);
        else if (type === 'set') values = await connection.smembers(key);
        else if (type === 'zset') values = await connection.zrange(key, 0, -1);
        else if (type === 'stream') values = (await connection.xrange(key, '-', '+')).flatMap(([, fields]) => fields);
        if (values.some((value) => value.includes(text))) holding.push(key);
      }
      return holding;
    },
    async close() {
      for (const p of [...processes]) await kill(p).catch(() => {});
      for (const q of Object.values(queues)) await q.close().catch(() => {});
      await connection.quit().catch(() => connection.disconnect());
      await Promise.all([redis.close(), fake.close()]);
      await db.drop();
    },
  };
}
