import { createHash } from 'node:crypto';
import { embedQueue, enqueueUnique, type Queues, reembedQueue } from './queues.ts';

/** The id of an embed job for these facts at these versions: the same work is queued once. */
export const embedJobId = (tenantId: string, facts: readonly { id: string; version: number }[]) =>
  `embed-${createHash('sha1')
    .update(tenantId)
    .update('\n')
    .update(facts.map((f) => `${f.id}@${f.version}`).join(','))
    .digest('hex')}`;

export const reembedJobId = (model: string) => `reembed-${createHash('sha1').update(model).digest('hex')}`;

/** Queues vectors for these facts of one tenant; `'exists'` when the same work is already queued. */
export function scheduleEmbedding(queues: Queues, tenantId: string, facts: readonly { id: string; version: number }[]) {
  return enqueueUnique(queues.get(embedQueue.name)!, { payload: { tenantId, factIds: facts.map((f) => f.id) } }, embedJobId(tenantId, facts));
}

export function scheduleBackfill(queues: Queues, model: string) {
  return enqueueUnique(queues.get(reembedQueue.name)!, { payload: { model } }, reembedJobId(model));
}
