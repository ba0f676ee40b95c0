import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * A queue: its name, the zod schema of its payload, and its job defaults (attempts, backoff,
 * how many finished jobs Redis keeps). The one place queue behaviour is configured.
 */
export interface QueueDefinition<Payload = unknown> {
  name: string;
  payload: z.ZodType<Payload>;
  jobOptions: JobsOptions;
}

/** What every job carries: its payload, and the outbox row it came from, if any. */
export interface JobData {
  payload: unknown;
  outbox?: { tenantId: string; id: string };
}

/**
 * A job's `outbox` as the processor accepts it (src/jobs/worker.ts); the in-process queue asks
 * the same to tell an outbox row's job, run on a lease, from one kept in memory.
 */
export const outboxRefSchema = z.object({ tenantId: z.string().min(1), id: z.string().uuid() });

export const defineQueue = <Payload>(definition: QueueDefinition<Payload>) => definition;

const keepFinished = {
  removeOnComplete: { age: 24 * 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 5000 },
} satisfies JobsOptions;

/**
 * reconcile: re-enqueues outbox rows that Redis lost or never received. Repeatable; one run at a
 * time is enough, and a failed run is simply redone by the next tick.
 */
export const reconcileQueue = defineQueue({
  name: 'reconcile',
  payload: z.object({}).strict(),
  jobOptions: { attempts: 1, ...keepFinished },
});

/**
 * embed: "this tenant has facts without a current vector". The job reads them from Postgres and
 * embeds them in batches of the endpoint's batch size, for every model in use, until none is left
 * (see scheduleEmbedding for how requests for one tenant merge into one job).
 */
export const embedQueue = defineQueue({
  name: 'embed',
  // Not strict: jobs an earlier build queued also name their facts (`factIds`); the tenant's whole
  // need is read from Postgres all the same, so the list is dropped.
  payload: z.object({ tenantId: z.string().min(1).max(128) }),
  // The endpoint may be down for a while: back off up to ~10 minutes, then the reconciler takes over.
  jobOptions: { attempts: 10, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true, removeOnFail: { age: 24 * 3600 } },
});

/** reembed: backfills a new model over every tenant, then switches search to it (DESIGN §9). */
export const reembedQueue = defineQueue({
  name: 'reembed',
  payload: z.strictObject({ model: z.string().min(1).max(200) }),
  jobOptions: { attempts: 20, backoff: { type: 'exponential', delay: 2000 }, removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 } },
});

/**
 * report: one coverage report (DESIGN §6), requested (`reportId`, from the outbox) or a run of the
 * tenant's nightly schedule (`nightly`). A report is one read-only pass, so a failed one is
 * simply run again.
 */
export const reportQueue = defineQueue({
  name: 'report',
  payload: z.union([
    z.strictObject({ tenantId: z.string().min(1).max(128), reportId: z.uuid() }),
    z.strictObject({ tenantId: z.string().min(1).max(128), nightly: z.literal(true) }),
  ]),
  jobOptions: { attempts: 3, backoff: { type: 'exponential', delay: 5000 }, ...keepFinished },
});

/**
 * retention: the sweep that expires facts and purges deleted and expired content (DESIGN §4).
 * Repeatable, every tenant per run; a failed run is redone by the next tick.
 */
export const retentionQueue = defineQueue({
  name: 'retention',
  payload: z.object({}).strict(),
  jobOptions: { attempts: 1, ...keepFinished },
});

const tenant = z.string().min(1).max(128);

/**
 * erasure: one erasure (DESIGN §10), from its outbox row. The target's id is in the payload until
 * the erasure completes. Batches commit one by one, so a retried or resumed job goes on from
 * where the last one stopped. A finished job is removed from Redis at once, completed or failed:
 * its data holds the person's id, which must not outlive the erasure there either (the outbox
 * row keeps what a resume needs, and is scrubbed on completion).
 */
export const erasureQueue = defineQueue({
  name: 'erasure',
  payload: z.strictObject({
    tenantId: tenant,
    erasureId: z.uuid(),
    target: z.discriminatedUnion('kind', [
      z.strictObject({ kind: z.literal('fact'), id: z.uuid() }),
      z.strictObject({ kind: z.enum(['participant', 'external', 'conversation']), id: z.string().min(1).max(128) }),
    ]),
  }),
  jobOptions: { attempts: 5, backoff: { type: 'exponential', delay: 2000 }, removeOnComplete: true, removeOnFail: true },
});

/** The queues this build runs. The worker refuses to start unless each has a handler. */
export const queueDefinitions: readonly QueueDefinition[] = [reconcileQueue, embedQueue, reembedQueue, reportQueue, retentionQueue, erasureQueue];

/** A queued job, as producers see it: whether it failed for good, and putting it back if so. */
export interface QueuedJob {
  isFailed(): Promise<boolean>;
  retry(state?: 'failed'): Promise<void>;
}

/** How a job is added: under a fixed id (added once), or merged with others (`deduplication`). */
export interface AddOptions {
  jobId?: string;
  deduplication?: { id: string; keepLastIfActive?: boolean };
}

/** A repeating schedule: every `every` ms, or at the times of a cron `pattern` (in `tz`). */
export interface RepeatOptions {
  every?: number;
  pattern?: string;
  tz?: string;
}

/**
 * What the code asks of a queue, whichever transport runs it: BullMQ's `Queue` as it is (Redis),
 * or the in-process queue of src/jobs/in-process/queue.ts (no Redis). Only the members in use.
 */
export interface JobQueue<Data = JobData> {
  readonly name: string;
  add(name: string, data: Data, opts?: AddOptions): Promise<unknown>;
  getJob(jobId: string): Promise<QueuedJob | undefined>;
  upsertJobScheduler(id: string, repeat: RepeatOptions, template: { name?: string; data?: Data }): Promise<unknown>;
  getJobScheduler(id: string): Promise<unknown>;
  removeJobScheduler(id: string): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Adds a job under a deterministic id, so the same work is never queued twice. BullMQ ignores an
 * add whose id exists; if that job has failed for good, it is retried instead, so work handed in
 * again after an outage is not silently dropped.
 */
export async function enqueueUnique(queue: JobQueue, data: JobData, jobId: string): Promise<'added' | 'retried' | 'exists'> {
  const existing = await queue.getJob(jobId);
  if (existing) {
    if (!(await existing.isFailed())) return 'exists';
    await existing.retry('failed');
    return 'retried';
  }
  // Two callers racing past the check both add; BullMQ keeps one job for the id.
  await queue.add(queue.name, data, { jobId });
  return 'added';
}

/**
 * A repeatable queue (reconcile, retention): its schedule, and a pass now too, so whatever was
 * lost is found without waiting a period, and a due sweep runs at once.
 */
export async function scheduleRepeatable(queue: JobQueue, every: number): Promise<void> {
  await queue.upsertJobScheduler(queue.name, { every }, { name: queue.name, data: { payload: {} } });
  await queue.add(queue.name, { payload: {} });
}

/** Producer handles for enqueueing, by queue name, whichever transport runs the jobs. */
export type Queues = ReadonlyMap<string, JobQueue>;

/** BullMQ's queues (Redis), for what only they offer: counts, obliterate, events. */
export type BullQueues = ReadonlyMap<string, Queue<JobData>>;

export function createQueues(connection: Redis, definitions: readonly QueueDefinition[], prefix: string): BullQueues {
  return new Map(
    definitions.map((definition) => [
      definition.name,
      new Queue<JobData>(definition.name, { connection, prefix, defaultJobOptions: definition.jobOptions }),
    ]),
  );
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all([...queues.values()].map((queue) => queue.close()));
}
