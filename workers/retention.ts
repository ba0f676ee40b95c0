import type { Db } from '../src/db/client.ts';
import { forEachTenant } from '../src/db/tenants.ts';
import type { JobHandler } from '../src/jobs/worker.ts';
import { type SweepResult, sweepTenant } from '../src/lifecycle/retention.ts';

/** Runs the retention sweep over every tenant, under each tenant's own row-level security. */
export function retentionHandler({ db, purgeGraceMs }: { db: Db; purgeGraceMs: number }): JobHandler<object> {
  return async (_payload, { logger }) => {
    const total: SweepResult & { tenants: number } = { tenants: 0, expired: 0, purged: 0, idempotencyRecords: 0 };
    await forEachTenant(db, async (tenantId) => {
      const { expired, purged, idempotencyRecords } = await sweepTenant(db, tenantId, { purgeGraceMs });
      total.tenants++;
      total.expired += expired;
      total.purged += purged;
      total.idempotencyRecords += idempotencyRecords;
    });
    if (total.expired > 0 || total.purged > 0 || total.idempotencyRecords > 0) logger.info('retention swept', { ...total });
    return total;
  };
}
