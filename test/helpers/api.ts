import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { inject } from 'vitest';
import { createApp, type EmbeddingServices } from '../../src/app.ts';
import { DEFAULT_REMEMBER_SETTINGS, type RememberSettings } from '../../src/foundation/remember-settings.ts';
import { answerMalformedRequests } from '../../src/http/connections.ts';
import { withTenant } from '../../src/db/client.ts';
import { type LocalEmbeddingsServer, startLocalEmbeddingsServer } from '../../src/embeddings/local-server.ts';
import { createEmbeddingProviders, type EmbeddingProviders } from '../../src/embeddings/registry.ts';
import type { RateLimiter } from '../../src/http/rate-limit.ts';
import type { ReadRouting } from '../../src/http/read-routing.ts';
import { createDispatcher } from '../../src/jobs/dispatcher.ts';
import { startInProcessJobs } from '../../src/jobs/in-process.ts';
import { type BullQueues, closeQueues, createQueues, type Queues, queueDefinitions } from '../../src/jobs/queues.ts';
import { startWorkers } from '../../src/jobs/worker.ts';
import { coverage, ensureConfiguredModel, servingModel } from '../../src/memory/facts/vectors.ts';
import { createHandlerRegistry } from '../../workers/registry.ts';
import { mintDevToken } from '../../src/auth/dev-token.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { createLogger, type Logger } from '../../src/foundation/log.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { uniqueTenant } from './factories.ts';
import { sleep } from '../../support/wait.ts';

export const TEST_SECRET = 'test-secret-of-at-least-thirty-two-bytes!';
export const TEST_ERASURE_KEY = 'test-erasure-key-of-at-least-32-bytes!!';

export interface TokenClaims {
  tid: string;
  sub?: string;
  role?: 'admin' | 'member' | 'service';
  projects?: { read?: string[]; write?: string[] };
  orgs?: { read?: string[]; write?: string[] };
  /** Where the MCP tools remember and recall for this token. */
  mcp?: { scope?: Record<string, string> };
}

