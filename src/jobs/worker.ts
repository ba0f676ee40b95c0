import { UnrecoverableError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Db } from '../db/client.ts';
import { databaseUnavailableReason } from '../db/errors.ts';
import { type Logger, type SafeError, safeError, safeErrorText } from '../foundation/log.ts';
import { jobDuration, jobFailures, jobWait } from '../foundation/metrics.ts';
import { markOutboxAttemptFailed, markOutboxDone } from './outbox.ts';
import { type JobData, outboxRefSchema, type QueueDefinition } from './queues.ts';

/**
 * What a handler and the processor read of the job they run. BullMQ's `Job` has it; so does a job
 * of the in-process queue (src/jobs/in-process/queue.ts), whose outbox jobs count their attempts
 * in Postgres.
 */
export interface RunningJob {
  readonly id?: string | undefined;
  readonly name: string;
  readonly data: JobData;
  /** Attempts made before this one. */
  readonly attemptsMade: number;
  /** When the job was created (a scheduler's run: the time it was due), in ms. */
  readonly timestamp: number;
  /** When this attempt started, in ms. */
  readonly processedOn?: number | undefined;
  /** `delay`: how long after `timestamp` the job was due (BullMQ adds a scheduler's run this way). */
  readonly opts: { readonly attempts?: number | undefined; readonly delay?: number | undefined };
  updateProgress(progress: object): Promise<void>;
}

export interface JobContext {
  job: RunningJob;
  logger: Logger;
}

/**
 * Whether this failure of the job is its last, so whatever it leaves half done must be closed now
 * (an outbox row failed for good, a report or an erasure marked failed): BullMQ retries neither
 * an `UnrecoverableError` nor a job whose attempts are used up.
 */
export function isFinalAttempt(job: Pick<RunningJob, 'attemptsMade' | 'opts'>, error: unknown): boolean {
  return error instanceof UnrecoverableError || job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
}

/** Does one job's work. Must be idempotent: an outbox row can be delivered more than once. */
export type JobHandler<Payload = any> = (payload: Payload, context: JobContext) => Promise<unknown>;

export type HandlerRegistry = Readonly<Record<string, JobHandler>>;

export class HandlerRegistryError extends Error {
  override name = 'HandlerRegistryError';
}

/** Startup check: every queue has a handler and every handler a queue. */
export function checkRegistry(definitions: readonly QueueDefinition[], registry: HandlerRegistry): void {
  const names = new Set(definitions.map((d) => d.name));
  const missing = [...names].filter((name) => typeof registry[name] !== 'function');
  const unknown = Object.keys(registry).filter((name) => !names.has(name));
  if (missing.length > 0) throw new HandlerRegistryError(`no handler for queue(s): ${missing.join(', ')}`);
  if (unknown.length > 0) throw new HandlerRegistryError(`handler(s) for unknown queue(s): ${unknown.join(', ')}`);
}

const jobDataSchema = z.object({ payload: z.unknown(), outbox: outboxRefSchema.optional() });

/**
 * Wraps a handler: validates the payload (an invalid one fails for good, never retried), runs
 * it, keeps the job's outbox row in step (done, or failed with the error), and records the
 * attempt in the job metrics. Both transports run jobs through it, BullMQ and in-process alike.
 */
