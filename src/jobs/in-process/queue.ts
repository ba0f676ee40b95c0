/**
 * Jobs without Redis (DESIGN §1, issue 13): the API process runs the same handlers, through the
 * same `createProcessor` (payload validation, outbox marking), behind the same `JobQueue`
 * interface the code enqueues through. One handler registry, two transports.
 *
 * What must survive a crash is already in Postgres and found again by the reconcile pass (one at
 * start, then every `reconcileEveryMs`): outbox rows, facts missing vectors, report schedules,
 * models being backfilled. So the queue itself is memory, except for outbox rows: those are
 * claimed from Postgres (`FOR UPDATE SKIP LOCKED`, a lease renewed while the job runs), their
 * attempts and backoff kept in the row, so several processes sharing one database never run a
 * row at once, a crashed process's row is taken again once its lease lapses, and a retry waits
 * out its backoff after a restart too. No transaction is held while a job works or waits.
 *
 * BullMQ's semantics, kept: attempts and backoff per queue definition (BullMQ's own backoff
 * computation), `UnrecoverableError` fails at once, a job id is added once while it exists (a
 * failed one can be retried), deduplication with `keepLastIfActive` (at most one running and one
 * waiting per id), job schedulers (`every`, or a cron `pattern` with BullMQ's own next-time
 * computation), and `close()` stops taking jobs and waits for the running ones.
 */
import { randomUUID } from 'node:crypto';
import { Backoffs, getNextMillis } from 'bullmq';
import type { Db } from '../../db/client.ts';
import type { Logger } from '../../log.ts';
import { countQueueJobs, type QueueState } from '../../metrics.ts';
import { claimOutbox, releaseOutboxClaim, renewOutboxClaim } from '../outbox.ts';
import {
  type AddOptions,
  type JobData,
  type JobQueue,
  type QueueDefinition,
  type QueuedJob,
  type Queues,
  reconcileQueue,
  type RepeatOptions,
  retentionQueue,
  scheduleRepeatable,
} from '../queues.ts';
import { checkRegistry, createProcessor, type HandlerRegistry, isFinalAttempt, type RunningJob } from '../worker.ts';

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

/**
 * The next run of a schedule after `after` (ms), as BullMQ computes it: `every` → the next
 * multiple of it, `pattern` → the cron expression's next time in `tz`. Undefined when none.
 */
export function nextRun(repeat: RepeatOptions, after: number): number | undefined {
  return getNextMillis(after, { ...repeat });
}

/** The wait before attempt `attemptsMade + 1`, as BullMQ computes it from the queue's backoff. */
export function backoffDelay(definition: QueueDefinition, attemptsMade: number): number {
  const configured = definition.jobOptions.backoff;
  const backoff = configured === undefined ? undefined : Backoffs.normalize(configured);
  return backoff ? Number(Backoffs.calculate(backoff, attemptsMade, new Error('retry'), undefined as never)) || 0 : 0;
}

/** Starts the queues and their schedules, after checking the registry; nothing runs if that fails. */
export function startInProcessJobs(options: InProcessJobsOptions): InProcessJobs {
  const shared: Shared = {
    db: options.db,
    logger: options.logger,
    concurrency: options.concurrency ?? 2,
    leaseMs: options.leaseMs ?? 30_000,
    processId: randomUUID(),
  };
  const queues = new Map(options.definitions.map((definition) => [definition.name, new InProcessQueue(definition, shared)]));
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
      await Promise.all([...queues.values()].map((queue) => queue.close()));
    },
  };
}

interface Shared {
  db: Db;
  logger: Logger;
  concurrency: number;
  leaseMs: number;
  /** This process's claims on outbox rows carry it. */
  processId: string;
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

interface Scheduler {
  id: string;
  repeat: RepeatOptions;
  template: { name?: string; data?: JobData };
  next?: number;
  cancel?: () => void;
  /** Its latest run; the next is not added while that one still waits (as BullMQ). */
  last?: MemoryJob;
}

/** Failed jobs kept per queue (for `getJob` → `isFailed` → `retry`); the oldest go first. */
const FAILED_KEPT = 1000;
/** Longest single timer: Node fires a longer one at once; a later time is reached in steps. */
const MAX_TIMER_MS = 3_600_000;
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

class InProcessQueue implements JobQueue {
  readonly name: string;
  private processor: Processor | undefined;
  private readonly jobs = new Map<string, MemoryJob>();
  private readonly waiting: MemoryJob[] = [];
  private readonly failed: MemoryJob[] = [];
  /** Per deduplication id: the job holding it, and the add kept while it runs (keepLastIfActive). */
  private readonly deduplication = new Map<string, { job: MemoryJob; next?: { name: string; data: JobData } }>();
  private readonly schedulers = new Map<string, Scheduler>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly runs = new Set<Promise<void>>();
  private running = 0;
  private counter = 0;
  private closed = false;

  constructor(
    private readonly definition: QueueDefinition,
    private readonly shared: Shared,
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
    if (!repeat.every === !repeat.pattern) throw new Error('a job scheduler needs exactly one of every and pattern');
    const existing = this.schedulers.get(id);
    if (existing && existing.repeat.every === repeat.every && existing.repeat.pattern === repeat.pattern && existing.repeat.tz === repeat.tz) {
      existing.template = template;
      return this.describe(existing);
    }
    existing?.cancel?.();
    const scheduler: Scheduler = { id, repeat: { ...repeat }, template };
    this.schedulers.set(id, scheduler);
    this.arm(scheduler, Date.now());
    return this.describe(scheduler);
  }

