/**
 * What the side-by-side bench sections share: a scratch database with the app role (dropped at
 * the end, also on Ctrl-C), the API and the worker as their own processes (as operators run
 * them), tokens, HTTP calls, timing and percentiles.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { mintDevToken } from '../src/auth/dev-token.ts';
import { connect, type Database } from '../src/db/client.ts';
import { migrate } from '../src/db/migrate.ts';
import { withDatabase } from '../src/db/url.ts';
import { createRedis } from '../src/jobs/redis.ts';
import { freePort } from '../support/ports.ts';
import { type RunningProcess, startNode, stopProcess } from '../support/processes.ts';
import { percentile } from './ir.ts';

export const progress = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
  n: number;
}

export const percentiles = (samples: readonly number[]): Percentiles => ({
  p50: percentile(samples, 50),
  p95: percentile(samples, 95),
  p99: percentile(samples, 99),
  n: samples.length,
});

export async function timed<T>(run: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const started = performance.now();
  const value = await run();
  return { ms: performance.now() - started, value };
}

/** Runs `clients` loops of `once` for `seconds`; returns how many units they completed per second. */
export async function throughput(clients: number, seconds: number, once: (client: number) => Promise<number>): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  let units = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      while (performance.now() < deadline) units += await once(client);
    }),
  );
  return units / ((performance.now() - started) / 1000);
}

export interface Environment {
  serverUrl: string;
  redisUrl: string;
}

/** DATABASE_URL (or DATABASE_ADMIN_URL) and REDIS_URL, or a message saying what is missing. */
export function environment(env: NodeJS.ProcessEnv): Environment {
  const serverUrl = env.DATABASE_ADMIN_URL ?? env.DATABASE_URL;
  const missing = [!serverUrl && 'DATABASE_URL (a role that may create databases and roles)', !env.REDIS_URL && 'REDIS_URL'].filter(Boolean);
  if (missing.length > 0) throw new UsageError(`needs ${missing.join(' and ')}; e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379`);
  return { serverUrl: serverUrl!, redisUrl: env.REDIS_URL! };
}

export class UsageError extends Error {}

export interface Scratch {
  name: string;
  ownerUrl: string;
  appUrl: string;
  owner: Sql;
  app: Database;
  queuePrefix: string;
}

type Cleanup = () => Promise<void>;
const cleanups: Cleanup[] = [];
let interrupted = false;

/** Registers what to undo at the end of the run or on Ctrl-C (it must be safe to run twice). */
export function registerCleanup(cleanup: Cleanup): void {
  cleanups.push(cleanup);
}

/** Runs the registered cleanups (latest first); safe to call twice. */
export function cleanUp(): Promise<void> {
  // One pass at a time: Ctrl-C and the run's own `finally` (its calls failing once the API is
  // stopped) both ask, and the process must not exit while the other caller is still dropping.
  cleaning ??= (async () => {
    while (cleanups.length > 0) {
      const cleanup = cleanups.pop()!;
      await cleanup().catch((error: unknown) => progress(`cleanup: ${error instanceof Error ? error.message : String(error)}`));
    }
  })().finally(() => {
    cleaning = null;
  });
  return cleaning;
}
let cleaning: Promise<void> | null = null;

