/**
 * Mnemo deployed as operators run it: the API (`src/server.ts`) and worker processes
 * (`workers/index.ts`) as child processes, over a test database, a Redis and (when given) an
 * OpenAI-compatible embeddings endpoint, under a queue prefix of their own. `close()` kills every
 * process started here and deletes what they left under the prefix, never beyond it.
 */
import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { inject } from 'vitest';
import { embedQueue, erasureQueue, type JobData, reconcileQueue } from '../../src/jobs/queues.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { TEST_ERASURE_KEY, TEST_SECRET } from './api.ts';
import type { TestDatabase } from './database.ts';
import { freePort } from '../../support/ports.ts';
import { killProcess, type RunningProcess, stopProcess } from '../../support/processes.ts';
import { startProcess } from './process.ts';
import { deleteKeysUnder } from '../../support/redis.ts';

export interface DeploymentOptions {
  /** The database the API and workers connect to as the app role (its URL); the caller drops it. */
  db: Pick<TestDatabase, 'appUrl'>;
  /** Default: the test run's Redis, shared with the files running in parallel (hence the prefix). */
  redisUrl?: string;
  /** MNEMO_QUEUE_PREFIX; default a random one. */
  prefix?: string;
  /** Where vectors come from; without it, search is by keyword only. */
  embeddings?: { url: string; model: string };
  /** Variables added or overridden (undefined leaves one out, e.g. `MNEMO_JWT_SECRET: undefined`). */
  env?: Record<string, string | undefined>;
}

export interface HttpResult {
  status: number;
  /** Parsed JSON, or the text when it is not JSON. */
  body: any;
  ms: number;
}

export interface Deployment {
  apiUrl: string;
  /** What the API was started with, and workers are (HS256 tokens of TEST_SECRET, erasure on). */
  env: Record<string, string>;
  prefix: string;
  api: RunningProcess;
  /** A producer connection to the deployment's Redis, for what the test reads or breaks there. */
  connection: Redis;
  queues: { embed: Queue<JobData>; erasure: Queue<JobData>; reconcile: Queue<JobData> };
  /** Starts a worker process and waits for its startup line. */
  startWorker(extra?: Record<string, string>): Promise<RunningProcess>;
  /** SIGKILL, as a crash (the process is node itself, so the signal reaches the program). */
  kill(p: RunningProcess): Promise<void>;
  /** SIGTERM, as operators stop it; SIGKILL after `graceMs`. Resolves with the exit code, or `'killed'`. */
  stop(p: RunningProcess, graceMs?: number): Promise<number | null | 'killed'>;
  request(method: string, token: string, path: string, body?: unknown): Promise<HttpResult>;
  post(token: string, path: string, body: unknown): Promise<HttpResult>;
  get(token: string, path: string): Promise<HttpResult>;
  /** Embed jobs not finished yet (waiting, active, delayed…). */
  unfinishedEmbedJobs(): Promise<number>;
  close(): Promise<void>;
}

const startupTimeoutMs = 60_000;

/**
 * What every API and worker process a test starts is given: the app role's URL of its database,
 * a Redis ('' when the run has none: jobs then run in-process) under a queue prefix, HS256 tokens
 * of TEST_SECRET, and an OpenAI-compatible embeddings endpoint when there is one.
 */
function processEnv(options: { db: Pick<TestDatabase, 'appUrl'>; redisUrl: string; prefix: string; embeddings?: { url: string; model: string } | undefined }) {
  return {
    DATABASE_URL: options.db.appUrl,
    REDIS_URL: options.redisUrl,
    MNEMO_JWT_SECRET: TEST_SECRET,
    MNEMO_QUEUE_PREFIX: options.prefix,
    ...(options.embeddings && {
      KINDGI_MEMORY_EMBEDDINGS: 'openai-compat',
      KINDGI_MEMORY_EMBEDDINGS_URL: options.embeddings.url,
      KINDGI_MEMORY_EMBEDDINGS_MODEL: options.embeddings.model,
    }),
  };
}

/**
 * The API alone (`src/server.ts`) as its own process over a test file's database, on the run's
 * Redis under a prefix of the database's own, for a test of what the process does with its
 * settings (`env` adds to them); resolves once it listens. Unlike startDeployment it opens
 * nothing in Redis itself, so it serves a run without Redis too. The test stops the process.
 */
