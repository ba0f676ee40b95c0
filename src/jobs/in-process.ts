/**
 * Jobs without Redis (DESIGN §1; docs/decisions/0014-in-process-jobs.md): the API process runs the
 * same handlers, through the same `createProcessor` (payload validation, outbox marking), behind
 * the same `JobQueue` interface the code enqueues through. One handler registry, two transports:
 * this is the in-process side of `startWorkers` (src/jobs/worker.ts), and src/jobs/in-process/
 * holds what BullMQ and Redis are to the other side: the queue (queue.ts), its job schedulers
 * (schedulers.ts), the lease an outbox row runs on (outbox-lease.ts) and long timers (timers.ts).
 *
 * What must survive a crash is already in Postgres and found again by the reconcile pass (one at
 * start, then every `reconcileEveryMs`): outbox rows, facts missing vectors, report schedules,
 * models being backfilled. So the queue itself is memory, except for outbox rows: those are
 * claimed from Postgres (`FOR UPDATE SKIP LOCKED`, a lease renewed while the job runs), their
 * attempts and backoff kept in the row, so several processes sharing one database never run a
 * row at once, a crashed process's row is taken again once its lease lapses, and a retry waits
 * out its backoff after a restart too. No transaction is held while a job works or waits.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/client.ts';
import type { Logger } from '../foundation/log.ts';
import { countQueueJobs } from '../foundation/metrics.ts';
import { InProcessQueue } from './in-process/queue.ts';
import { closeQueues, type QueueDefinition, type Queues, reconcileQueue, retentionQueue, scheduleRepeatable } from './queues.ts';
import { checkRegistry, createProcessor, type HandlerRegistry } from './worker.ts';

export interface InProcessJobsOptions {
  definitions: readonly QueueDefinition[];
  /** The handlers, or a function making them from the queues (handlers that enqueue need them). */
  registry: HandlerRegistry | ((queues: Queues) => HandlerRegistry);
  db: Db;
  logger: Logger;
  /** Jobs of one queue running at once (default 2): they share the process and its connections. */
  concurrency?: number;
  /** How often the reconcile pass runs (MNEMO_RECONCILE_EVERY_MS); one runs at start. */
  reconcileEveryMs: number;
  /** How often the retention sweep runs (MNEMO_RETENTION_EVERY_MS); one runs at start. */
  retentionEveryMs: number;
  /** How long a claim on an outbox row lasts unless renewed (default 30 s, MNEMO_JOB_LOCK_MS). */
  leaseMs?: number;
}

export interface InProcessJobs {
  /** The queues to enqueue through (routes, reconciler, handlers): the same interface as BullMQ's. */
  queues: Queues;
  /** Stops taking jobs and schedules, and waits for the running jobs to finish. */
  close(): Promise<void>;
}

/** Starts the queues and their schedules, after checking the registry; nothing runs if that fails. */
export function startInProcessJobs(options: InProcessJobsOptions): InProcessJobs {
  const queueOptions = {
    concurrency: options.concurrency ?? 2,
    logger: options.logger,
    lease: { db: options.db, logger: options.logger, leaseMs: options.leaseMs ?? 30_000, by: randomUUID() },
  };
  const queues = new Map(options.definitions.map((definition) => [definition.name, new InProcessQueue(definition, queueOptions)]));
  const registry = typeof options.registry === 'function' ? options.registry(queues) : options.registry;
  checkRegistry(options.definitions, registry);
  for (const definition of options.definitions) {
    queues.get(definition.name)!.start(createProcessor(definition, registry[definition.name]!, options));
  }
  for (const [name, every] of [
    [reconcileQueue.name, options.reconcileEveryMs],
    [retentionQueue.name, options.retentionEveryMs],
  ] as const) {
    const queue = queues.get(name);
    if (queue) void scheduleRepeatable(queue, every);
  }
  const uncount = countQueueJobs(async () => Object.fromEntries([...queues].map(([name, queue]) => [name, queue.counts()])));
  return {
    queues,
    close: async () => {
      uncount();
      await closeQueues(queues);
    },
  };
}