/** Ctrl-C / SIGTERM: stop the child processes, drop the scratch database and roles, exit 130. */
export function cleanUpOnSignal(): void {
  const onSignal = () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress('interrupted: stopping processes, dropping the scratch database and roles…');
    void cleanUp().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

export async function createScratch(env: Environment, label: string): Promise<Scratch> {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const name = `mnemo_bench_${runId}_${label}`.toLowerCase();
  const appRole = { user: `mnemo_bench_${runId}`, password: randomBytes(12).toString('hex') };
  const server = postgres(env.serverUrl, { max: 1, onnotice: () => {} });
  await server.unsafe(`create database "${name}"`);
  const queuePrefix = `mnemo-bench-${runId}`;
  cleanups.push(async () => {
    await server.unsafe(`drop database if exists "${name}" with (force)`);
    const groups = await server<{ rolname: string }[]>`select rolname from pg_roles where rolname = ${`mnemo_app_${name}`}`;
    for (const role of [...groups.map((g) => g.rolname), appRole.user]) await server.unsafe(`drop role if exists "${role}"`);
    await server.end({ timeout: 5 });
    const redis = createRedis(env.redisUrl, 'producer');
    try {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${queuePrefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await redis.del(...keys);
      } while (cursor !== '0');
    } finally {
      redis.disconnect();
    }
    progress(`dropped ${name} and its roles`);
  });
  const ownerUrl = withDatabase(env.serverUrl, name);
  const appUrl = withDatabase(env.serverUrl, name, appRole);
  await migrate({ adminUrl: ownerUrl, appUrl });
  const owner = postgres(ownerUrl, { max: 4, onnotice: () => {} });
  const app = connect(appUrl, { max: 40, applicationName: 'mnemo-bench' });
  cleanups.push(async () => {
    await app.close();
    await owner.end({ timeout: 5 });
  });
  return { name, ownerUrl, appUrl, owner, app, queuePrefix };
}


export const JWT_SECRET = randomBytes(24).toString('hex');

/** MNEMO_RATE_LIMIT_* for the benches: far past any load they make. */
export const UNREACHED_RATE_LIMIT = '100000000/100000000';

export interface Embeddings {
  url: string;
  model: string;
}

function serviceEnv(env: Environment, scratch: Scratch, embeddings: Embeddings): Record<string, string> {
  return {
    DATABASE_URL: scratch.appUrl,
    REDIS_URL: env.redisUrl,
    MNEMO_QUEUE_PREFIX: scratch.queuePrefix,
    MNEMO_JWT_SECRET: JWT_SECRET,
    // Counted on every request as in production, so their cost is in the figures, but never reached.
    MNEMO_RATE_LIMIT_WRITES: UNREACHED_RATE_LIMIT,
    MNEMO_RATE_LIMIT_SEARCHES: UNREACHED_RATE_LIMIT,
    MNEMO_RATE_LIMIT_REPORTS: UNREACHED_RATE_LIMIT,
    MNEMO_RATE_LIMIT_READS: UNREACHED_RATE_LIMIT,
    LOG_LEVEL: 'info',
    KINDGI_MEMORY_EMBEDDINGS: 'openai-compat',
    KINDGI_MEMORY_EMBEDDINGS_URL: embeddings.url,
    KINDGI_MEMORY_EMBEDDINGS_MODEL: embeddings.model,
  };
}

export interface Service {
  process: RunningProcess;
  stop(): Promise<void>;
}

/** How long an API or worker may take to print its startup line: far more than it takes. */
const SERVICE_START_TIMEOUT_MS = 300_000;

async function startService(entry: string, env: Record<string, string>, ready: string): Promise<Service> {
  const running = startNode(['--import', 'tsx', entry], env);
  const stop = async () => {
    await stopProcess(running);
  };
  cleanups.push(stop);
  await running.waitFor(ready, SERVICE_START_TIMEOUT_MS);
  running.forgetOutput();
  return { process: running, stop };
}

export interface Api extends Service {
  baseUrl: string;
}

export async function startApi(env: Environment, scratch: Scratch, embeddings: Embeddings): Promise<Api> {
  const port = await freePort();
  const service = await startService('src/server.ts', { ...serviceEnv(env, scratch, embeddings), PORT: String(port) }, 'api listening');
  return { ...service, baseUrl: `http://127.0.0.1:${port}` };
}

export async function startWorker(env: Environment, scratch: Scratch, embeddings: Embeddings, extra: Record<string, string> = {}): Promise<Service> {
  return startService('workers/index.ts', { ...serviceEnv(env, scratch, embeddings), ...extra }, 'worker started');
}

export async function tokenFor(tenantId: string): Promise<string> {
  const { token } = await mintDevToken({
    secret: JWT_SECRET,
    claims: { tid: tenantId, sub: 'bench', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } },
    ttlSeconds: 6 * 3600,
  });
  return token;
}

export interface Call {
  status: number;
  body: any;
}

export async function call(api: Api, token: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Call> {
  const response = await fetch(`${api.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

export const idempotencyKey = () => ({ 'idempotency-key': randomUUID() });
