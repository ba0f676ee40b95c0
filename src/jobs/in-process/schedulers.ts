import { getNextMillis } from 'bullmq';
import type { AddOptions, JobData, RepeatOptions } from '../queues.ts';
import type { Timers } from './timers.ts';

/**
 * The next run of a schedule after `after` (ms), as BullMQ computes it: `every` → the next
 * multiple of it, `pattern` → the cron expression's next time in `tz`. Undefined when none.
 */
export function nextRun(repeat: RepeatOptions, after: number): number | undefined {
  return getNextMillis(after, { ...repeat });
}

/** What a queue's schedulers ask of the queue whose runs they add. */
export interface ScheduledQueue<Run> {
  /** Adds a job created at `timestamp` (ms); undefined when the queue takes no more jobs. */
  addAt(name: string, data: JobData, opts: AddOptions, timestamp: number): Run | undefined;
  /** Whether a run added earlier still waits for its turn (neither started nor over). */
  waits(run: Run): boolean;
}

interface Scheduler<Run> {
  id: string;
  repeat: RepeatOptions;
  template: { name?: string; data?: JobData };
  next?: number;
  cancel?: () => void;
  /** Its latest run; the next is not added while that one still waits (as BullMQ). */
  last?: Run;
}

/**
 * One in-process queue's job schedulers, kept as BullMQ keeps them in Redis: `every` or a cron
 * `pattern` (BullMQ's own next-time computation), each run added under BullMQ's id
 * (`repeat:<scheduler>:<time>`) with its due time as its timestamp. The queue's
 * `upsertJobScheduler`, `getJobScheduler` and `removeJobScheduler` answer from here.
 */
export class JobSchedulers<Run> {
  private readonly schedulers = new Map<string, Scheduler<Run>>();

  constructor(
    private readonly queue: ScheduledQueue<Run>,
    private readonly timers: Timers,
  ) {}

  upsert(id: string, repeat: RepeatOptions, template: { name?: string; data?: JobData }): unknown {
    if (!repeat.every === !repeat.pattern) throw new Error('a job scheduler needs exactly one of every and pattern');
    const existing = this.schedulers.get(id);
    if (existing && existing.repeat.every === repeat.every && existing.repeat.pattern === repeat.pattern && existing.repeat.tz === repeat.tz) {
      existing.template = template;
      return this.describe(existing);
    }
    existing?.cancel?.();
    const scheduler: Scheduler<Run> = { id, repeat: { ...repeat }, template };
    this.schedulers.set(id, scheduler);
    this.arm(scheduler, Date.now());
    return this.describe(scheduler);
  }

  get(id: string): unknown {
    const scheduler = this.schedulers.get(id);
    return scheduler ? this.describe(scheduler) : undefined;
  }

  remove(id: string): boolean {
    const scheduler = this.schedulers.get(id);
    if (!scheduler) return false;
    scheduler.cancel?.();
    this.schedulers.delete(id);
    return true;
  }

  private arm(scheduler: Scheduler<Run>, after: number): void {
    const next = nextRun(scheduler.repeat, after);
    scheduler.next = next;
    if (next === undefined) return;
    scheduler.cancel = this.timers.at(next, () => this.fire(scheduler, next));
  }

  private fire(scheduler: Scheduler<Run>, at: number): void {
    if (this.schedulers.get(scheduler.id) !== scheduler) return;
    const last = scheduler.last;
    if (last === undefined || !this.queue.waits(last)) {
      const { name = scheduler.id, data = { payload: {} } } = scheduler.template;
      // The run's id and time are the same in every process with this schedule (a nightly report's id derives from them).
      scheduler.last = this.queue.addAt(name, data, { jobId: `repeat:${scheduler.id}:${at}` }, at);
    }
    this.arm(scheduler, at);
  }

  private describe(scheduler: Scheduler<Run>) {
    return { key: scheduler.id, name: scheduler.template.name ?? scheduler.id, next: scheduler.next, ...scheduler.repeat };
  }
}
