/**
 * The in-process queue: BullMQ's `Queue` and `Worker` of one queue in one, in memory, behind the
 * same `JobQueue` interface (src/jobs/queues.ts) the code enqueues through, running jobs through
 * the same processor (`createProcessor`, src/jobs/worker.ts). An outbox row's job is run on a
 * lease in Postgres (outbox-lease.ts), so its attempts and backoff live in the row, not here.
 *
 * BullMQ's semantics, kept: attempts and backoff per queue definition (BullMQ's own backoff
 * computation), `UnrecoverableError` fails at once, a job id is added once while it exists (a
 * failed one can be retried), deduplication with `keepLastIfActive` (at most one running and one
 * waiting per id), job schedulers (schedulers.ts), and `close()` stops taking jobs and waits for
 * the running ones.
 */
import { Backoffs } from 'bullmq';
import type { Logger } from '../../foundation/log.ts';
import type { QueueState } from '../../foundation/metrics.ts';
import {
  type AddOptions,
  type JobData,
  type JobQueue,
  outboxRefSchema,
  type QueueDefinition,
  type QueuedJob,
  type RepeatOptions,
} from '../queues.ts';
import { isFinalAttempt, type RunningJob } from '../worker.ts';
import { type OutboxLease, runOnLease } from './outbox-lease.ts';
import { JobSchedulers } from './schedulers.ts';
import { Timers } from './timers.ts';

/** The wait before attempt `attemptsMade + 1`, as BullMQ computes it from the queue's backoff. */
export function backoffDelay(definition: QueueDefinition, attemptsMade: number): number {
  const configured = definition.jobOptions.backoff;
  const backoff = configured === undefined ? undefined : Backoffs.normalize(configured);
  return backoff ? Number(Backoffs.calculate(backoff, attemptsMade, new Error('retry'), undefined as never)) || 0 : 0;
}

/** After a failed attempt: the wait before the next, or undefined when the job fails for good. */
function retryWait(definition: QueueDefinition, job: RunningJob, error: unknown): number | undefined {
  return isFinalAttempt(job, error) ? undefined : backoffDelay(definition, job.attemptsMade + 1);
}

export interface InProcessQueueOptions {
  /** Jobs of the queue running at once. */
  concurrency: number;
  logger: Logger;
  /** How its outbox rows are claimed, shared by the process's queues. */
  lease: OutboxLease;
}

type Processor = (job: RunningJob) => Promise<unknown>;

interface MemoryJob {
  id: string;
  name: string;
  data: JobData;
  timestamp: number;
  /** Attempts made so far; an outbox job's are counted in its row. */
  attemptsMade: number;
  state: 'waiting' | 'delayed' | 'active' | 'failed';
  /** Added under a caller's id: kept once failed, so it can be found and retried. */
  named: boolean;
  deduplicationId?: string;
  /** The outbox row this job runs: its claim, attempts and backoff live in Postgres. */
  outbox?: { tenantId: string; id: string };
}

/** Failed jobs kept per queue (for `getJob` → `isFailed` → `retry`); the oldest go first. */
const FAILED_KEPT = 1000;

export class InProcessQueue implements JobQueue {
  readonly name: string;
  private processor: Processor | undefined;
  private readonly jobs = new Map<string, MemoryJob>();
  private readonly waiting: MemoryJob[] = [];
  private readonly failed: MemoryJob[] = [];
  /** Per deduplication id: the job holding it, and the add kept while it runs (keepLastIfActive). */
  private readonly deduplication = new Map<string, { job: MemoryJob; next?: { name: string; data: JobData } }>();
  private readonly timers = new Timers();
  private readonly schedulers = new JobSchedulers<MemoryJob>(
    {
      addAt: (name, data, opts, timestamp) => this.addJob(name, data, opts, timestamp),
      waits: (job) => this.jobs.get(job.id) === job && (job.state === 'waiting' || job.state === 'delayed'),
    },
    this.timers,
  );
  private readonly runs = new Set<Promise<void>>();
  private running = 0;
  private counter = 0;
  private closed = false;

  constructor(
    private readonly definition: QueueDefinition,
    private readonly options: InProcessQueueOptions,
  ) {
    this.name = definition.name;
  }

  start(processor: Processor): void {
    this.processor = processor;
    this.pump();
  }

  async add(name: string, data: JobData, opts: AddOptions = {}): Promise<unknown> {
    return this.addJob(name, data, opts, Date.now());
  }

  /** Its jobs by state, for the queue-depth metric. */
  counts(): Record<QueueState, number> {
    const counts = { waiting: 0, active: 0, delayed: 0, failed: 0 };
    for (const job of this.jobs.values()) counts[job.state]++;
    return counts;
  }

  async getJob(jobId: string): Promise<QueuedJob | undefined> {
    const job = this.jobs.get(jobId);
    if (!job) return undefined;
    return {
      isFailed: async () => job.state === 'failed',
      retry: async () => {
        if (job.state !== 'failed' || this.closed) return;
        this.failed.splice(this.failed.indexOf(job), 1);
        job.attemptsMade = 0;
        this.enqueue(job);
      },
    };
  }

  async upsertJobScheduler(id: string, repeat: RepeatOptions, template: { name?: string; data?: JobData }): Promise<unknown> {
    if (this.closed) return undefined;
    return this.schedulers.upsert(id, repeat, template);
  }

  async getJobScheduler(id: string): Promise<unknown> {
    return this.schedulers.get(id);
  }

