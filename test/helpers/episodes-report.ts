/**
 * A coverage report over many episodes, written straight into the database (the API would take
 * minutes to write 100,000): `npm test` runs it over 10,000 episodes,
 * `npm run test:slow` over 100,000.
 */
import { expect } from 'vitest';
import { connect } from '../../src/db/client.ts';
import type { CoverageReport } from '../../src/kiwifs/coverage.ts';
import { coverageReport } from '../../src/episodes/coverage-report.ts';
import type { TestDatabase } from './database.ts';
import { uniqueTenant } from './factories.ts';
import { seedConsolidations, seedEpisodes } from '../../support/seed.ts';

/**
 * Writes `episodes` episodes (a multiple of 1,000) and one consolidation per 1,000 merging its
 * first 500, then checks the report over them: lists cut to the page (in order, read from the
 * report's index without sorting every episode), counts complete, and nothing written to temporary files on the way.
 */
export async function checkStreamedReport(db: TestDatabase, episodes: number): Promise<void> {
  const tenantId = uniqueTenant('large');
  await db.admin.begin(async (sql) => {
    await sql`select set_config('app.tenant_id', ${tenantId}, true)`;
    await sql`insert into tenants (id) values (${tenantId}) on conflict do nothing`;
    await seedEpisodes(sql, { tenantId, last: episodes, pathDigits: 6, assertedBy: 'bench' });
    // A consolidation per 1,000 episodes merging 500 of them: half the episodes covered.
    await seedConsolidations(sql, { tenantId, episodes, assertedBy: 'bench' });
  });
  await db.admin`analyze facts`;
  const principal = { tenantId, sub: 'admin-1', role: 'admin' as const, projects: { read: [], write: [] }, orgs: { read: [], write: [] } };
  // Nothing may spill to disk (a sort or hash too big for its memory): on connections opened
  // with temp_file_limit 0, writing a temporary file fails the report.
  await db.admin.unsafe(`alter database "${db.name}" set temp_file_limit = 0`);
  const noSpill = connect(db.appUrl, { max: 1, applicationName: 'mnemo-test-no-spill' });
  const started = performance.now();
  const progress: number[] = [];
  let result: CoverageReport;
  try {
    result = await coverageReport({ db: noSpill.db, principal }, { limit: 1000 }, ({ done }) => void progress.push(done));
  } finally {
    await noSpill.close();
    await db.admin.unsafe(`alter database "${db.name}" reset temp_file_limit`);
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`coverage report over ${episodes.toLocaleString('en')} episodes: ${seconds.toFixed(2)} s`);
  expect(result.episodic_count).toBe(episodes);
  expect(result.merged_from_refs).toBe(episodes / 2);
  expect(result.unmerged_count).toBe(episodes / 2);
  expect(result.episodic_files).toHaveLength(1000);
  expect(result.unmerged).toHaveLength(1000);
  expect(result.unmerged[0]!.path).toBe('episodes/000501.md');
  expect(result.episodic_files.map((file) => file.path)).toEqual(
    Array.from({ length: 1000 }, (_, i) => `episodes/${String(i + 1).padStart(6, '0')}.md`),
  );
  expect(result.unmerged.at(-1)!.path).toBe('episodes/002000.md');
  expect(progress.at(-1)).toBe(episodes);
  // The pages come out of facts_report_order_idx in order: no sort over the tenant's episodes.
  const plan = await db.admin.begin(async (sql) => {
    await sql`select set_config('app.tenant_id', ${tenantId}, true)`;
    return sql.unsafe(
      `explain select id from facts where tenant_id = $1 and memory_kind = 'episodic' order by coalesce(path, '') collate "C", id limit 1000`,
      [tenantId],
    );
  });
  const planText = plan.map((row) => String(row['QUERY PLAN'])).join('\n');
  expect(planText).toContain('facts_report_order_idx');
  expect(planText).not.toMatch(/Sort/);
}
