import { createHash } from 'node:crypto';
import { type Queues, reportQueue } from './queues.ts';

/** The BullMQ job scheduler of a tenant's nightly report (hashed: tenant ids may hold any character). */
export const nightlySchedulerId = (tenantId: string) => `report-nightly-${createHash('sha1').update(tenantId).digest('hex')}`;

/** What the scheduler needs of a report schedule (episodes/schemas.ts `Schedule`): its cron pattern. */
type NightlyCron = { cron: string };

/**
 * Makes Redis's job scheduler of a tenant's nightly report match its schedule in Postgres (none
 * when `schedule` is undefined). Upserting an unchanged scheduler changes nothing.
 */
export async function syncNightlyScheduler(queues: Queues, tenantId: string, schedule: NightlyCron | undefined): Promise<void> {
  const queue = queues.get(reportQueue.name)!;
  const id = nightlySchedulerId(tenantId);
  if (!schedule) {
    await queue.removeJobScheduler(id);
    return;
  }
  await queue.upsertJobScheduler(id, { pattern: schedule.cron, tz: 'UTC' }, { name: reportQueue.name, data: { payload: { tenantId, nightly: true } } });
}

/** Restores a tenant's nightly scheduler if Redis lost it; true when it had to. */
export async function restoreNightlyScheduler(queues: Queues, tenantId: string, schedule: NightlyCron): Promise<boolean> {
  if (await queues.get(reportQueue.name)!.getJobScheduler(nightlySchedulerId(tenantId))) return false;
  await syncNightlyScheduler(queues, tenantId, schedule);
  return true;
}