export async function startApi(
  db: Pick<TestDatabase, 'appUrl' | 'name'>,
  options: { embeddings?: { url: string; model: string }; env?: Record<string, string> } = {},
): Promise<{ process: RunningProcess; url: string }> {
  const port = await freePort();
  const api = startProcess('src/server.ts', [], {
    ...processEnv({ db, redisUrl: inject('redisUrl'), prefix: `mnemo-e2e-${db.name}`, embeddings: options.embeddings }),
    PORT: String(port),
    ...options.env,
  });
  try {
    await api.waitFor('"api listening"', 30_000);
  } catch (error) {
    await killProcess(api);
    throw error;
  }
  return { process: api, url: `http://127.0.0.1:${port}` };
}

/** Starts the API and waits until it listens; workers are started by the test, when it wants them. */
export async function startDeployment(options: DeploymentOptions): Promise<Deployment> {
  const redisUrl = options.redisUrl ?? inject('redisUrl');
  const prefix = options.prefix ?? `mnemo-deploy-${randomBytes(4).toString('hex')}`;
  const port = await freePort();
  const apiUrl = `http://127.0.0.1:${port}`;
  const variables: Record<string, string | undefined> = {
    ...processEnv({ db: options.db, redisUrl, prefix, embeddings: options.embeddings }),
    MNEMO_ERASURE_KEY: TEST_ERASURE_KEY,
    MNEMO_SHUTDOWN_TIMEOUT_MS: '5000',
    // The fault rows drive one token far past any rate limit on purpose; the limits have tests of their own.
    MNEMO_RATE_LIMIT_WRITES: 'off',
    MNEMO_RATE_LIMIT_SEARCHES: 'off',
    MNEMO_RATE_LIMIT_REPORTS: 'off',
    MNEMO_RATE_LIMIT_READS: 'off',
    // Several workers run at once on this host: none takes the default metrics port unless a test asks.
    MNEMO_METRICS_PORT: '0',
    PORT: String(port),
    ...options.env,
  };
  const env = Object.fromEntries(Object.entries(variables).filter((entry): entry is [string, string] => entry[1] !== undefined));

  const processes = new Set<RunningProcess>();
  const kill = async (p: RunningProcess) => {
    await killProcess(p);
    processes.delete(p);
  };
  const start = async (entry: string, extra: Record<string, string>, ready: string) => {
    const p = startProcess(entry, [], { ...env, ...extra });
    processes.add(p);
    try {
      await p.waitFor(ready, startupTimeoutMs);
    } catch (error) {
      await kill(p);
      throw error;
    }
    return p;
  };

  const api = await start('src/server.ts', {}, '"api listening"');
  const connection = createRedis(redisUrl, 'producer');
  // A Redis a test kills errs under these handles until it is back (they reconnect by themselves);
  // what the test asks of them meanwhile fails on its own.
  connection.on('error', () => {});
  const queue = (name: string) => new Queue<JobData>(name, { connection, prefix }).on('error', () => {});
  const queues = { embed: queue(embedQueue.name), erasure: queue(erasureQueue.name), reconcile: queue(reconcileQueue.name) };

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

  return {
    apiUrl,
    env,
    prefix,
    api,
    connection,
    queues,
    startWorker: (extra = {}) => start('workers/index.ts', extra, '"worker started"'),
    kill,
    async stop(p, graceMs = 15_000) {
      const code = await stopProcess(p, graceMs);
      processes.delete(p);
      return code;
    },
    request,
    post: (token, path, body) => request('POST', token, path, body),
    get: (token, path) => request('GET', token, path),
    async unfinishedEmbedJobs() {
      const counts = await queues.embed.getJobCounts('active', 'waiting', 'delayed', 'prioritized', 'waiting-children');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    },
    async close() {
      for (const p of [...processes]) await kill(p);
      // The queues, their job schedulers and whatever else the processes left; a Redis the test
      // has killed for good has nothing left to delete.
      await deleteKeysUnder(connection, prefix).catch(() => {});
      for (const q of Object.values(queues)) await q.close().catch(() => {});
      await connection.quit().catch(() => connection.disconnect());
    },
  };
}
