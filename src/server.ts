/**
 * The API process: settings (./.env, src/env-file.ts) → config → storage → jobs → listen.
 *
 * Storage is a PostgreSQL server (DATABASE_URL) or, without it, the embedded PostgreSQL in this
 * process (src/embedded/); jobs go to BullMQ workers on Redis (REDIS_URL) or, without it, run in
 * this process through the same handlers (src/jobs/in-process.ts). So `npm start` with no settings
 * at all runs the whole service (DESIGN §1), and the startup banner says which of each it runs.
 *
 * On SIGTERM/SIGINT it fails readiness, stops accepting connections, answers the requests in
 * flight (and any that still arrives on an open connection) with `Connection: close`, closes idle
 * connections, lets running in-process jobs finish, then closes Redis and Postgres — all within
 * MNEMO_SHUTDOWN_TIMEOUT_MS.
 */
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { bodyLimitFor, createApp, type EmbeddingServices } from './app.ts';
import { createTokenVerifier } from './auth/verify.ts';
import { describeSearch, loadConfig } from './config.ts';
import type { Config } from './foundation/config.ts';
import { loadEnvFile } from './env-file.ts';
import { assertRestrictedRole, connect, type Database } from './db/client.ts';
import { displayDataDir } from './embedded/data-dir.ts';
import { openEmbeddedDatabase } from './embedded/database.ts';
import { withLocalSecrets } from './embedded/secrets.ts';
import { createEmbeddingProviders } from './embeddings/registry.ts';
import { answerMalformedRequests, manageConnections } from './http/connections.ts';
import { openReplicaReads, type ReplicaReads, redisWritePositions } from './http/read-routing.ts';
import { createRateLimiter, type RateLimiter } from './http/rate-limit.ts';
import { createDispatcher } from './jobs/dispatcher.ts';
import { startInProcessJobs } from './jobs/in-process.ts';
import { closeQueues, createQueues, queueDefinitions, type Queues } from './jobs/queues.ts';
import { createRedis } from './jobs/redis.ts';
import { createLogger, type Logger, logUnhandledRejections } from './foundation/log.ts';
import { warmUpInstructionCheck } from './memory/remember/instruction-like.ts';
import { redactUrl } from './foundation/redact.ts';
import { exitOnStartupFailure, onShutdown } from './shutdown.ts';
import { createHandlerRegistry } from '../workers/registry.ts';

type EmbeddingsSettings = Extract<Config['embeddings'], { kind: 'openai-compat' }>;

/** What the process opened, closed in reverse order at shutdown. */
const closers: (() => Promise<unknown>)[] = [];

async function main(): Promise<void> {
  loadEnvFile();
  // Embedded storage with no secrets set: the data directory's own, made on the first run.
  const config = loadConfig(withLocalSecrets(process.env), 'api');
  const logger = createLogger(config.logLevel, { process: 'api' });
  logUnhandledRejections(logger);

  const storage = await openStorage(config, logger);
  const { database } = storage;
  await assertRestrictedRole(database.sql);
  const embeddingSettings = await startEmbeddings(config, logger);
  const providers = embeddingSettings ? createEmbeddingProviders(embeddingSettings, logger) : undefined;
  const jobs = startJobs(config, storage, providers, embeddingSettings, logger);
  const embeddings = embeddingServices(embeddingSettings, providers);
  // Both transports give producer handles. Redis being away delays the work, never the request:
  // the reconciler finds what Postgres records (outbox rows, facts without their vector) later.
  const dispatcher = createDispatcher({ queues: jobs.queues, logger, embeddings: embeddings !== undefined });
  const reads = await startReplicaReads(config, storage, logger);
  const rateLimiter = startRateLimits(config, logger);

  let accepting = true;
  const app = createApp({
    logger,
    embeddings,
    dispatcher,
    erasureKey: config.erasureKey,
    reads,
    rateLimiter,
    mcp: config.mcp,
    serverTiming: config.serverTiming,
    db: database.db,
    verifyToken: createTokenVerifier(config.auth),
    readiness: {
      accepting: () => accepting,
      checks: { postgres: () => database.sql`select 1`, ...jobs.checks, ...(reads && { replica: () => reads.check() }) },
      // Without Redis, writes still commit and the reconciler queues their work once it is back;
      // without the replica, reads go to the primary.
      degradable: ['redis', 'replica'],
    },
  });

  // Before the port opens: the first remembered text would otherwise wait for the check's automata.
  warmUpInstructionCheck();
  // serve() makes a plain HTTP/1.1 server (no `createServer` option given).
  const server = serve({ fetch: app.fetch, port: config.port }, (info) => {
    // The banner first: whoever waits for "api listening" has it by then.
    const banner = [storage.describe, jobs.describe, describeSearch(config)];
    if (config.auth.jwtSecret) banner.push('Try: npx mnemo token --tenant demo --sub you --role admin');
    banner.push(`Console: http://localhost:${info.port}/console${config.auth.jwtSecret ? ' (add --console to the token command for a sign-in link)' : ''}`);
    process.stdout.write(banner.map((line) => `  ${line}\n`).join(''));
    logger.info('api listening', { port: info.port });
  }) as Server;
  answerMalformedRequests(server);
  const connections = manageConnections(server, {
    bodyLimitFor,
    // A second of grace for idle keep-alive connections, and never most of the deadline.
    idleGraceMs: Math.min(1000, config.shutdownTimeoutMs / 4),
  });

  onShutdown('api', logger, config.shutdownTimeoutMs, async () => {
    accepting = false;
    const started = performance.now();
    logger.info('api draining', { connections: connections.open() });
    await connections.drain();
    logger.info('api drained', { ms: Math.round(performance.now() - started) });
    await closeAll();
  });
}

