import { UnrecoverableError } from 'bullmq';
import type { Db } from '../src/db/client.ts';
import { EmbeddingDimensionChanged, EmbeddingRequestRejected } from '../src/embeddings/provider.ts';
import type { EmbeddingProviders } from '../src/embeddings/registry.ts';
import { embedPending, listModels } from '../src/memory/embeddings.ts';
import type { embedQueue } from '../src/jobs/queues.ts';
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
  providers: EmbeddingProviders | undefined;
}

/**
 * Embeds the named facts of one tenant for every model in use (the active one and, during a
 * switch, the one being backfilled). Facts already embedded at their version are skipped, so a
 * job delivered twice does nothing the second time. An unreachable endpoint fails the job, which
 * BullMQ retries with backoff; writes never wait for it.
 */
export function embedHandler({ db, providers }: EmbedDeps): JobHandler<z.infer<typeof embedQueue.payload>> {
  return async ({ tenantId, factIds }, { logger }) => {
    if (!providers) throw new UnrecoverableError('this worker has no embeddings configured (KINDGI_MEMORY_EMBEDDINGS)');
    let embedded = 0;
    for (const model of await listModels(db)) {
      embedded += await embedPending(db, providers.forModel(model.model), tenantId, model, { ids: factIds, batch: factIds.length }).catch(
        failFastOnPermanent,
      );
    }
    logger.debug('embedded', { tenantId, facts: factIds.length, embedded });
    return { embedded };
  };
}
