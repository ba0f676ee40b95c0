/**
 * `mnemo reembed [--watch] [--no-start]`: starts and watches the switch to the configured
 * embedding model (DESIGN §9). It registers the model (a new one starts `backfilling` while the
 * active one keeps serving search), queues the backfill, and with --watch shows its progress
 * until the worker switches search to the new model. The worker does the embedding.
 */
import { eq } from 'drizzle-orm';
import { ConfigError, loadConfig, serverConnections } from '../config.ts';
import { assertRestrictedRole, connect, type Db, UnsafeDatabaseRoleError } from '../db/client.ts';
import { embeddingModels } from '../db/schema.ts';
import { EmbeddingRequestRejected, EmbeddingsUnavailable } from '../embeddings/provider.ts';
import { createEmbeddingProviders } from '../embeddings/registry.ts';
import { reembedJobId, scheduleBackfill } from '../jobs/embedding-jobs.ts';
import { closeQueues, createQueues, reembedQueue } from '../jobs/queues.ts';
import { createRedis } from '../jobs/redis.ts';
import { type Coverage, ensureConfiguredModel, totalCoverage } from '../memory/facts/vectors.ts';
import { parseFlags } from './args.ts';
import { pollUntilDone, progressBar, type ProgressView, progressLine } from './progress.ts';

const POLL_MS = 1000;
/** How long to wait for Redis to answer before giving up. */
const REDIS_TIMEOUT_MS = 10_000;
/** With --watch, how long a queued backfill may wait for a worker before a hint is printed. */
const NO_WORKER_HINT_MS = 15_000;

type ModelState = 'backfilling' | 'active' | 'retired';

const percent = ({ live, embedded }: Coverage) => (live === 0 ? 100 : Math.min(100, Math.floor((embedded * 100) / live)));

const describeState = (model: string, state: ModelState, coverage?: Coverage) =>
  state === 'backfilling' && coverage
    ? `model ${model}: backfilling ${coverage.embedded}/${coverage.live} live facts (${percent(coverage)}%)`
    : `model ${model}: ${state}`;

function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function modelState(db: Db, model: string): Promise<ModelState | undefined> {
  const [row] = await db.select({ state: embeddingModels.state }).from(embeddingModels).where(eq(embeddingModels.model, model));
  return row?.state;
}

export async function reembed(argv: string[]): Promise<void> {
  const values = parseFlags(argv, {
    watch: { type: 'boolean', default: false },
    'no-start': { type: 'boolean', default: false },
  });
  const config = loadConfig(process.env, 'worker');
  if (config.embeddings.kind !== 'openai-compat') {
    throw new ConfigError(
      'KINDGI_MEMORY_EMBEDDINGS',
      'must be "openai-compat" for mnemo reembed, with KINDGI_MEMORY_EMBEDDINGS_URL and KINDGI_MEMORY_EMBEDDINGS_MODEL naming the model to switch to',
    );
  }
  const endpoint = config.embeddings.url;
  const providers = createEmbeddingProviders(config.embeddings);
  const model = providers.configured.model;

  const { databaseUrl, redisUrl } = serverConnections(config);
  const database = connect(databaseUrl, { ...config.database, max: 2, applicationName: 'mnemo-reembed' });
  let redis: ReturnType<typeof createRedis> | undefined;
  let queues: ReturnType<typeof createQueues> | undefined;
  try {
    // Coverage is counted tenant by tenant under row-level security, which must apply.
    await assertRestrictedRole(database.sql).catch((error: unknown) => {
      if (error instanceof UnsafeDatabaseRoleError) throw error;
      throw new Error(`reembed: cannot use the database at DATABASE_URL: ${error instanceof Error ? error.message : String(error)}`);
    });
    const info = await ensureConfiguredModel(database.db, providers.configured).catch((error: unknown) => {
      if (error instanceof EmbeddingsUnavailable || error instanceof EmbeddingRequestRejected) {
        throw new Error(`reembed: the embeddings endpoint ${endpoint} did not embed with ${model}: ${error.message}`);
      }
      throw error;
    });

    if (info.state === 'backfilling' && !values['no-start']) {
      redis = createRedis(redisUrl, 'producer');
      // Failures surface as the rejected command below, not as "unhandled error event" noise.
      redis.on('error', () => {});
      await within(REDIS_TIMEOUT_MS, redis.ping()).catch((error: unknown) => {
        throw new Error(`reembed: cannot reach Redis at REDIS_URL: ${error instanceof Error ? error.message : String(error)}`);
      });
      queues = createQueues(redis, [reembedQueue], config.queuePrefix);
      for (const queue of queues.values()) queue.on('error', () => {});
      await scheduleBackfill(queues, model).catch((error: unknown) => {
        throw new Error(
          `reembed: could not queue the backfill of ${model} in Redis (REDIS_URL): ${error instanceof Error ? error.message : String(error)}; model ${model} stays backfilling, and the worker's reconciler queues it too`,
        );
      });
    }

    let coverage = info.state === 'backfilling' ? await totalCoverage(database.db, model) : undefined;
    process.stdout.write(`${describeState(model, info.state, coverage)}\n`);
    if (!values.watch || info.state !== 'backfilling') return;

    // --watch: poll until the worker has switched search to the model.
    const bar = progressLine(backfillView(model));
    const started = Date.now();
    let hinted = false;
    await pollUntilDone(
      POLL_MS,
      async () => {
        const state = await modelState(database.db, model);
        if (state === 'active') {
          bar.draw({ live: coverage?.live ?? 0, embedded: coverage?.live ?? 0 });
          bar.end();
          process.stdout.write(`switched to ${model}\n`);
          return true;
        }
        if (state !== 'backfilling') {
          bar.end();
          throw new Error(
            `reembed: model ${model} is ${state ?? 'no longer registered'}: another model was switched to meanwhile; run mnemo reembed again to start over`,
          );
        }
        coverage = await totalCoverage(database.db, model);
        bar.draw(coverage);

        if (queues) {
          const job = await queues.get(reembedQueue.name)!.getJob(reembedJobId(model));
          if (job && (await job.isFailed())) {
            bar.end();
            throw new Error(
              `reembed: the backfill of ${model} failed after ${job.attemptsMade} attempts: ${job.failedReason}; run mnemo reembed again to retry`,
            );
          }
          if (!hinted && job && Date.now() - started > NO_WORKER_HINT_MS && ['waiting', 'prioritized'].includes(await job.getState())) {
            hinted = true;
            bar.note(`the backfill is still queued: is a worker (mnemo worker) running with MNEMO_QUEUE_PREFIX=${config.queuePrefix}?`);
          }
        }
        return false;
      },
      () => {
        bar.end();
        process.stderr.write(`stopped watching; the worker goes on with the backfill of ${model}\n`);
      },
    );
  } finally {
    if (redis?.status === 'ready') {
      if (queues) await closeQueues(queues);
      await redis.quit().catch(() => undefined);
    } else {
      // Redis went away: closing politely would wait for it to come back.
      redis?.disconnect();
    }
    await database.close();
  }
}

/** On a terminal a bar, kept once the backfill is done; elsewhere (logs, CI) one line per step of 10%. */
export const backfillView = (model: string): ProgressView<Coverage> => ({
  line: (coverage) => `${model} ${progressBar(percent(coverage) / 100)} ${String(percent(coverage)).padStart(3)}% ${coverage.embedded}/${coverage.live}`,
  logLine: (coverage) => `${model}: ${percent(coverage)}% (${coverage.embedded}/${coverage.live} live facts)`,
  milestone: (coverage) => Math.floor(percent(coverage) / 10),
  keep: true,
});