  async removeJobScheduler(id: string): Promise<boolean> {
    return this.schedulers.remove(id);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.timers.stop();
    this.waiting.length = 0;
    await Promise.allSettled([...this.runs]);
  }

  private addJob(name: string, data: JobData, opts: AddOptions, timestamp: number): MemoryJob | undefined {
    // Work handed in while shutting down is not lost: Postgres records it, and the reconcile pass
    // of the next start (or of another process) finds it.
    if (this.closed) return undefined;
    const dedup = opts.deduplication;
    if (dedup) {
      const holder = this.deduplication.get(dedup.id);
      if (holder) {
        if (holder.job.state === 'active' && dedup.keepLastIfActive) holder.next = { name, data };
        return holder.job;
      }
    } else if (opts.jobId !== undefined && this.jobs.has(opts.jobId)) {
      return this.jobs.get(opts.jobId);
    }
    const job: MemoryJob = {
      id: opts.jobId ?? `${++this.counter}`,
      name,
      data,
      timestamp,
      attemptsMade: 0,
      state: 'waiting',
      named: opts.jobId !== undefined,
    };
    // An outbox row only when the processor would take it as one (else it fails as malformed).
    const ref = outboxRefSchema.safeParse(data.outbox);
    if (ref.success) job.outbox = ref.data;
    if (dedup) {
      job.deduplicationId = dedup.id;
      this.deduplication.set(dedup.id, { job });
    }
    this.jobs.set(job.id, job);
    this.enqueue(job);
    return job;
  }

  private enqueue(job: MemoryJob): void {
    job.state = 'waiting';
    this.waiting.push(job);
    // After the caller's add has returned, as with a queue in Redis.
    queueMicrotask(() => this.pump());
  }

  private delay(job: MemoryJob, waitMs: number): void {
    job.state = 'delayed';
    this.timers.at(Date.now() + waitMs, () => this.enqueue(job));
  }

  private pump(): void {
    while (this.processor && !this.closed && this.running < this.options.concurrency && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      job.state = 'active';
      this.running++;
      const run: Promise<void> = (job.outbox ? this.runOutbox(job, job.outbox) : this.runInMemory(job))
        .catch((error: unknown) => {
          this.options.logger.error('in-process job could not be run', { queue: this.name, jobId: job.id, error });
          this.settle(job, 'failed');
        })
        .finally(() => {
          this.running--;
          this.runs.delete(run);
          this.pump();
        });
      this.runs.add(run);
    }
  }

  /** A job whose retries are kept here: derived work (embed, reembed, sweeps) that Postgres finds again. */
  private async runInMemory(job: MemoryJob): Promise<void> {
    const running = this.runningJob(job, job.data, job.attemptsMade, job.timestamp);
    try {
      await this.processor!(running);
      this.settle(job, 'completed');
    } catch (error) {
      job.attemptsMade++;
      const retryInMs = this.closed ? undefined : retryWait(this.definition, running, error);
      if (retryInMs === undefined) this.settle(job, 'failed');
      else this.delay(job, retryInMs);
    }
  }

  /** An outbox row, run on a lease (outbox-lease.ts): its attempts and backoff are the row's. */
  private async runOutbox(job: MemoryJob, ref: { tenantId: string; id: string }): Promise<void> {
    const run = await runOnLease(this.options.lease, this.name, ref, async (row) => {
      const running = this.runningJob(job, { payload: row.payload, outbox: ref }, row.attempts, row.createdAt.getTime());
      try {
        await this.processor!(running);
        return undefined;
      } catch (error) {
        // createProcessor has recorded the attempt in the row (and failed it for good when final).
        return retryWait(this.definition, running, error);
      }
    });
    if (run.kind === 'later') return this.delay(job, run.waitMs);
    // Postgres holds the row's state from here: a retry is taken again from it, not from memory.
    if (run.kind === 'ran' && run.retryInMs !== undefined && !this.closed) this.delay(job, run.retryInMs);
    else this.settle(job, 'completed');
  }

  private runningJob(job: MemoryJob, data: JobData, attemptsMade: number, timestamp: number): RunningJob {
    return {
      id: job.id,
      name: job.name,
      data,
      attemptsMade,
      timestamp,
      processedOn: Date.now(),
      opts: { attempts: this.attempts },
      // Nobody reads a running job's progress without Redis: `mnemo reembed --watch` counts coverage in Postgres.
      updateProgress: async () => {},
    };
  }

  private get attempts(): number {
    return this.definition.jobOptions.attempts ?? 1;
  }

  /** The job is over: its id and deduplication id are free (a named failed job is kept for retry). */
  private settle(job: MemoryJob, outcome: 'completed' | 'failed'): void {
    if (job.deduplicationId) {
      const holder = this.deduplication.get(job.deduplicationId);
      if (holder?.job === job) {
        this.deduplication.delete(job.deduplicationId);
        if (holder.next) this.addJob(holder.next.name, holder.next.data, { deduplication: { id: job.deduplicationId, keepLastIfActive: true } }, Date.now());
      }
    }
    if (outcome === 'failed' && job.named && !job.outbox) {
      job.state = 'failed';
      this.failed.push(job);
      if (this.failed.length > FAILED_KEPT) this.jobs.delete(this.failed.shift()!.id);
      return;
    }
    if (this.jobs.get(job.id) === job) this.jobs.delete(job.id);
  }
}
