import { boolean, check, index, integer, jsonb, pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
import { oneOf, tenantId, timestamptz } from '../columns.ts';
import { jobStatuses } from './lifecycle.ts';

/**
 * Coverage reports run as jobs (DESIGN §6). They are kept so coverage can be followed over
 * time. `principal` is the requester's grants at request time: a report shows only what its
 * requester could see.
 */
export const coverageReports = pgTable(
  'coverage_reports',
  {
    tenantId: tenantId(),
    id: uuid('id').notNull().defaultRandom(),
    status: text('status', { enum: jobStatuses }).notNull().default('pending'),
    params: jsonb('params').notNull(),
    principal: jsonb('principal').notNull(),
    /** Episodes examined so far, of `progressTotal`, while the job runs. */
    progressDone: integer('progress_done').notNull().default(0),
    progressTotal: integer('progress_total'),
    /** Copied from the result, so the history lists coverage over time without reading results. */
    unmergedCount: integer('unmerged_count'),
    result: jsonb('result'),
    /** Set for a run of the tenant's nightly schedule, rather than a request. */
    scheduled: boolean('scheduled').notNull().default(false),
    errorCode: text('error_code'),
    createdAt: timestamptz('created_at').notNull().defaultNow(),
    startedAt: timestamptz('started_at'),
    finishedAt: timestamptz('finished_at'),
  },
  (t) => [
    primaryKey({ name: 'coverage_reports_pkey', columns: [t.tenantId, t.id] }),
    check('coverage_reports_status_known', oneOf(t.status, jobStatuses)),
    index('coverage_reports_created_idx').on(t.tenantId, t.createdAt),
  ],
);

/**
 * A tenant's nightly coverage report (at most one per tenant). Postgres holds the schedule; the
 * BullMQ job scheduler that fires it is derived from this row and restored by the reconciler if
 * Redis loses it.
 */
export const coverageReportSchedules = pgTable('coverage_report_schedules', {
  tenantId: tenantId().primaryKey(),
  /** Cron pattern, UTC. */
  cron: text('cron').notNull(),
  params: jsonb('params').notNull(),
  /** The admin who scheduled it: the runs see what they could see. */
  principal: jsonb('principal').notNull(),
  updatedAt: timestamptz('updated_at').notNull().defaultNow(),
});
