/**
 * Coverage reports run in the background (DESIGN §6): requested through the API, run by the
 * `report` job, kept so coverage can be followed over time; and a tenant's nightly schedule.
 *
 * A request writes the report row and its outbox row in one transaction, so a report is never
 * lost between the API and Redis. The nightly schedule lives in Postgres; the BullMQ job scheduler
 * that fires it is derived from it (and restored by the reconciler when Redis loses it).
 */
import { createHash } from 'node:crypto';
import { and, desc, eq, inArray, lt, sql } from 'drizzle-orm';
import type { Principal } from '../auth/permissions.ts';
import { type Db, type Tx, withTenant } from '../db/client.ts';
import { coverageReports, coverageReportSchedules } from '../db/schema.ts';
import { registerTenant } from '../db/tenants.ts';
import { recordOutbox, type OutboxRow } from '../jobs/outbox.ts';
import { reportQueue } from '../jobs/queues.ts';
import { type Caller, inTenantTransaction } from '../core/caller.ts';
import { decodeCursor, pageOf } from '../core/cursor.ts';
import { AppError } from '../foundation/app-error.ts';
import { assertTenantAdmin } from '../core/errors.ts';
import { uuidv7 } from '../core/ids.ts';
import type { CoverageReport } from '../kiwifs/coverage.ts';
import { coverageReport, type ReportProgress } from './coverage-report.ts';
import {
  REPORT_HISTORY_DEFAULT,
  REPORT_LIST_DEFAULT,
  type ReportRequest,
  type ReportStatus,
  type ReportSummary,
  type Schedule,
  type ScheduleBody,
} from './schemas.ts';

const DEFAULT_HOUR_UTC = 3;
/** Progress is written at most this often: a report is not slowed by its own bookkeeping. */
const PROGRESS_EVERY_MS = 1000;

type ReportRow = typeof coverageReports.$inferSelect;

export class ReportNotFound extends AppError {
  constructor() {
    super('not-found', 'No such report, or not one of yours');
  }
}

/** The params a report runs with: the lists are cut to the default unless the request says otherwise. */
const withDefaults = (params: ReportRequest): ReportRequest => ({ ...params, limit: params.limit ?? REPORT_LIST_DEFAULT });

/** The columns of a report's summary: the history lists them without reading stored results. */
const summaryColumns = {
  id: coverageReports.id,
  status: coverageReports.status,
  scheduled: coverageReports.scheduled,
  requestedBy: sql<string>`${coverageReports.principal}->>'sub'`,
  createdAt: coverageReports.createdAt,
  finishedAt: coverageReports.finishedAt,
  episodicCount: sql<number | null>`(${coverageReports.result}->>'episodic_count')::int`,
  unmergedCount: coverageReports.unmergedCount,
};

interface SummaryRow extends Pick<ReportRow, 'id' | 'status' | 'scheduled' | 'createdAt' | 'finishedAt' | 'unmergedCount'> {
  requestedBy: string;
  episodicCount: number | null;
}

function toSummary(row: SummaryRow): ReportSummary {
  return { ...row, createdAt: row.createdAt.toISOString(), finishedAt: row.finishedAt?.toISOString() ?? null };
}

function toStatus(row: ReportRow): ReportStatus {
  const result = row.result as CoverageReport | null;
  return {
    ...toSummary({ ...row, requestedBy: (row.principal as Principal).sub, episodicCount: result?.episodic_count ?? null }),
    params: row.params as ReportRequest,
    progress: { done: row.progressDone, total: row.progressTotal },
    startedAt: row.startedAt?.toISOString() ?? null,
    result,
    error: row.errorCode && `The report could not be computed (${row.errorCode}); operators find the cause in the worker log under report ${row.id}`,
  };
}

/** Reports a principal may read: its own; an admin reads every report of the tenant. */
const readableBy = (principal: Principal) =>
  principal.role === 'admin' ? undefined : sql`${coverageReports.principal}->>'sub' = ${principal.sub} and not ${coverageReports.scheduled}`;

/**
 * Records a report to run as `caller.principal` (who sees what they could see when asking) and its
 * outbox row. The caller hands the row to BullMQ after commit; the reconciler does if it cannot.
 */
