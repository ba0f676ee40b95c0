import type { Db } from '../src/db/client.ts';
import type { EmbeddingProviders } from '../src/embeddings/registry.ts';
import { embedQueue, erasureQueue, type Queues, reconcileQueue, reembedQueue, reportQueue, retentionQueue } from '../src/jobs/queues.ts';
import type { HandlerRegistry } from '../src/jobs/worker.ts';
import { embedHandler } from './embed.ts';
import { erasureHandler } from './erasure.ts';
import { reconcileHandler } from './reconcile.ts';
import { reembedHandler } from './reembed.ts';
import { reportHandler } from './report.ts';
import { retentionHandler } from './retention.ts';

export interface WorkerDeps {
  db: Db;
  queues: Queues;
  /** Absent when this deployment has no embeddings. */
  providers?: EmbeddingProviders | undefined;
  embedBatch?: number;
  /** How long deleted and expired content is kept before the retention sweep purges it (default 7 days). */
  purgeGraceMs?: number;
}

/** The handler of every queue, by name. The worker checks it against the queue list at startup. */
export function createHandlerRegistry({ db, queues, providers, embedBatch = 64, purgeGraceMs = 7 * 24 * 3600 * 1000 }: WorkerDeps): HandlerRegistry {
  return {
    [reconcileQueue.name]: reconcileHandler({
      db,
      queues,
      embeddings: providers ? { configured: providers.configured } : undefined,
    }),
    [embedQueue.name]: embedHandler({ db, queues, providers, batch: embedBatch }),
    [reembedQueue.name]: reembedHandler({ db, providers, batch: embedBatch }),
    [reportQueue.name]: reportHandler({ db }),
    [retentionQueue.name]: retentionHandler({ db, purgeGraceMs }),
    [erasureQueue.name]: erasureHandler({ db }),
  };
}
