/**
 * What the side-by-side bench sections share: a scratch database with the app role (dropped at
 * the end, also on Ctrl-C), the API and the worker as their own processes (as operators run
 * them), tokens, HTTP calls, timing and percentiles.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { mintDevToken } from '../src/auth/dev-token.ts';
import type { Principal } from '../src/auth/permissions.ts';
import { type ConnectedDatabase, createScratchDatabase } from '../support/database.ts';
import { freePort } from '../support/ports.ts';
import { type RunningProcess, startNode, stopProcess } from '../support/processes.ts';
import { removeQueuePrefix } from '../support/redis.ts';
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

/** An admin of `tenantId`, as the benches call the domain verbs (they see every scope of it). */
export const admin = (tenantId: string, sub = 'bench'): Principal => ({
  tenantId,
  sub,
  role: 'admin',
  projects: { read: [], write: [] },
  orgs: { read: [], write: [] },
});

/** A Markdown table: the first column left-aligned, the others right-aligned (numbers). */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  return [line(header), `|${widths.map((w, i) => (i === 0 ? ` ${'-'.repeat(w)} ` : ` ${'-'.repeat(w - 1)}: `)).join('|')}|`, ...rows.map(line)].join('\n');
}

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
      while (performance.now() < deadline) {
        // Not `units += await once(client)`: that reads `units` before the await and writes it back
        // after, so the clients' concurrent calls overwrote each other's counts and N clients counted
        // about 1/N of their work (the falling write throughput of issue 30).
        const done = await once(client);
        units += done;
      }
    }),
  );
  return units / ((performance.now() - started) / 1000);
}

export interface Environment {
  serverUrl: string;
  redisUrl: string;
}

/** DATABASE_ADMIN_URL or DATABASE_URL: a role that may create databases and roles. */
export function databaseServer(env: NodeJS.ProcessEnv): string {
  const serverUrl = env.DATABASE_ADMIN_URL ?? env.DATABASE_URL;
  if (!serverUrl) throw new UsageError('needs DATABASE_URL (or DATABASE_ADMIN_URL): a role that may create databases and roles');
  return serverUrl;
}

/** DATABASE_URL (or DATABASE_ADMIN_URL) and REDIS_URL, or a message saying what is missing. */
export function environment(env: NodeJS.ProcessEnv): Environment {
  const serverUrl = env.DATABASE_ADMIN_URL ?? env.DATABASE_URL;
  const missing = [!serverUrl && 'DATABASE_URL (a role that may create databases and roles)', !env.REDIS_URL && 'REDIS_URL'].filter(Boolean);
  if (missing.length > 0) throw new UsageError(`needs ${missing.join(' and ')}; e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379`);
  return { serverUrl: serverUrl!, redisUrl: env.REDIS_URL! };
}

export class UsageError extends Error {}

/** The side-by-side run's scratch database, and the queue prefix its API and worker run under. */
export interface Scratch extends ConnectedDatabase {
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

/** The side-by-side run's scratch database: dropped with its roles and its Redis keys at the end or on Ctrl-C. */
export async function createScratch(env: Environment, label: string): Promise<Scratch> {
  const queuePrefix = `mnemo-bench-${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const database = await createScratchDatabase(env.serverUrl, label, { app: 40, admin: 4, applicationName: 'mnemo-bench' }, (name, drop) =>
    registerCleanup(async () => {
      await drop();
      await removeQueuePrefix(queuePrefix, env.redisUrl);
      progress(`dropped ${name} and its roles`);
    }),
  );
  return { ...database, queuePrefix };
}

/**
 * A scratch database for one bench module (writes, embed-pipeline, report-scale),
 * dropped with its roles when `use` has finished, whatever happened.
 */
export async function withScratchDatabase<T>(label: string, use: (database: ConnectedDatabase) => Promise<T>): Promise<T> {
  const database = await createScratchDatabase(databaseServer(process.env), label, { app: 10, admin: 2, applicationName: `mnemo-bench-${label}` });
  try {
    return await use(database);
  } finally {
    await database.drop();
  }
}

/** The machine's 1-minute load average, reported beside every timing. */
export const loadAverage = (): number => Math.round(loadavg()[0]! * 100) / 100;

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

export async function startApi(env: Environment, scratch: Scratch, embeddings: Embeddings, extra: Record<string, string> = {}): Promise<Api> {
  const port = await freePort();
  const service = await startService('src/server.ts', { ...serviceEnv(env, scratch, embeddings), ...extra, PORT: String(port) }, 'api listening');
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
  headers: Headers;
}

export async function call(api: Api, token: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Call> {
  const response = await fetch(`${api.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

export const idempotencyKey = () => ({ 'idempotency-key': randomUUID() });

/**
 * Texts embedded by an OpenAI-compatible endpoint (the bench's fake one): what the raw searches and
 * LangGraph's store pay for a query's vector, as the API does, so no side is spared that call.
 */
export function endpointEmbedder(embeddings: Embeddings): (texts: string[]) => Promise<number[][]> {
  return async (texts) => {
    const response = await fetch(`${embeddings.url}/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: embeddings.model, input: texts }),
    });
    if (!response.ok) throw new Error(`embeddings endpoint answered ${response.status}`);
    const { data } = (await response.json()) as { data: { index: number; embedding: number[] }[] };
    return data.sort((a, b) => a.index - b.index).map((d) => d.embedding);
  };
}

/**
 * A bench module run on its own (`node --import tsx bench/<module>.ts …`): when `moduleUrl` is
 * the script node was started with, runs `bench` and prints its rows as JSON on stdout, or the
 * failure on stderr with exit code 1.
 */
export function runWhenMain(moduleUrl: string, bench: () => Promise<unknown>): void {
  if (moduleUrl !== `file://${process.argv[1]}`) return;
  bench()
    .then((rows) => process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`))
    .catch((error: unknown) => {
      process.stderr.write(`${String(error instanceof Error ? error.stack : error)}\n`);
      process.exitCode = 1;
    });
}
