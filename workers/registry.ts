import type { Db } from '../src/db/client.ts';
import { reconcileQueue, type Queues } from '../src/jobs/queues.ts';
import type { HandlerRegistry } from '../src/jobs/worker.ts';
import { reconcileHandler } from './reconcile.ts';

export interface WorkerDeps {
  db: Db;
  queues: Queues;
}

/** The handler of every queue, by name. The worker checks it against the queue list at startup. */
export function createHandlerRegistry(deps: WorkerDeps): HandlerRegistry {
  return {
    [reconcileQueue.name]: reconcileHandler(deps),
  };
}
