import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Db } from '../db/client.ts';
import { coverageReport, type ReportParams } from '../episodes/coverage-report.ts';
import { deleteSchedule, getReport, getSchedule, listReports, putSchedule, requestReport } from '../episodes/stored-reports.ts';
import {
  CoverageReportSchema,
  KiwiReportQuerySchema,
  REPORT_LIST_DEFAULT,
  ReportHistoryQuerySchema,
  ReportHistorySchema,
  ReportIdParamSchema,
  ReportQuerySchema,
  ReportRequestSchema,
  ReportStatusSchema,
  ScheduleBodySchema,
  ScheduleSchema,
} from '../episodes/schemas.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { ScopeFilter } from '../memory/facts/conditions.ts';
import { principalOf } from './auth.ts';
import type { AppEnv } from './app-env.ts';
import { primaryReads, readFrom, type ReadRouting } from './read-routing.ts';
import { queueIdempotently } from './idempotency.ts';
import { bearerAuth, because, errorResponses, idempotencyKeyHeader, json } from './openapi.ts';
import { validationHook } from './validation.ts';

const tags = ['episodes'];
const security = bearerAuth;
const noSchedule = 'not-found: this tenant has no nightly report';

const reportRoute = createRoute({
  method: 'get',
  path: '/v1/memory/report',
  operationId: 'getMemoryReport',
  tags,
  security,
  summary: 'Which episodes no consolidated fact has merged yet (KiwiFS report shape)',
  description: `Counts are always complete; \`limit\` (default ${REPORT_LIST_DEFAULT}) and \`offset\` cut the two lists.`,
  request: { query: ReportQuerySchema },
  responses: { 200: json(CoverageReportSchema, 'The coverage report over the facts you can see'), ...errorResponses() },
});

const kiwiReportRoute = createRoute({
  method: 'get',
  path: '/api/kiwi/memory/report',
  operationId: 'getKiwiMemoryReport',
  tags,
  security,
  summary: 'The same report at KiwiFS’s path, with KiwiFS’s parameter names',
  request: { query: KiwiReportQuerySchema },
  responses: { 200: json(CoverageReportSchema, 'The coverage report over the facts you can see'), ...errorResponses() },
});

const requestReportRoute = createRoute({
  method: 'post',
  path: '/v1/memory/reports',
  operationId: 'startReport',
  tags,
  security,
  summary: 'Run the coverage report in the background (large tenants); kept for the history',
  request: { headers: idempotencyKeyHeader, body: { ...json(ReportRequestSchema, 'What to report on'), required: false } },
  responses: {
    202: json(ReportStatusSchema.pick({ id: true, status: true }), 'Queued'),
    ...errorResponses({ 409: because.idempotencyInFlight, 413: because.bodyOver1MiB, 422: because.idempotencyKeyReused }),
  },
});

const getReportRoute = createRoute({
  method: 'get',
  path: '/v1/memory/reports/{id}',
  operationId: 'getReport',
  tags,
  security,
  summary: 'A background report: status, progress and, once completed, its result',
  request: { params: ReportIdParamSchema },
  responses: { 200: json(ReportStatusSchema, 'The report'), ...errorResponses({ 404: 'not-found: no such report, or not one of yours' }) },
});

const listReportsRoute = createRoute({
  method: 'get',
  path: '/v1/memory/reports',
  operationId: 'listReports',
  tags,
  security,
  summary: 'Past reports, newest first, with their unmerged counts: coverage over time',
  request: { query: ReportHistoryQuerySchema },
  responses: { 200: json(ReportHistorySchema, 'A page of reports'), ...errorResponses() },
});

const schedulePath = '/v1/memory/reports/schedule';

const getScheduleRoute = createRoute({
  method: 'get',
  path: schedulePath,
  operationId: 'getReportSchedule',
  tags,
  security,
  summary: "The tenant's nightly report (admin)",
  responses: { 200: json(ScheduleSchema, 'The schedule'), ...errorResponses({ 403: because.tenantAdminsOnly, 404: noSchedule }) },
});

