import { UnrecoverableError } from 'bullmq';
import type { Db } from '../src/db/client.ts';
import { EmbeddingDimensionChanged, EmbeddingRequestRejected } from '../src/embeddings/provider.ts';
import type { EmbeddingProviders } from '../src/embeddings/registry.ts';
import { computeNextBatch, listModels, storeBatch } from '../src/memory/facts/vectors.ts';
import { scheduleEmbedding } from '../src/jobs/embedding-jobs.ts';
import type { embedQueue, Queues } from '../src/jobs/queues.ts';
import type { JobHandler } from '../src/jobs/worker.ts';
import type { z } from 'zod';

/**
 * An endpoint that rejects the request (4xx) or a model whose dimension changed will not get
 * better by retrying: those fail the job for good, with the endpoint's own words. An unreachable
 * endpoint is retried with backoff.
 */
export function failFastOnPermanent(error: unknown): never {
  if (error instanceof EmbeddingRequestRejected || error instanceof EmbeddingDimensionChanged) {
    throw new UnrecoverableError(error.message);
  }
  throw error;
}

export interface EmbedDeps {
  db: Db;
  queues: Queues;
  providers: EmbeddingProviders | undefined;
  /** Facts per read, endpoint request and write (KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE). */
  batch: number;
  /**
   * Batches one job embeds before it hands the rest of the tenant's backlog to a new job at the
   * back of the queue, so one tenant's backlog cannot hold every worker slot while others wait.
   */
  batchesPerJob?: number;
}

/**
 * Embeds what one tenant still needs, for every model in use (the active one and, during a
 * switch, the one being backfilled), in batches: each reads up to `batch` facts without a current
 * vector in one transaction, asks the endpoint once for all of them, and stores them in another
 * (storeEmbeddings keeps a vector only for a fact still live at that version). While one batch is
 * stored the next is read and sent to the endpoint, so the endpoint's latency and the index
 * insert overlap. It goes on until a read finds fewer than a batch. A job delivered twice, or run
 * after another drained the tenant, finds nothing and does nothing. An unreachable endpoint fails
 * the job, which BullMQ retries with backoff; writes never wait for it.
 */
export function embedHandler({ db, queues, providers, batch, batchesPerJob = 100 }: EmbedDeps): JobHandler<z.infer<typeof embedQueue.payload>> {
  return async ({ tenantId }, { logger }) => {
    if (!providers) throw new UnrecoverableError('this worker has no embeddings configured (KINDGI_MEMORY_EMBEDDINGS)');
    let embedded = 0;
    let batches = 0;
    let storing: Promise<number> | undefined;
    try {
      for (const model of await listModels(db)) {
        const provider = providers.forModel(model.model);
        // In id order from the start: a fact that needs a vector again after its place was passed
        // (superseded meanwhile) was asked for after its commit, and that request is the next job.
        let after: string | undefined;
        for (;;) {
          if (batches === batchesPerJob) {
            await storing;
            await scheduleEmbedding(queues, tenantId);
            logger.debug('embedded; the rest follows in a new job', { tenantId, embedded });
            return { embedded, more: true };
          }
          const computed = await computeNextBatch(db, provider, tenantId, model, { batch, after });
          batches++;
          await storing;
          storing = undefined;
          if (computed.vectors.length > 0) {
            storing = storeBatch(db, computed);
            // Awaited before the next store or the end; this only keeps a failure from going unhandled meanwhile.
            storing.catch(() => {});
          }
          embedded += computed.vectors.length;
          if (computed.vectors.length < batch) break;
          after = computed.last;
        }
      }
      await storing;
    } catch (error) {
      // A batch being stored finishes (or fails) before the job does: a retry must not race it.
      await storing?.catch(() => {});
      failFastOnPermanent(error);
    }
    logger.debug('embedded', { tenantId, embedded, batches });
    return { embedded };
  };
}
