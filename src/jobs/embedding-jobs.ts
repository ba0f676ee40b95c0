import { createHash } from 'node:crypto';
import { embedQueue, enqueueUnique, type Queues, reembedQueue } from './queues.ts';

/**
 * The deduplication id of a tenant's embed job. At most two jobs per tenant exist: one running
 * and one waiting. A request while none waits adds one; while the tenant's job runs, BullMQ keeps
 * the request and adds its job when the running one finishes (`keepLastIfActive`), so a fact
 * committed after the running job's last read is picked up at once, not by the reconciler.
 */
export const embedDeduplicationId = (tenantId: string) => `embed-${createHash('sha1').update(tenantId).digest('hex')}`;

export const reembedJobId = (model: string) => `reembed-${createHash('sha1').update(model).digest('hex')}`;

/**
 * Asks for the tenant's missing vectors: whatever its facts need, however many were written (one
 * fact, a batch of a thousand, a backlog the reconciler found), becomes one job that reads them
 * from Postgres in batches. Call it after the writes commit.
 */
export async function scheduleEmbedding(queues: Queues, tenantId: string): Promise<void> {
  await queues
    .get(embedQueue.name)!
    .add(embedQueue.name, { payload: { tenantId } }, { deduplication: { id: embedDeduplicationId(tenantId), keepLastIfActive: true } });
}

export function scheduleBackfill(queues: Queues, model: string) {
  return enqueueUnique(queues.get(reembedQueue.name)!, { payload: { model } }, reembedJobId(model));
}
