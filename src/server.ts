/**
 * The API process: settings (./.env, src/env-file.ts) → config → Postgres → Redis → listen. On SIGTERM/SIGINT it fails readiness,
 * stops accepting connections, answers the requests in flight (and any that still arrives on an
 * open connection) with `Connection: close`, closes idle connections, then closes Redis and
 * Postgres — all within MNEMO_SHUTDOWN_TIMEOUT_MS.
 */
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { bodyLimitFor, createApp, type EmbeddingServices } from './app.ts';
import { createTokenVerifier } from './auth/verify.ts';
import { type Config, describeSearch, loadConfig } from './config.ts';
import { loadEnvFile } from './env-file.ts';
import { assertRestrictedRole, connect } from './db/client.ts';
import { createEmbeddingProviders } from './embeddings/registry.ts';
import { answerMalformedRequests, manageConnections } from './http/connections.ts';
import { scheduleEmbedding } from './jobs/embedding-jobs.ts';
import { closeQueues, createQueues, queueDefinitions, type Queues } from './jobs/queues.ts';
import { createRedis, promptly } from './jobs/redis.ts';
import { createLogger, type Logger, logUnhandledRejections } from './log.ts';
import { exitOnStartupFailure, onShutdown } from './shutdown.ts';

async function main(): Promise<void> {
  loadEnvFile();
  const config = loadConfig(process.env, 'api');
  const logger = createLogger(config.logLevel, { process: 'api' });
  logUnhandledRejections(logger);
  const database = connect(config.databaseUrl, { applicationName: 'mnemo-api', ...config.database });
  await assertRestrictedRole(database.sql);
  const redis = createRedis(config.redisUrl, 'producer');
  redis.on('error', (error) => logger.warn('redis connection error', { error: error.message }));

  // Producer handles only (no workers here): writes queue embeddings, requests queue reports.
  const queues = createQueues(redis, queueDefinitions, config.queuePrefix);
  const embeddings = embeddingServices(config, queues, logger);

  let accepting = true;
  const app = createApp({
    logger,
    embeddings,
    queues,
    erasureKey: config.erasureKey,
    db: database.db,
    verifyToken: createTokenVerifier(config.auth),
    readiness: {
      accepting: () => accepting,
      checks: {
        postgres: () => database.sql`select 1`,
        redis: () => redis.ping(),
      },
      // Without Redis, writes still commit and the reconciler queues their work once it is back.
      degradable: ['redis'],
    },
  });

  // serve() makes a plain HTTP/1.1 server (no `createServer` option given).
  const server = serve({ fetch: app.fetch, port: config.port }, (info) => {
    // The search line first: whoever waits for "api listening" has it by then.
    process.stdout.write(`  ${describeSearch(config)}\n`);
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
    await closeQueues(queues);
    await redis.quit().catch(() => {});
    await database.close();
  });
}

/** Search by meaning and the queueing of new vectors, when KINDGI_MEMORY_EMBEDDINGS is on. */
function embeddingServices(config: Config, queues: Queues, logger: Logger): EmbeddingServices | undefined {
  if (config.embeddings.kind !== 'openai-compat') return undefined;
  const providers = createEmbeddingProviders(config.embeddings, logger);
  return {
    embedder: {
      embed: async (model, text) => (await providers.forModel(model).embed([text]))[0]!,
      semanticWeight: providers.semanticWeight,
    },
    // Redis being away delays the vector, never the write: the reconciler finds the fact later.
    // One request per tenant however many facts were written: the job reads them from Postgres.
    schedule: (tenantId) => promptly(scheduleEmbedding(queues, tenantId), logger, 'queue embedding', { tenantId }),
    configured: { model: config.embeddings.model, endpoint: config.embeddings.url },
  };
}

main().catch(exitOnStartupFailure('api'));