  async getJobScheduler(id: string): Promise<unknown> {
    const scheduler = this.schedulers.get(id);
    return scheduler ? this.describe(scheduler) : undefined;
  }

  async removeJobScheduler(id: string): Promise<boolean> {
    const scheduler = this.schedulers.get(id);
    if (!scheduler) return false;
    scheduler.cancel?.();
    this.schedulers.delete(id);
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
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
    const ref = data.outbox;
    if (ref && typeof ref.tenantId === 'string' && ref.tenantId !== '' && typeof ref.id === 'string' && uuidPattern.test(ref.id)) {
      job.outbox = { tenantId: ref.tenantId, id: ref.id };
    }
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
    this.at(Date.now() + waitMs, () => this.enqueue(job));
  }

  private pump(): void {
    while (this.processor && !this.closed && this.running < this.shared.concurrency && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      job.state = 'active';
      this.running++;
      const run: Promise<void> = (job.outbox ? this.runOutbox(job, job.outbox) : this.runInMemory(job))
        .catch((error: unknown) => {
          this.shared.logger.error('in-process job could not be run', { queue: this.name, jobId: job.id, error });
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
      if (isFinalAttempt(running, error) || this.closed) this.settle(job, 'failed');
      else this.delay(job, backoffDelay(this.definition, job.attemptsMade));
    }
  }

  /**
   * An outbox row: claimed first (skipped if another process runs it, it is done, or its backoff
   * runs), its lease renewed while it runs, released after with the backoff of a failed attempt.
   */
  private async runOutbox(job: MemoryJob, ref: { tenantId: string; id: string }): Promise<void> {
    const { db, leaseMs, processId: by, logger } = this.shared;
    const claim = await claimOutbox(db, ref, { by, leaseMs }).catch((error: unknown) => {
      // The database is away: the reconcile pass hands the row in again once it is back.
      logger.warn('could not claim an outbox row', { queue: this.name, outboxId: ref.id, error });
      return { kind: 'unavailable' } as const;
    });
    if (claim.kind === 'unavailable') return this.settle(job, 'completed');
    if (claim.kind === 'later') return this.delay(job, claim.waitMs);

    const renewal = setInterval(() => {
      renewOutboxClaim(db, ref, { by, leaseMs })
        .then((held) => held || logger.warn('lost the claim on a running outbox row', { queue: this.name, outboxId: ref.id }))
        .catch((error: unknown) => logger.warn('could not renew the claim on an outbox row', { queue: this.name, outboxId: ref.id, error }));
    }, Math.max(100, Math.floor(leaseMs / 3)));
    renewal.unref();
    let retryInMs: number | undefined;
    const running = this.runningJob(job, { payload: claim.payload, outbox: ref }, claim.attempts, claim.createdAt.getTime());
    try {
      await this.processor!(running);
    } catch (error) {
      // createProcessor has recorded the attempt in the row (and failed it for good when final).
      if (!isFinalAttempt(running, error)) retryInMs = backoffDelay(this.definition, claim.attempts + 1);
    } finally {
      clearInterval(renewal);
    }
    await releaseOutboxClaim(db, ref, by, retryInMs).catch((error: unknown) =>
      logger.warn('could not release the claim on an outbox row; it lapses', { queue: this.name, outboxId: ref.id, error }),
    );
    // Postgres holds the row's state from here: a retry is taken again from it, not from memory.
    if (retryInMs !== undefined && !this.closed) this.delay(job, retryInMs);
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

  private arm(scheduler: Scheduler, after: number): void {
    const next = nextRun(scheduler.repeat, after);
    scheduler.next = next;
    if (next === undefined) return;
    scheduler.cancel = this.at(next, () => this.fire(scheduler, next));
  }

  private fire(scheduler: Scheduler, at: number): void {
    if (this.schedulers.get(scheduler.id) !== scheduler) return;
    const last = scheduler.last;
    const pending = last && this.jobs.get(last.id) === last && (last.state === 'waiting' || last.state === 'delayed');
    if (!pending) {
      const { name = scheduler.id, data = { payload: {} } } = scheduler.template;
      // The run's id and time are the same in every process with this schedule (a nightly report's id derives from them).
      scheduler.last = this.addJob(name, data, { jobId: `repeat:${scheduler.id}:${at}` }, at);
    }
    this.arm(scheduler, at);
  }

  private describe(scheduler: Scheduler) {
    return { key: scheduler.id, name: scheduler.template.name ?? scheduler.id, next: scheduler.next, ...scheduler.repeat };
  }

  /** Runs `fn` at `when` (ms) unless the queue closes first; returns a cancel. */
  private at(when: number, fn: () => void): () => void {
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      const wait = when - Date.now();
      timer = setTimeout(
        () => {
          this.timers.delete(timer!);
          if (this.closed) return;
          if (when - Date.now() > 0 && wait > MAX_TIMER_MS) arm();
          else fn();
        },
        Math.min(Math.max(wait, 0), MAX_TIMER_MS),
      );
      timer.unref();
      this.timers.add(timer);
    };
    arm();
    return () => {
      if (!timer) return;
      clearTimeout(timer);
      this.timers.delete(timer);
    };
  }
}
