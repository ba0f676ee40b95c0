/**
 * The wire shapes of the coverage report (DESIGN §6): the report itself in KiwiFS's shape
 * (snake_case, as KiwiFS serves it), its query parameters on both routes, and the background
 * reports and their nightly schedule.
 */
import { z } from '@hono/zod-openapi';
import { ScopeInputSchema, scopeKeys } from '../memory/schemas.ts';
import { textSchema } from '../foundation/storable.ts';

/** Lists longer than this need `limit`; counts are always complete. */
export const REPORT_LIST_DEFAULT = 1000;
export const REPORT_LIST_MAX = 10_000;
export const REPORT_HISTORY_DEFAULT = 25;
export const REPORT_HISTORY_MAX = 100;

const nonNegativeInt = (name: string, max: number) =>
  z
    .string()
    .regex(/^[0-9]{1,9}$/, `${name} must be a whole number, 0 or more`)
    .transform(Number)
    .pipe(z.number().max(max, `${name} must be at most ${max}`));

const prefix = textSchema().max(1024, 'must be at most 1024 characters');

/** `GET /v1/memory/report`. */
export const ReportQuerySchema = z.strictObject({
  episodesPrefix: prefix.optional().openapi({ description: 'Paths under it are episodes unless memoryKind says otherwise; default episodes/' }),
  limit: nonNegativeInt('limit', REPORT_LIST_MAX).optional().openapi({ description: `Entries per list, default ${REPORT_LIST_DEFAULT}` }),
  offset: nonNegativeInt('offset', 1_000_000_000).optional(),
  ...scopeKeys,
});

/** `GET /api/kiwi/memory/report`: KiwiFS's parameter names. */
export const KiwiReportQuerySchema = z.strictObject({
  episodes_prefix: prefix.optional(),
  limit: nonNegativeInt('limit', REPORT_LIST_MAX).optional(),
  offset: nonNegativeInt('offset', 1_000_000_000).optional(),
  ...scopeKeys,
});

const EpisodicFileSchema = z
  .object({
    path: z.string(),
    episode_id: z.string().optional(),
    memory_kind: z.string().optional(),
    fact_id: z.string().optional(),
  })
  .openapi('EpisodicFile');

export const CoverageReportSchema = z
  .object({
    episodic_count: z.number().int(),
    merged_from_refs: z.number().int(),
    unmerged_count: z.number().int(),
    episodic_files: z.array(EpisodicFileSchema),
    unmerged: z.array(EpisodicFileSchema),
    warnings: z.array(z.string()).optional(),
  })
  .openapi('CoverageReport');

/** What a background report runs with; stored with it. */
export const ReportRequestSchema = z
  .strictObject({
    episodesPrefix: prefix.optional(),
    limit: z.number().int().min(0).max(REPORT_LIST_MAX).optional(),
    offset: z.number().int().min(0).optional(),
    scope: ScopeInputSchema.omit({ tenantId: true }).optional(),
  })
  .openapi('ReportRequest');

export const reportStatuses = ['pending', 'running', 'completed', 'failed'] as const;

export const ReportSummarySchema = z
  .object({
    id: z.uuid(),
    status: z.enum(reportStatuses),
    scheduled: z.boolean(),
    requestedBy: z.string(),
    createdAt: z.string(),
    finishedAt: z.string().nullable(),
    episodicCount: z.number().int().nullable(),
    unmergedCount: z.number().int().nullable(),
  })
  .openapi('ReportSummary');

export const ReportStatusSchema = ReportSummarySchema.extend({
  params: ReportRequestSchema,
  progress: z.object({ done: z.number().int(), total: z.number().int().nullable() }),
  startedAt: z.string().nullable(),
  result: CoverageReportSchema.nullable(),
  error: z.string().nullable(),
}).openapi('ReportStatus');

export const ReportHistoryQuerySchema = z.strictObject({
  limit: nonNegativeInt('limit', REPORT_HISTORY_MAX)
    .pipe(z.number().min(1, 'limit must be at least 1'))
    .optional(),
  cursor: textSchema().max(512).optional(),
});

export const ReportHistorySchema = z
  .object({ data: z.array(ReportSummarySchema), hasMore: z.boolean(), nextCursor: z.string().nullable() })
  .openapi('ReportHistory');

export const ScheduleBodySchema = z
  .strictObject({
    hourUtc: z.number().int().min(0).max(23).optional().openapi({ description: 'Hour of the day (UTC) the report runs; default 3' }),
    episodesPrefix: prefix.optional(),
    limit: z.number().int().min(0).max(REPORT_LIST_MAX).optional(),
    scope: ScopeInputSchema.omit({ tenantId: true }).optional(),
  })
  .openapi('ReportScheduleBody');

export const ScheduleSchema = z
  .object({
    hourUtc: z.number().int(),
    cron: z.string(),
    params: ReportRequestSchema,
    scheduledBy: z.string(),
    updatedAt: z.string(),
  })
  .openapi('ReportSchedule');

export const ReportIdParamSchema = z.object({
  id: z.uuid({ message: 'must be a report id (a UUID)' }).openapi({ param: { name: 'id', in: 'path' } }),
});

export type ReportRequest = z.infer<typeof ReportRequestSchema>;
export type ReportStatus = z.infer<typeof ReportStatusSchema>;
export type ReportSummary = z.infer<typeof ReportSummarySchema>;
export type ScheduleBody = z.infer<typeof ScheduleBodySchema>;
export type Schedule = z.infer<typeof ScheduleSchema>;