/** A valid HS256 token for the test server. */
export async function tokenFor(claims: TokenClaims, options: { secret?: string; ttlSeconds?: number } = {}): Promise<string> {
  const { token } = await mintDevToken({
    secret: options.secret ?? TEST_SECRET,
    claims: {
      tid: claims.tid,
      sub: claims.sub ?? 'user-1',
      role: claims.role ?? 'admin',
      projects: { read: claims.projects?.read ?? [], write: claims.projects?.write ?? [] },
      orgs: { read: claims.orgs?.read ?? [], write: claims.orgs?.write ?? [] },
      ...(claims.mcp && { mcp: claims.mcp }),
    },
    ttlSeconds: options.ttlSeconds ?? 600,
  });
  return token;
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface RequestOptions {
  token?: string | undefined;
  body?: unknown;
  /** Sent as is (for malformed bodies); wins over `body`. */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestEmbeddings {
  /** The real local model behind an OpenAI-compatible endpoint. */
  server: LocalEmbeddingsServer;
  providers: EmbeddingProviders;
  /** BullMQ's queues, or the in-process ones when the run has no Redis. */
  queues: Queues;
  /** BullMQ's queues: only when the run has a Redis. */
  bullQueues?: BullQueues;
  prefix: string;
  /** Resolves once every live fact of the tenant has a current vector of the serving model. */
  settled(tenantId: string, timeoutMs?: number): Promise<void>;
}

export interface TestApi {
  baseUrl: string;
  db: TestDatabase;
  /** Present with `startTestApi({ embeddings: true })`: an in-process worker embeds what is written. */
  embeddings?: TestEmbeddings;
  /** Present with `worker` or `embeddings`: the queues the in-process worker takes jobs from. */
  queues?: Queues;
  /** BullMQ's queues, for what only they offer (job schedulers, counts): only when the run has a Redis. */
  bullQueues?: BullQueues;
  /** What the app logged (JSON lines), for tests of what is logged. */
  logs: string[];
  /** A fresh tenant and an admin token for it. */
  newTenant(label?: string): Promise<{ tenantId: string; admin: string }>;
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<T>>;
  close(): Promise<void>;
}

/**
 * The real app, on a random port of this machine, over this test file's own database and the
 * real Redis: requests go over HTTP exactly as a client's do.
 */
export async function startTestApi(
  options: {
    embeddings?: boolean;
    worker?: boolean;
    embedBatch?: number;
    embeddingAliases?: readonly string[];
    /** A database made elsewhere (dropped on close), instead of a fresh one of this file's. */
    database?: TestDatabase;
    /** Rate limits, as MNEMO_RATE_LIMIT_* set them (none by default). */
    rateLimiter?: RateLimiter;
    /** What the MCP tool kindgi_remember writes, as MNEMO_MCP_* set it (the defaults otherwise). */
    mcp?: Partial<Omit<RememberSettings, 'erasureKey'>>;
    /** Where reads go, as DATABASE_READ_URL routes them (the primary by default); closed by the caller. */
    reads?: (database: TestDatabase) => Promise<ReadRouting>;
    /** Answer each request's phases in `Server-Timing`, as MNEMO_SERVER_TIMING=true does. */
    serverTiming?: boolean;
  } = {},
): Promise<TestApi> {
  const db = options.database ?? (await createTestDatabase());
  // Without a Redis the jobs run in-process, as `npm start` runs them with no REDIS_URL.
  const redis = inject('redisUrl') ? createRedis(inject('redisUrl'), 'producer') : undefined;
  const logs: string[] = [];
  const logger = createLogger('info', {}, (line) => logs.push(line));
  const jobs = options.embeddings || options.worker ? await startJobs(db, logger, { embeddings: options.embeddings ?? false, embedBatch: options.embedBatch ?? 64, aliases: options.embeddingAliases ?? [] }) : undefined;
  const embeddings = jobs?.embeddings;
  const app = createApp({
    logger,
    embeddings: embeddings?.services,
    // As src/server.ts wires it: vectors are queued only when this runtime has embeddings.
    dispatcher: jobs ? createDispatcher({ queues: jobs.queues, logger, embeddings: embeddings !== undefined }) : undefined,
    erasureKey: TEST_ERASURE_KEY,
    db: db.app.db,
    verifyToken: createTokenVerifier({ jwtSecret: TEST_SECRET, jwksUrl: undefined, issuer: undefined, audience: undefined }),
    readiness: {
      accepting: () => true,
      checks: { postgres: () => db.app.sql`select 1`, ...(redis ? { redis: () => redis.ping() } : {}) },
      degradable: ['redis'],
    },
    rateLimiter: options.rateLimiter,
    mcp: { ...DEFAULT_REMEMBER_SETTINGS, ...options.mcp },
    reads: options.reads && (await options.reads(db)),
    serverTiming: options.serverTiming,
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
  answerMalformedRequests(server);
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    baseUrl,
    db,
    logs,
    ...(embeddings ? { embeddings: embeddings.test } : {}),
    ...(jobs ? { queues: jobs.queues } : {}),
    ...(jobs?.bullQueues ? { bullQueues: jobs.bullQueues } : {}),
    async newTenant(label = 'tenant') {
      const tenantId = uniqueTenant(label);
      return { tenantId, admin: await tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' }) };
    },
    async request(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      if (options.token) headers.authorization = `Bearer ${options.token}`;
      let body: string | undefined = options.rawBody;
      if (body === undefined && options.body !== undefined) body = JSON.stringify(options.body);
      if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
        headers['content-type'] = 'application/json';
      }
      const response = await fetch(`${baseUrl}${path}`, { method, headers, body });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: keep the text
      }
      return { status: response.status, body: parsed as any, headers: response.headers };
    },
    async close() {
      if ('closeAllConnections' in server) server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await jobs?.stop();
      await redis?.quit();
      await db.drop();
    },
  };
}

/**
 * The jobs of the test API: BullMQ workers in this process over the run's Redis (every queue, under a
 * prefix of its own), or without a Redis the in-process transport, and the API's
 * producer handles; with `embeddings`, the local model and the API's embedding services too.
 * `embedBatch` is the facts per call to the model in embed and backfill jobs; `aliases` are more
 * model names the local server answers to (it refuses any other).
 */
async function startJobs(db: TestDatabase, logger: Logger, options: { embeddings: boolean; embedBatch: number; aliases: readonly string[] }) {
  const server = options.embeddings ? await startLocalEmbeddingsServer({ port: 0, aliases: options.aliases }) : undefined;
  const providers = server
    ? createEmbeddingProviders({ kind: 'openai-compat', url: server.url, model: server.model, apiKey: undefined, batchSize: options.embedBatch })
    : undefined;
  const prefix = `mnemo-test-${randomBytes(4).toString('hex')}`;
  if (providers) await ensureConfiguredModel(db.app.db, providers.configured);
  const transport = inject('redisUrl') ? startBullJobs(db, logger, providers, options.embedBatch, prefix) : startInProcess(db, logger, providers, options.embedBatch);
  const queues = transport.queues;
  const embeddings =
    server && providers
      ? {
          services: {
            embedder: { embed: async (model, text) => (await providers.forModel(model).embed([text]))[0]! },
            configured: { model: server.model, endpoint: server.url },
          } satisfies EmbeddingServices,
          test: {
            server,
            providers,
            queues,
            ...(transport.bullQueues ? { bullQueues: transport.bullQueues } : {}),
            prefix,
            async settled(tenantId, timeoutMs = 30_000) {
              const started = Date.now();
              for (;;) {
                const model = await servingModel(db.app.db);
                const c = model ? await withTenant(db.app.db, tenantId, (tx) => coverage(tx, model.model, tenantId)) : { live: 1, embedded: 0 };
                if (c.embedded >= c.live) return;
                if (Date.now() - started > timeoutMs) throw new Error(`embeddings not settled: ${c.embedded}/${c.live}`);
                await sleep(50);
              }
            },
          } satisfies TestEmbeddings,
        }
      : undefined;
  return {
    queues,
    bullQueues: transport.bullQueues,
    embeddings,
    async stop() {
      await transport.stop();
      await server?.close();
    },
  };
}

/** Every queue in BullMQ on the run's Redis, under a prefix of its own, with workers in this process. */
function startBullJobs(db: TestDatabase, logger: Logger, providers: EmbeddingProviders | undefined, embedBatch: number, prefix: string) {
  const producer = createRedis(inject('redisUrl'), 'producer');
  const connection = createRedis(inject('redisUrl'), 'worker');
  const queues = createQueues(producer, queueDefinitions, prefix);
  const workers = startWorkers({
    definitions: queueDefinitions,
    registry: createHandlerRegistry({ db: db.app.db, queues, providers, embedBatch }),
    connection,
    prefix,
    db: db.app.db,
    logger,
  });
  return {
    queues: queues as Queues,
    bullQueues: queues as BullQueues | undefined,
    async stop() {
      await Promise.all(workers.map((w) => w.close()));
      await Promise.all([...queues.values()].map((q) => q.obliterate({ force: true })));
      await closeQueues(queues);
      await Promise.all([producer.quit(), connection.quit()]);
    },
  };
}

/**
 * No Redis: the product's in-process transport (src/jobs/in-process.ts) over the file's database.
 * Its reconcile and retention passes run once at start and then hourly, beyond any test's length.
 */
function startInProcess(db: TestDatabase, logger: Logger, providers: EmbeddingProviders | undefined, embedBatch: number) {
  const jobs = startInProcessJobs({
    definitions: queueDefinitions,
    registry: (queues) => createHandlerRegistry({ db: db.app.db, queues, providers, embedBatch }),
    db: db.app.db,
    logger,
    reconcileEveryMs: 3_600_000,
    retentionEveryMs: 3_600_000,
  });
  return { queues: jobs.queues, bullQueues: undefined as BullQueues | undefined, stop: () => jobs.close() };
}
