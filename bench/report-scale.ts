/**
 * The coverage report at scale (issue 12, part 7): one tenant with `episodes` episodes and one
 * consolidation per 1,000 of them merging 500 (half the episodes covered, one coverage key per
 * two episodes), written straight into a scratch database and analysed. The report runs through
 * coverageReport() — what GET /v1/memory/report and the report job run — as an admin of the
 * tenant under row-level security, with the default page of 1,000 entries per list.
 *
 * Per run: the time, the growth of this process's resident memory while the report ran (sampled
 * every 20 ms; the API runs the same code, and only the two pages reach it, so it should stay
 * flat), and the bytes PostgreSQL wrote to temporary files meanwhile (pg_stat_database: a sort
 * or hash that spilled to disk). `raw` is the baseline in the same run: counting the tenant's
 * episodes with a plain scan, the least any report must read.
 *
 * Usage: `reportScaleBench({ episodes: 1_000_000, log })` with DATABASE_ADMIN_URL or DATABASE_URL
 * naming a role that may create databases and roles. Standalone:
 * `node --import tsx bench/report-scale.ts [episodes]`.
 */
import { coverageReport } from '../src/episodes/coverage-report.ts';
import type { Principal } from '../src/auth/permissions.ts';
import { connect, type Database, withTenant } from '../src/db/client.ts';
import { sql } from 'drizzle-orm';
import { percentile } from './ir.ts';
import type { ConnectedDatabase } from '../support/database.ts';
import { loadAverage, runWhenMain, withScratchDatabase } from './harness.ts';
import { seedConsolidations, seedEpisodes } from '../support/seed.ts';

export interface Row {
  episodes: number;
  method: 'report' | 'raw';
  p50: number;
  max: number;
  /** p50 over the raw count's p50. */
  ratio: number;
  /** Largest growth of this process's RSS during a run, MB. */
  rssGrowthMb: number;
  /** Bytes PostgreSQL wrote to temporary files during the runs (0: nothing spilled). */
  tempBytes: number;
  runs: number;
  load: number;
}

const RUNS = 3;
const TENANT = 'report-scale';
const principal: Principal = { tenantId: TENANT, sub: 'bench', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } };

export async function reportScaleBench(options: { episodes: number; log: (line: string) => void }): Promise<Row[]> {
  const { episodes, log } = options;
  if (episodes % 1000 !== 0) throw new Error('episodes must be a multiple of 1,000');
  return withScratchDatabase('report', async (database) => {
    const loadStarted = performance.now();
    await load(database, episodes);
    log(`[report] ${episodes.toLocaleString('en')} episodes loaded and analysed in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s`);
    // One connection, so its backend's temp-file counters can be flushed before they are read.
    const app = connect(database.appUrl, { max: 1, applicationName: 'mnemo-bench-report' });
    try {
      return await measureAll(database, app, episodes, log);
    } finally {
      await app.close();
    }
  });
}

async function measureAll(database: ConnectedDatabase, app: Database, episodes: number, log: (line: string) => void): Promise<Row[]> {
  {

    const measure = async (method: Row['method'], run: () => Promise<void>): Promise<Omit<Row, 'ratio'>> => {
      const times: number[] = [];
      let rssGrowth = 0;
      const tempBefore = await tempBytes(database, app);
      for (let i = 0; i < RUNS; i++) {
        const rssBefore = process.memoryUsage().rss;
        let rssMax = rssBefore;
        const sampler = setInterval(() => (rssMax = Math.max(rssMax, process.memoryUsage().rss)), 20);
        const started = performance.now();
        try {
          await run();
        } finally {
          clearInterval(sampler);
        }
        times.push(performance.now() - started);
        rssGrowth = Math.max(rssGrowth, Math.max(rssMax, process.memoryUsage().rss) - rssBefore);
      }
      return {
        episodes,
        method,
        p50: Math.round(percentile(times, 50)),
        max: Math.round(Math.max(...times)),
        rssGrowthMb: Math.round((rssGrowth / 2 ** 20) * 10) / 10,
        tempBytes: (await tempBytes(database, app)) - tempBefore,
        runs: RUNS,
        load: loadAverage(),
      };
    };

    const raw = await measure('raw', async () => {
      await withTenant(app.db, TENANT, (tx) => tx.execute(sql`select count(*) from facts where memory_kind = 'episodic'`));
    });
    const report = await measure('report', async () => {
      const result = await coverageReport({ db: app.db, principal }, { limit: 1000 });
      if (result.episodic_count !== episodes || result.unmerged_count !== episodes / 2 || result.unmerged.length !== 1000) {
        throw new Error(`wrong report: ${JSON.stringify({ ...result, episodic_files: result.episodic_files.length, unmerged: result.unmerged.length })}`);
      }
    });
    const rows: Row[] = [
      { ...raw, ratio: 1 },
      { ...report, ratio: Math.round((report.p50 / Math.max(1, raw.p50)) * 10) / 10 },
    ];
    for (const row of rows) log(`[report] ${JSON.stringify(row)}`);
    return rows;
  }
}

export async function load(database: ConnectedDatabase, episodes: number): Promise<void> {
  await database.admin`insert into tenants (id) values (${TENANT})`;
  // In statements of 100,000 episodes, so a million does not build one huge transaction.
  for (let from = 1; from <= episodes; from += 100_000) {
    const to = Math.min(episodes, from + 99_999);
    await seedEpisodes(database.admin, { tenantId: TENANT, first: from, last: to, pathDigits: 7, assertedBy: 'bench' });
  }
  await seedConsolidations(database.admin, { tenantId: TENANT, episodes, assertedBy: 'bench' });
  await database.admin`vacuum analyze facts`;
}

async function tempBytes(database: ConnectedDatabase, app: Database): Promise<number> {
  // A backend flushes its counters at most once a second: force the report connection's now.
  await app.sql`select pg_stat_force_next_flush()`;
  await app.sql`select 1`;
  const [row] = await database.admin<{ bytes: string }[]>`select temp_bytes::text as bytes from pg_stat_database where datname = current_database()`;
  return Number(row!.bytes);
}

runWhenMain(import.meta.url, () => {
  const episodes = Number(process.argv[2] ?? 100_000);
  return reportScaleBench({ episodes, log: (line) => process.stderr.write(`${line}\n`) });
});
