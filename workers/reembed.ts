import { UnrecoverableError } from 'bullmq';
import type { z } from 'zod';
import type { Db } from '../src/db/client.ts';
import { forEachTenant } from '../src/db/tenants.ts';
import type { EmbeddingProviders } from '../src/embeddings/registry.ts';
import { computeNextBatch, listModels, storeBatch, switchWhenCovered, totalCoverage } from '../src/memory/facts/vectors.ts';
import type { reembedQueue } from '../src/jobs/queues.ts';
import type { JobHandler } from '../src/jobs/worker.ts';
import { failFastOnPermanent } from './embed.ts';

export interface ReembedDeps {
  db: Db;
  providers: EmbeddingProviders | undefined;
  batch: number;
}

export interface ReembedProgress {
  model: string;
  live: number;
  embedded: number;
}

/**
 * The blue-green backfill of a new model (DESIGN §9): embeds every live fact of every tenant with
 * it, reporting progress, then switches search to it when it covers every live fact. If facts
 * arrived too fast to finish, the job fails and BullMQ runs another pass after a backoff; the
 * previous model keeps serving meanwhile.
 */
export function reembedHandler({ db, providers, batch }: ReembedDeps): JobHandler<z.infer<typeof reembedQueue.payload>> {
  return async ({ model }, { job, logger }) => {
    if (!providers) throw new UnrecoverableError('this worker has no embeddings configured (KINDGI_MEMORY_EMBEDDINGS)');
    const info = (await listModels(db)).find((m) => m.model === model);
    if (!info || info.state !== 'backfilling') return { model, skipped: info ? `already ${info.state}` : 'unknown model' };

    const provider = providers.forModel(model);
    const start = await totalCoverage(db, model);
    const progress: ReembedProgress = { model, live: start.live, embedded: start.embedded };
    await job.updateProgress(progress);
    await forEachTenant(db, async (tenantId) => {
      // In id order, each fact read once; what changes behind the pass is left to the next pass.
      let after: string | undefined;
      for (;;) {
        const computed = await computeNextBatch(db, provider, tenantId, info, { batch, after }).catch(failFastOnPermanent);
        if (computed.vectors.length > 0) {
          await storeBatch(db, computed);
          progress.embedded += computed.vectors.length;
          await job.updateProgress({ ...progress });
        }
        if (computed.vectors.length < batch) break;
        after = computed.last;
      }
    });
    if (!(await switchWhenCovered(db, model))) {
      throw new Error(`facts arrived while backfilling ${model}; another pass follows`);
    }
    logger.info('embedding model switched', { model });
    return { ...progress, switched: true };
  };
}