async function closeAll(): Promise<void> {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
}

interface Storage {
  database: Database;
  /** The streaming replica lists, searches and reports read from (DATABASE_READ_URL), if any. */
  replica?: Database | undefined;
  /** A database for jobs run in this process: their own pool and statement timeout where a server allows it. */
  jobsDatabase(): Database;
  describe: string;
}

async function openStorage(config: Config, logger: Logger): Promise<Storage> {
  const connectOptions = { applicationName: 'mnemo-api', ...config.database };
  if (config.storage.kind === 'server') {
    const { databaseUrl, readUrl } = config.storage;
    const database = connect(databaseUrl, connectOptions);
    closers.push(() => database.close());
    const replica = readUrl ? connect(readUrl, { ...connectOptions, applicationName: 'mnemo-api-read', pool: 'read' }) : undefined;
    if (replica) closers.push(() => replica.close());
    const url = new URL(databaseUrl);
    return {
      database,
      replica,
      jobsDatabase: () => {
        const jobs = connect(databaseUrl, {
          max: 3,
          applicationName: 'mnemo-api-jobs',
          connectTimeoutMs: config.database.connectTimeoutMs,
          statementTimeoutMs: config.jobStatementTimeoutMs,
          preparedStatements: config.database.preparedStatements,
        });
        closers.push(() => jobs.close());
        return jobs;
      },
      describe: `Storage: PostgreSQL at ${url.host}${url.pathname}${readUrl ? `, reads from the replica at ${new URL(readUrl).host}${new URL(readUrl).pathname}` : ''}`,
    };
  }
  const started = performance.now();
  const embedded = await openEmbeddedDatabase({
    dataDir: config.storage.dataDir,
    connectOptions,
    log: (message) => logger.debug(message),
  });
  closers.push(() => embedded.close());
  logger.info('embedded database open', { ms: Math.round(performance.now() - started), listening: embedded.listening });
  return {
    database: embedded.database,
    // One backend, one connection (src/embedded/database.ts): jobs share it with the API.
    jobsDatabase: () => embedded.database,
    describe: `Storage: embedded PostgreSQL (${displayDataDir(config.storage.dataDir)})`,
  };
}

/**
 * Reads on the replica with read-your-writes (src/http/read-routing.ts). Each caller's last write
 * position is shared through Redis by every API node, over a connection of its own; without Redis
 * (jobs in this process: one node) this node's memory is enough.
 */
async function startReplicaReads(config: Config, storage: Storage, logger: Logger): Promise<ReplicaReads | undefined> {
  if (!storage.replica) return undefined;
  const positions = config.jobs.kind === 'bullmq' ? redisWritePositions(config.jobs.redisUrl, config.queuePrefix, logger) : undefined;
  if (positions) closers.push(() => positions.close());
  const reads = await openReplicaReads({ primary: storage.database, replica: storage.replica, positions, logger });
  closers.push(async () => reads.close());
  return reads;
}

