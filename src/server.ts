/**
 * The API process: config → Postgres → Redis → listen. On SIGTERM/SIGINT it fails readiness,
 * stops accepting connections, lets in-flight requests finish (within MNEMO_SHUTDOWN_TIMEOUT_MS),
 * then closes Redis and Postgres.
 */
import { serve } from '@hono/node-server';
import { createApp } from './app.ts';
import { ConfigError, describeSearch, loadConfig } from './config.ts';
import { assertRestrictedRole, connect, UnsafeDatabaseRoleError } from './db/client.ts';
import { createRedis } from './jobs/redis.ts';
import { createLogger } from './log.ts';

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

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    accepting = false;
    logger.info('api stopping', { signal });
    const deadline = setTimeout(() => {
      logger.error('api shutdown timed out; exiting', { timeoutMs: config.shutdownTimeoutMs });
      process.exit(1);
    }, config.shutdownTimeoutMs);
    deadline.unref();
    // close() waits for in-flight requests; idle keep-alive sockets would hold it open.
    server.close(async () => {
      await redis.quit().catch(() => {});
      await database.close();
      clearTimeout(deadline);
      logger.info('api stopped');
      process.exit(0);
    });
    if ('closeIdleConnections' in server) server.closeIdleConnections();
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof UnsafeDatabaseRoleError) {
    process.stderr.write(`mnemo api: ${error.message}\n`);
  } else {
    process.stderr.write(`mnemo api: failed to start: ${error instanceof Error ? error.stack : String(error)}\n`);
  }
  process.exit(1);
});
