import type { Db } from '../src/db/client.ts';
import { failReport, nightlyReportId, runReport } from '../src/episodes/stored-reports.ts';
import { isFinalAttempt, type JobHandler } from '../src/jobs/worker.ts';

type ReportPayload = { tenantId: string; reportId: string } | { tenantId: string; nightly: true };

/**
 * Runs a coverage report: one that was requested, or a run of the tenant's nightly schedule. On
 * the last failed attempt the report is marked failed, so its status never stays "running".
 */
export function reportHandler({ db }: { db: Db }): JobHandler<ReportPayload> {
  return async (payload, { job, logger }) => {
    const reportId =
      'reportId' in payload ? payload.reportId : await nightlyReportId(db, payload.tenantId, { key: job.id ?? job.name, at: job.timestamp });
    if (!reportId) return 'unscheduled';
    try {
      return await runReport(db, payload.tenantId, reportId);
    } catch (error) {
      if (isFinalAttempt(job, error)) {
        logger.error('report failed for good', { tenantId: payload.tenantId, reportId, error });
        await failReport(db, payload.tenantId, reportId).catch((e: unknown) => logger.warn('could not mark the report failed', { error: String(e) }));
      }
      throw error;
    }
  };
}