export async function requestReport(caller: Caller, params: ReportRequest): Promise<{ report: ReportStatus; outbox: OutboxRow }> {
  return inTenantTransaction(caller, async (tx) => {
    const row = await insertReport(tx, caller.principal, withDefaults(params), false, uuidv7());
    const outbox = await recordOutbox(tx, caller.principal.tenantId, reportQueue.name, { tenantId: caller.principal.tenantId, reportId: row.id });
    return { report: toStatus(row), outbox };
  });
}

async function insertReport(tx: Tx, principal: Principal, params: ReportRequest, scheduled: boolean, id: string): Promise<ReportRow> {
  await registerTenant(tx, principal.tenantId);
  const [row] = await tx
    .insert(coverageReports)
    .values({ tenantId: principal.tenantId, id, params, principal, scheduled })
    .onConflictDoNothing()
    .returning();
  return row ?? (await tx.select().from(coverageReports).where(and(eq(coverageReports.tenantId, principal.tenantId), eq(coverageReports.id, id))))[0]!;
}

export async function getReport(caller: Caller, id: string): Promise<ReportStatus> {
  return inTenantTransaction(caller, async (tx) => {
    const [row] = await tx
      .select()
      .from(coverageReports)
      .where(and(eq(coverageReports.tenantId, caller.principal.tenantId), eq(coverageReports.id, id), readableBy(caller.principal)));
    if (!row) throw new ReportNotFound();
    return toStatus(row);
  });
}

/** Past reports, newest first: how coverage moved over time. */
export async function listReports(caller: Caller, query: { limit?: number | undefined; cursor?: string | undefined }) {
  const limit = query.limit ?? REPORT_HISTORY_DEFAULT;
  const after = decodeCursor(query.cursor);
  return inTenantTransaction(caller, async (tx) => {
    const rows = await tx
      .select(summaryColumns)
      .from(coverageReports)
      .where(and(eq(coverageReports.tenantId, caller.principal.tenantId), readableBy(caller.principal), after ? lt(coverageReports.id, after) : undefined))
      .orderBy(desc(coverageReports.id))
      .limit(limit + 1);
    return pageOf(rows, limit, toSummary);
  });
}

/**
 * Runs one report and stores its result. Idempotent: a report already completed or failed is left
 * as it is (a redelivered job does nothing); one left `running` by a worker that died is run again.
 */
export async function runReport(db: Db, tenantId: string, reportId: string): Promise<'completed' | 'skipped'> {
  const claimed = await withTenant(db, tenantId, async (tx) => {
    const [row] = await tx
      .update(coverageReports)
      // statement_timestamp() in these updates, not clock_timestamp(): Citus refuses a volatile function in an UPDATE.
      .set({ status: 'running', startedAt: sql`statement_timestamp()`, progressDone: 0 })
      .where(and(eq(coverageReports.tenantId, tenantId), eq(coverageReports.id, reportId), inArray(coverageReports.status, ['pending', 'running'])))
      .returning();
    return row;
  });
  if (!claimed) return 'skipped';

  // Progress is written in its own transaction and never waited for inside the report's: with
  // one connection (the embedded database), a write waiting for the connection the report's
  // transaction holds would wait forever, and everything queued behind it too. The writes run in
  // order, after the report's transaction where they must, and before the final one.
  let lastWrite = 0;
  let written: Promise<unknown> = Promise.resolve();
  const progress = ({ done, total }: ReportProgress) => {
    if (Date.now() - lastWrite < PROGRESS_EVERY_MS && done < total) return;
    lastWrite = Date.now();
    written = written.then(() =>
      withTenant(db, tenantId, (tx) =>
        tx
          .update(coverageReports)
          .set({ progressDone: done, progressTotal: total })
          .where(and(eq(coverageReports.tenantId, tenantId), eq(coverageReports.id, reportId))),
      ),
    );
    // Awaited below; until then a failure must not count as unhandled.
    written.catch(() => {});
  };
  const params = claimed.params as ReportRequest;
  const result = await coverageReport(
    { db, principal: claimed.principal as Principal },
    { episodesPrefix: params.episodesPrefix, limit: params.limit, offset: params.offset, scope: params.scope },
    progress,
  );
  await written;
  await withTenant(db, tenantId, (tx) =>
    tx
      .update(coverageReports)
      .set({
        status: 'completed',
        result,
        unmergedCount: result.unmerged_count,
        progressDone: result.episodic_count,
        progressTotal: result.episodic_count,
        finishedAt: sql`statement_timestamp()`,
      })
      .where(and(eq(coverageReports.tenantId, tenantId), eq(coverageReports.id, reportId))),
  );
  return 'completed';
}

