/**
 * The worker process: one BullMQ worker per queue, every handler checked at startup, and its own
 * port for /metrics and /healthz (MNEMO_METRICS_PORT; 0 serves none).
 * SIGTERM/SIGINT: stop taking jobs, let running ones finish (within MNEMO_SHUTDOWN_TIMEOUT_MS),
 * close Redis and Postgres, exit 0. Without REDIS_URL the API process runs the jobs itself
 * (src/jobs/in-process.ts): this one says so and exits.
 */
import { jobsTransport, loadConfig, serverConnections } from '../src/config.ts';
import { loadEnvFile } from '../src/env-file.ts';
import { assertRestrictedRole, connect } from '../src/db/client.ts';
import { closeQueues, createQueues, queueDefinitions, reconcileQueue, retentionQueue, scheduleRepeatable } from '../src/jobs/queues.ts';
import { createRedis } from '../src/jobs/redis.ts';
import { startWorkers } from '../src/jobs/worker.ts';
import { createEmbeddingProviders } from '../src/embeddings/registry.ts';
import { createLogger, logUnhandledRejections } from '../src/foundation/log.ts';
import { countQueueJobs, QUEUE_STATES } from '../src/foundation/metrics.ts';
import { exitOnStartupFailure, onShutdown } from '../src/shutdown.ts';
import { startMetricsServer } from './metrics-server.ts';
import { createHandlerRegistry } from './registry.ts';

async function main(): Promise<void> {
  loadEnvFile();
  if (jobsTransport(process.env).kind === 'in-process') {
    process.stdout.write('mnemo worker: not needed without REDIS_URL: jobs run in the API process (npm start); set REDIS_URL to run them in workers\n');
    return;
  }
  const config = loadConfig(process.env, 'worker');
  const logger = createLogger(config.logLevel, { process: 'worker' });
  logUnhandledRejections(logger);
  const { databaseUrl, redisUrl } = serverConnections(config);
  const database = connect(databaseUrl, { applicationName: 'mnemo-worker', ...config.database });
  await assertRestrictedRole(database.sql);

  const producer = createRedis(redisUrl, 'producer');
  const connection = createRedis(redisUrl, 'worker');
  // Without a listener ioredis prints every reconnect failure to stderr as an "unhandled error event".
  for (const [name, client] of [['producer', producer], ['worker', connection]] as const) {
    client.on('error', (error: Error) => logger.warn('redis connection error', { connection: name, error: error.message }));
  }
  const queues = createQueues(producer, queueDefinitions, config.queuePrefix);
  const providers = config.embeddings.kind === 'openai-compat' ? createEmbeddingProviders(config.embeddings, logger) : undefined;
  const registry = createHandlerRegistry({
    db: database.db,
    queues,
    providers,
    embedBatch: config.embeddings.kind === 'openai-compat' ? config.embeddings.batchSize : undefined,
    purgeGraceMs: config.purgeGraceMs,
  });
  const workers = startWorkers({
    definitions: queueDefinitions,
    registry,
    connection,
    prefix: config.queuePrefix,
    db: database.db,
    logger,
    lockMs: config.jobLockMs,
  });

  // The repeatable jobs, each with a pass now too (whatever Redis lost is found without waiting
  // a period, and due retention runs at once).
  const repeatable = [
    { queue: queues.get(reconcileQueue.name)!, every: config.reconcileEveryMs },
    { queue: queues.get(retentionQueue.name)!, every: config.retentionEveryMs },
  ];
  const schedule = ({ queue, every }: (typeof repeatable)[number]) => scheduleRepeatable(queue, every);
  for (const entry of repeatable) await schedule(entry);
  // The schedules themselves live in Redis: if Redis loses its data while we run, put them back.
  const watchdog = setInterval(() => {
    void (async () => {
      for (const entry of repeatable) {
        if (await entry.queue.getJobScheduler(entry.queue.name)) continue;
        logger.warn(`${entry.queue.name} schedule missing from Redis; restoring it`);
        await schedule(entry);
      }
    })().catch((error: unknown) => logger.warn('could not check the repeatable schedules', { error: String(error) }));
  }, config.reconcileEveryMs);
  watchdog.unref();
  // Queue depths are read from Redis when Prometheus scrapes, so they are as fresh as the scrape.
  countQueueJobs(async () =>
    Object.fromEntries(await Promise.all([...queues].map(async ([name, queue]) => [name, await queue.getJobCounts(...QUEUE_STATES)] as const))),
  );
  const metrics = config.metricsPort === 0 ? undefined : await startMetricsServer(config.metricsPort).catch((error: unknown) => {
    // Metrics are for watching the work, not a reason to stop doing it (two workers on one host
    // with the default port: the second runs without).
    logger.warn('metrics port not served; set MNEMO_METRICS_PORT to a free port, or 0', { port: config.metricsPort, error: String(error) });
    return undefined;
  });
  // Before "worker started": whoever reads that line may signal at once, and a SIGTERM that
  // arrives before the handler exists takes the default action, ending the process mid-job
  // (a loaded machine can deschedule the process between the two statements).
  onShutdown('worker', logger, config.shutdownTimeoutMs, async () => {
    clearInterval(watchdog);
    metrics?.stopping();
    // close() waits for the jobs that are running; no new ones are taken meanwhile.
    await Promise.all(workers.map((worker) => worker.close()));
    await closeQueues(queues);
    await Promise.all([producer.quit(), connection.quit()]);
    await database.close();
    await metrics?.close();
  });

  logger.info('worker started', {
    queues: queueDefinitions.map((d) => d.name),
    prefix: config.queuePrefix,
    embeddings: providers ? providers.configured.describe : 'off',
    metricsPort: metrics?.port ?? 'off',
  });
}

main().catch(exitOnStartupFailure('worker'));
