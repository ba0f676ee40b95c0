/**
 * The API process: config → Postgres → Redis → listen. On SIGTERM/SIGINT it fails readiness,
 * stops accepting connections, lets in-flight requests finish (within MNEMO_SHUTDOWN_TIMEOUT_MS),
 * then closes Redis and Postgres.
 */
import { serve } from '@hono/node-server';
import { createApp } from './app.ts';
import { createTokenVerifier } from './auth/verify.ts';
import { describeSearch, loadConfig } from './config.ts';
import { assertRestrictedRole, connect } from './db/client.ts';
import { createRedis } from './jobs/redis.ts';
import { createLogger } from './log.ts';
import { exitOnStartupFailure, onShutdown } from './shutdown.ts';

async function main(): Promise<void> {
  const config = loadConfig(process.env, 'api');
  const logger = createLogger(config.logLevel, { process: 'api' });
  const database = connect(config.databaseUrl, { applicationName: 'mnemo-api' });
  await assertRestrictedRole(database.sql);
  const redis = createRedis(config.redisUrl, 'producer');
  redis.on('error', (error) => logger.warn('redis connection error', { error: error.message }));

  let accepting = true;
  const app = createApp({
    logger,
    db: database.db,
    verifyToken: createTokenVerifier(config.auth),
    readiness: {
      accepting: () => accepting,
      checks: {
        postgres: () => database.sql`select 1`,
        redis: () => redis.ping(),
      },
    },
  });

  const server = serve({ fetch: app.fetch, port: config.port }, (info) => {
    logger.info('api listening', { port: info.port });
    process.stdout.write(`  ${describeSearch(config)}\n`);
  });

  onShutdown('api', logger, config.shutdownTimeoutMs, async () => {
    accepting = false;
    // close() waits for in-flight requests; idle keep-alive sockets would hold it open.
    const closed = new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    if ('closeIdleConnections' in server) server.closeIdleConnections();
    await closed;
    await redis.quit().catch(() => {});
    await database.close();
  });
}

main().catch(exitOnStartupFailure('api'));