interface Jobs {
  queues: Queues;
  /** Readiness checks of the transport (Redis), besides Postgres's. */
  checks: Record<string, () => Promise<unknown>>;
  describe: string;
}

function startJobs(
  config: Config,
  storage: Storage,
  providers: ReturnType<typeof createEmbeddingProviders> | undefined,
  embeddingSettings: EmbeddingsSettings | undefined,
  logger: Logger,
): Jobs {
  if (config.jobs.kind === 'bullmq') {
    const redis = createRedis(config.jobs.redisUrl, 'producer');
    redis.on('error', (error) => logger.warn('redis connection error', { error: error.message }));
    // Producer handles only (no workers here): writes queue embeddings, requests queue reports.
    const queues = createQueues(redis, queueDefinitions, config.queuePrefix);
    closers.push(async () => {
      await closeQueues(queues);
      await redis.quit().catch(() => {});
    });
    return { queues, checks: { redis: () => redis.ping() }, describe: `Jobs: BullMQ on ${redactUrl(config.jobs.redisUrl)}` };
  }
  const db = storage.jobsDatabase().db;
  const jobs = startInProcessJobs({
    definitions: queueDefinitions,
    registry: (queues) =>
      createHandlerRegistry({ db, queues, providers, embedBatch: embeddingSettings?.batchSize, purgeGraceMs: config.purgeGraceMs }),
    db,
    logger: logger.child({ process: 'jobs' }),
    reconcileEveryMs: config.reconcileEveryMs,
    retentionEveryMs: config.retentionEveryMs,
    leaseMs: config.jobLockMs,
  });
  // Closed before the database: running jobs finish first.
  closers.push(() => jobs.close());
  return { queues: jobs.queues, checks: {}, describe: 'Jobs: in-process' };
}

/**
 * Rate limits counted in Redis, shared by every API node, over a connection of their own that never
 * makes a request wait for Redis (src/jobs/redis.ts); without Redis (one node), in this process.
 */
function startRateLimits(config: Config, logger: Logger): RateLimiter {
  const options = { limits: config.rateLimits, keyPrefix: `${config.queuePrefix}:rl`, logger };
  if (config.jobs.kind !== 'bullmq') return createRateLimiter(options);
  const redis = createRedis(config.jobs.redisUrl, 'rate-limit');
  // Every reconnect attempt errs; the limiter says once when Redis goes and once when it is back.
  redis.on('error', () => {});
  closers.push(() => redis.quit().catch(() => {}));
  return createRateLimiter({ ...options, redis });
}

/**
 * The embeddings endpoint's settings: the configured one, or, with KINDGI_MEMORY_EMBEDDINGS=local,
 * the built-in model served in this process on a loopback port (the same OpenAI-compatible path
 * as any endpoint, so nothing downstream differs).
 */
async function startEmbeddings(config: Config, logger: Logger): Promise<EmbeddingsSettings | undefined> {
  if (config.embeddings.kind === 'none') return undefined;
  if (config.embeddings.kind === 'openai-compat') return config.embeddings;
  const { startLocalEmbeddingsServer } = await import('./embeddings/local-server.ts');
  const local = await startLocalEmbeddingsServer({ port: 0, host: '127.0.0.1', log: (line) => logger.info(line) });
  closers.push(() => local.close());
  return { kind: 'openai-compat', url: local.url, model: local.model, apiKey: undefined, batchSize: config.embeddings.batchSize, semanticWeight: config.embeddings.semanticWeight };
}

/** Search by meaning, when this runtime has embeddings. */
function embeddingServices(
  settings: EmbeddingsSettings | undefined,
  providers: ReturnType<typeof createEmbeddingProviders> | undefined,
): EmbeddingServices | undefined {
  if (!settings || !providers) return undefined;
  return {
    embedder: {
      embed: async (model, text) => (await providers.forModel(model).embed([text]))[0]!,
      semanticWeight: providers.semanticWeight,
    },
    configured: { model: settings.model, endpoint: settings.url },
  };
}

main().catch(async (error: unknown) => {
  // Whatever opened before the failure (the embedded database's lock above all) is released.
  await closeAll();
  exitOnStartupFailure('api')(error);
});