export function createProcessor(definition: QueueDefinition, handler: JobHandler, deps: { db: Db; logger: Logger }) {
  const queue = definition.name;
  return async (job: RunningJob): Promise<unknown> => {
    const started = performance.now();
    // From when it was due to its first attempt: a retry's wait would count its backoff, which is on purpose.
    if (job.attemptsMade === 0 && job.processedOn !== undefined) {
      jobWait.observe({ queue }, Math.max(0, job.processedOn - job.timestamp - (job.opts.delay ?? 0)) / 1000);
    }
    const ran = (outcome: 'completed' | 'failed') => jobDuration.observe({ queue, outcome }, (performance.now() - started) / 1000);
    const logger = deps.logger.child({ queue: definition.name, jobId: job.id });
    const data = jobDataSchema.safeParse(job.data);
    const ref = data.success ? data.data.outbox : undefined;
    try {
      if (!data.success) throw new UnrecoverableError(`malformed job data: ${z.prettifyError(data.error)}`);
      const payload = definition.payload.safeParse(data.data.payload);
      if (!payload.success) throw new UnrecoverableError(`invalid payload: ${z.prettifyError(payload.error)}`);
      const result = await handler(payload.data, { job, logger });
      if (ref) await markOutboxDone(deps.db, ref);
      ran('completed');
      return result;
    } catch (error) {
      const final = isFinalAttempt(job, error);
      ran('failed');
      jobFailures.inc({ queue, final: String(final) });
      // A database outage is no reason to give the work up: the job's retries may all fall within
      // it, but the outbox row stays open so the reconciler hands the work in again afterwards.
      const outage = databaseUnavailableReason(error) !== undefined;
      logger.warn('job failed', { attempt: job.attemptsMade + 1, final, ...(outage ? { databaseUnavailable: true } : {}), error });
      const recorded = jobError(error);
      if (ref) {
        // With the database down this fails too; the job must still fail with its own error (and
        // be retried), not with this one, and never reject anywhere unhandled.
        await markOutboxAttemptFailed(deps.db, ref, recorded, final && !outage).catch((markError: unknown) =>
          logger.warn('could not record the failed attempt in the outbox', { error: markError }),
        );
      }
      throw recorded;
    }
  };
}

/**
 * The error a failed job is recorded with, in Redis (BullMQ keeps its message and stack with the
 * job for days) and in its outbox row. A database error carries the statement's parameters, which may be fact content
 * or an erasure target's id, in its message (drizzle) or fields (postgres.js): such an error is
 * replaced by its safe text, so erased content cannot survive in a failed job. BullMQ's control
 * errors (UnrecoverableError, DelayedError, …) and our own pass as they are.
 */
export function jobError(error: unknown): unknown {
  if (!(error instanceof Error) || !carriesStatement(error)) return error;
  const safe: Error & { code?: string } = new Error(safeErrorText(error));
  safe.name = 'DatabaseError';
  const described = safeError(error);
  if (typeof described !== 'string' && described.stack) safe.stack = described.stack;
  // The code (SQLSTATE, ECONNREFUSED…) stays readable for whoever classifies the failure.
  for (let d: SafeError | string | undefined = described; d && typeof d !== 'string'; d = d.cause) {
    if (d.code) {
      safe.code = d.code;
      break;
    }
  }
  return safe;
}

function carriesStatement(error: Error): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current.name === 'PostgresError' || current.constructor?.name === 'DrizzleQueryError' || 'parameters' in current || 'params' in current) {
      return true;
    }
    current = current.cause;
  }
  return false;
}

export interface StartWorkersOptions {
  definitions: readonly QueueDefinition[];
  registry: HandlerRegistry;
  connection: Redis;
  prefix: string;
  db: Db;
  logger: Logger;
  concurrency?: number;
  /** BullMQ's lock on a running job; a job whose worker died is run again once it lapses. */
  lockMs?: number;
}

/** Starts one BullMQ worker per queue, after checking the registry; nothing starts if it fails. */
export function startWorkers(options: StartWorkersOptions): Worker<JobData>[] {
  checkRegistry(options.definitions, options.registry);
  return options.definitions.map((definition) => {
    const worker = new Worker<JobData>(
      definition.name,
      createProcessor(definition, options.registry[definition.name]!, options),
      {
        connection: options.connection,
        prefix: options.prefix,
        concurrency: options.concurrency ?? 5,
        ...(options.lockMs ? { lockDuration: options.lockMs, stalledInterval: options.lockMs } : {}),
      },
    );
    worker.on('error', (error) => options.logger.error('worker error', { queue: definition.name, error }));
    return worker;
  });
}
