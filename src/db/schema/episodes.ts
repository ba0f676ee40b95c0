import { check, index, jsonb, pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
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
    result: jsonb('result'),
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