/** Marks a report failed for good; the cause stays in the worker's log, not in the tenant's answer. */
export async function failReport(db: Db, tenantId: string, reportId: string): Promise<void> {
  await withTenant(db, tenantId, (tx) =>
    tx
      .update(coverageReports)
      .set({ status: 'failed', errorCode: 'internal', finishedAt: sql`statement_timestamp()` })
      .where(and(eq(coverageReports.tenantId, tenantId), eq(coverageReports.id, reportId), inArray(coverageReports.status, ['pending', 'running']))),
  );
}

// ---------------------------------------------------------------------------------------------
// The nightly schedule

const cronAt = (hourUtc: number) => `0 ${hourUtc} * * *`;

function toSchedule(row: typeof coverageReportSchedules.$inferSelect): Schedule {
  return {
    hourUtc: Number(row.cron.split(' ')[1]),
    cron: row.cron,
    params: row.params as ReportRequest,
    scheduledBy: (row.principal as Principal).sub,
    updatedAt: row.updatedAt.toISOString(),
  };
}

const ADMINS_ONLY = 'Nightly reports are scheduled by tenant admins';

export async function putSchedule(caller: Caller, body: ScheduleBody): Promise<Schedule> {
  assertTenantAdmin(caller.principal, ADMINS_ONLY);
  const { hourUtc = DEFAULT_HOUR_UTC, ...params } = body;
  const values = { cron: cronAt(hourUtc), params: withDefaults(params), principal: caller.principal, updatedAt: sql`statement_timestamp()` };
  return inTenantTransaction(caller, async (tx) => {
    await registerTenant(tx, caller.principal.tenantId);
    const [row] = await tx
      .insert(coverageReportSchedules)
      .values({ tenantId: caller.principal.tenantId, ...values })
      .onConflictDoUpdate({
        target: coverageReportSchedules.tenantId,
        // excluded.*: Citus accepts no function but immutable ones in DO UPDATE SET.
        set: {
          cron: sql`excluded.cron`,
          params: sql`excluded.params`,
          principal: sql`excluded.principal`,
          updatedAt: sql`excluded.updated_at`,
        },
      })
      .returning();
    return toSchedule(row!);
  });
}

export async function getSchedule(caller: Caller): Promise<Schedule> {
  assertTenantAdmin(caller.principal, ADMINS_ONLY);
  const row = await inTenantTransaction(caller, (tx) => findSchedule(tx, caller.principal.tenantId));
  if (!row) throw new AppError('not-found', 'This tenant has no nightly report; PUT one to schedule it');
  return toSchedule(row);
}

export async function deleteSchedule(caller: Caller): Promise<void> {
  assertTenantAdmin(caller.principal, ADMINS_ONLY);
  const deleted = await inTenantTransaction(caller, (tx) =>
    tx
      .delete(coverageReportSchedules)
      .where(eq(coverageReportSchedules.tenantId, caller.principal.tenantId))
      .returning({ tenantId: coverageReportSchedules.tenantId }),
  );
  if (deleted.length === 0) throw new AppError('not-found', 'This tenant has no nightly report');
}

/** The tenant's schedule row (`tx` must act for the same tenant: row-level security backs the filter). */
export async function findSchedule(tx: Tx, tenantId: string) {
  const [row] = await tx.select().from(coverageReportSchedules).where(eq(coverageReportSchedules.tenantId, tenantId));
  return row;
}

/**
 * The report row of one nightly run, its id derived from the run (its job id and time), so a
 * retried run is the same report. Undefined when the schedule was removed meanwhile.
 */
export async function nightlyReportId(db: Db, tenantId: string, run: { key: string; at: number }): Promise<string | undefined> {
  return withTenant(db, tenantId, async (tx) => {
    const schedule = await findSchedule(tx, tenantId);
    if (!schedule) return undefined;
    const row = await insertReport(tx, schedule.principal as Principal, schedule.params as ReportRequest, true, runReportId(run.key, run.at));
    return row.id;
  });
}

/** The report id of a nightly run: time-ordered like every report id, and the same for the same run. */
const runReportId = (runKey: string, at: number) => uuidv7(at, createHash('sha256').update(runKey).digest());
