import { z } from 'zod';
import type { CoverageReport } from '../kiwifs/coverage.ts';
import { coverageReport } from '../episodes/coverage-report.ts';
import { CoverageReportSchema, REPORT_LIST_DEFAULT, REPORT_LIST_MAX } from '../episodes/schemas.ts';
import { textSchema } from '../foundation/storable.ts';
import { defineTool, type Tool } from './tool.ts';

/** `kiwi_memory_report` (DESIGN §6): the episodic coverage report, as KiwiFS's MCP tool of that name. */
export const kiwiMemoryReport: Tool = defineTool(
  'kiwi_memory_report',
  {
    title: 'Episodic memory coverage report',
    description:
      'Reports which episodes (raw records of runs, sessions, conversations) no durable fact has ' +
      'consolidated yet: a fact covers an episode when its mergedFrom names the episode by id or path. ' +
      'Counts and lists only the facts you may read.',
    inputSchema: z.object({
      // Text PostgreSQL can store (no NUL), as on /v1/memory/report.
      episodes_prefix: textSchema()
        .max(1024)
        .optional()
        .describe(
          'Path prefix that marks a fact as an episode (default "episodes/"; a trailing "/" is added). ' +
            'Facts with memoryKind "episodic" are episodes wherever they are; "semantic" and "consolidation" never are.',
        ),
      limit: z
        .number()
        .int()
        .min(0)
        .max(REPORT_LIST_MAX)
        .optional()
        .describe(`List at most this many entries in episodic_files and unmerged (default ${REPORT_LIST_DEFAULT}; 0 lists none). The counts are never cut.`),
      offset: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe('Skip this many entries of episodic_files and unmerged before listing, to page through them.'),
    }),
    outputSchema: CoverageReportSchema,
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  },
  async (context, args) => {
    const report = await context.read((db) =>
      coverageReport({ db, principal: context.principal }, { episodesPrefix: args.episodes_prefix, limit: args.limit ?? REPORT_LIST_DEFAULT, offset: args.offset }),
    );
    const structuredContent: z.infer<typeof CoverageReportSchema> = { ...report };
    return {
      structuredContent,
      content: [
        // KiwiFS's own tool answers with this summary, and its clients look for its lines.
        { type: 'text', text: summary(report, args.limit !== undefined || args.offset !== undefined, args.offset ?? 0) },
        // The same report as JSON, for clients that do not read structuredContent (MCP spec).
        { type: 'text', text: JSON.stringify(report) },
      ],
    };
  },
);

/** The text KiwiFS's `kiwi_memory_report` returns (internal/mcpserver, with the fork's paging line). */
function summary(report: CoverageReport, paged: boolean, offset: number): string {
  const lines = [
    `Episodic files:           ${report.episodic_count}`,
    `merged-from references:   ${report.merged_from_refs}`,
    `Unmerged (no merged-from): ${report.unmerged_count}`,
  ];
  if (paged) lines.push(`Showing unmerged:          ${report.unmerged.length} (offset ${offset})`);
  for (const episode of report.unmerged) {
    lines.push(`  - ${episode.path}${episode.episode_id ? `  episode_id=${episode.episode_id}` : ''}`);
  }
  for (const warning of report.warnings ?? []) lines.push(`warning: ${warning}`);
  if (report.unmerged_count === 0) lines.push('All episodic files are referenced by at least one merged-from list.');
  return `${lines.join('\n')}\n`;
}
