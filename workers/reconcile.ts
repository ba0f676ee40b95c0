import type { Db } from '../src/db/client.ts';
import { withTenant } from '../src/db/client.ts';
import { eachTenant } from '../src/db/tenants.ts';
import { dispatchOutbox, pendingOutbox } from '../src/jobs/outbox.ts';
import type { Queues } from '../src/jobs/queues.ts';
import type { JobHandler } from '../src/jobs/worker.ts';

export interface ReconcileDeps {
  db: Db;
  queues: Queues;
  /** Rows younger than this were just dispatched by the request that wrote them; leave them. */
  graceMs?: number;
  /** Most rows re-enqueued per tenant per run, so one backlog cannot starve other tenants. */
  batchPerTenant?: number;
}

export interface ReconcileResult {
  tenants: number;
  enqueued: number;
  skipped: number;
}

/**
 * Visits every tenant under its own RLS setting and re-enqueues its outbox rows that are not
 * done. Safe to run any time: the BullMQ job id is the outbox id, so a job that is still queued
 * is not doubled.
 */
export function reconcileHandler({ db, queues, graceMs = 30_000, batchPerTenant = 1000 }: ReconcileDeps): JobHandler<object> {
  return async (_payload, { logger }) => {
    const result: ReconcileResult = { tenants: 0, enqueued: 0, skipped: 0 };
    const olderThan = new Date(Date.now() - graceMs);
    const tenantIds: string[] = [];
    for await (const tenantId of eachTenant(db)) tenantIds.push(tenantId);
    for (const tenantId of tenantIds) {
      const rows = await withTenant(db, tenantId, (tx) => pendingOutbox(tx, olderThan, batchPerTenant));
      const { enqueued, skipped } = await dispatchOutbox(queues, rows);
      result.tenants++;
      result.enqueued += enqueued;
      result.skipped += skipped;
    }
    if (result.enqueued > 0 || result.skipped > 0) logger.info('reconciled outbox', { ...result });
    return result;
  };
}
