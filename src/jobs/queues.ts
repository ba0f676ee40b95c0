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
 * The queues this build runs. The worker refuses to start unless each has a handler.
 * embed, reembed, report, retention and erasure (DESIGN §9) join as their features land.
 */
export const queueDefinitions: readonly QueueDefinition[] = [reconcileQueue];

/** Producer handles for enqueueing, by queue name. */
export type Queues = ReadonlyMap<string, Queue<JobData>>;

export function createQueues(connection: Redis, definitions: readonly QueueDefinition[], prefix: string): Queues {
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