const putScheduleRoute = createRoute({
  method: 'put',
  path: schedulePath,
  operationId: 'putReportSchedule',
  tags,
  security,
  summary: 'Schedule the nightly report, or change it (admin)',
  request: { body: { ...json(ScheduleBodySchema, 'When and what'), required: false } },
  responses: { 200: json(ScheduleSchema, 'The schedule'), ...errorResponses({ 403: because.tenantAdminsOnly, 413: because.bodyOver1MiB }) },
});

const deleteScheduleRoute = createRoute({
  method: 'delete',
  path: schedulePath,
  operationId: 'deleteReportSchedule',
  tags,
  security,
  summary: 'Stop the nightly report (admin)',
  responses: { 204: { description: 'Removed' }, ...errorResponses({ 403: because.tenantAdminsOnly, 404: noSchedule }) },
});

export interface EpisodeRouteDeps {
  db: Db;
  /** Hands reports and nightly schedulers to the queues after the commit (without queues, the reconciler does). */
  dispatch: Dispatcher;
  /** Where the coverage report reads (a replica, with read-your-writes); default the primary. */
  reads?: ReadRouting | undefined;
}

/** The scope keys a report query gave, or none (every fact the caller can read takes part). */
const scopeOf = (keys: ScopeFilter): ScopeFilter | undefined => {
  const scope = Object.fromEntries(Object.entries(keys).filter(([, value]) => value !== undefined));
  return Object.keys(scope).length > 0 ? scope : undefined;
};

export function episodeRoutes({ db, dispatch, reads = primaryReads(db) }: EpisodeRouteDeps) {
  const callerOf = (c: Context<AppEnv>) => ({ db, principal: principalOf(c) });
  // `limit` is always a key of the parsed query, undefined when not given: a default spread under
  // it would be overwritten, and the lists would come back whole. The report reads where this
  // caller's reads go (http/read-routing.ts); stored reports and schedules stay on the primary.
  const report = (c: Context<AppEnv>, params: ReportParams) =>
    readFrom(c, reads, (readDb) => coverageReport({ db: readDb, principal: principalOf(c) }, { ...params, limit: params.limit ?? REPORT_LIST_DEFAULT }));

  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook })
    .openapi(reportRoute, async (c) => {
      const { episodesPrefix, limit, offset, ...scope } = c.req.valid('query');
      return c.json(await report(c, { episodesPrefix, limit, offset, scope: scopeOf(scope) }), 200);
    })
    .openapi(kiwiReportRoute, async (c) => {
      const { episodes_prefix: episodesPrefix, limit, offset, ...scope } = c.req.valid('query');
      return c.json(await report(c, { episodesPrefix, limit, offset, scope: scopeOf(scope) }), 200);
    })
    .openapi(requestReportRoute, async (c) => {
      const body = c.req.valid('json') ?? {};
      return queueIdempotently(c, { db, dispatch, what: 'queue the report' }, principalOf(c), body, async (tx) => {
        const { report, outbox } = await requestReport({ ...callerOf(c), tx }, body);
        return { job: report, outbox };
      });
    })
    .openapi(getScheduleRoute, async (c) => c.json(await getSchedule(callerOf(c)), 200))
    .openapi(putScheduleRoute, async (c) => {
      const schedule = await putSchedule(callerOf(c), c.req.valid('json') ?? {});
      await dispatch.nightlyScheduler(principalOf(c).tenantId, schedule);
      return c.json(schedule, 200);
    })
    .openapi(deleteScheduleRoute, async (c) => {
      await deleteSchedule(callerOf(c));
      // If Redis misses this, the orphaned scheduler's next run finds no schedule and does nothing.
      await dispatch.nightlyScheduler(principalOf(c).tenantId, undefined);
      return c.body(null, 204);
    })
    .openapi(getReportRoute, async (c) => c.json(await getReport(callerOf(c), c.req.valid('param').id), 200))
    .openapi(listReportsRoute, async (c) => c.json(await listReports(callerOf(c), c.req.valid('query')), 200));
}
