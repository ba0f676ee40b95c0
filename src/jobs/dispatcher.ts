import type { Logger } from '../foundation/log.ts';
import { scheduleEmbedding } from './embedding-jobs.ts';
import { dispatchOutbox, type OutboxRow } from './outbox.ts';
import type { Queues } from './queues.ts';
import { promptly } from './redis.ts';
import { syncNightlyScheduler } from './report-jobs.ts';

/**
 * The one way a request hands work to the queues, after its transaction has committed. Every
 * method goes through `promptly`: Redis being slow or away delays the work, never the request,
 * and never fails it, because Postgres already records what is owed (an outbox row, a fact
 * without its vector, a schedule row) and the reconciler hands it over later.
 */
export interface Dispatcher {
  /** Outbox rows the request just committed (a report, an erasure); `what` names them in a warning. */
  outbox(rows: readonly OutboxRow[], what: string): Promise<void>;
  /** The tenant's missing vectors, once per request however many facts it wrote; nothing without embeddings. */
  embedding(tenantId: string): Promise<void>;
  /** The tenant's nightly report scheduler made to match its schedule (none: removed). */
  nightlyScheduler(tenantId: string, schedule: { cron: string } | undefined): Promise<void>;
}

export interface DispatcherOptions {
  /** The producer handles (BullMQ or in-process); absent, nothing is queued and the reconciler does it all. */
  queues?: Queues | undefined;
  logger: Logger;
  /** Whether this runtime computes vectors: without it, writes queue no embedding. */
  embeddings?: boolean | undefined;
}

export function createDispatcher({ queues, logger, embeddings = false }: DispatcherOptions): Dispatcher {
  return {
    async outbox(rows, what) {
      if (queues) await promptly(dispatchOutbox(queues, rows), logger, what);
    },
    // One request per tenant however many facts were written: the job reads them from Postgres.
    async embedding(tenantId) {
      if (queues && embeddings) await promptly(scheduleEmbedding(queues, tenantId), logger, 'queue embedding', { tenantId });
    },
    // If Redis misses a removal, the orphaned scheduler's next run finds no schedule and does nothing.
    async nightlyScheduler(tenantId, schedule) {
      if (!queues) return;
      const what = schedule ? 'schedule the nightly report' : 'remove the nightly scheduler';
      await promptly(syncNightlyScheduler(queues, tenantId, schedule), logger, what);
    },
  };
}
