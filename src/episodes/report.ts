/**
 * The coverage report over a tenant's facts (DESIGN §6), for the REST routes, the report job
 * and the MCP tool. The rules are coverage.ts's; here they run in SQL, so a tenant's facts are
 * never loaded at once: episodes stream through a server-side cursor in batches, each with its
 * "covered" flag from an anti-join against the coverage keys of the corpus (`facts.merge_keys`,
 * generated from `mergedFrom`), and only the page of each list that was asked for is kept.
 */
import { and, type SQL, sql } from 'drizzle-orm';
import { visibleTo } from '../auth/permissions.ts';
import type { Tx } from '../db/client.ts';
import { facts } from '../db/schema.ts';
import { appliesIn, live, type ScopeFilter } from '../memory/conditions.ts';
import { type MemoryContext, inTenantTransaction } from '../memory/context.ts';
import { type CoverageReport, type EpisodicFile, normalizeEpisodesPrefix, type Page } from './coverage.ts';

export interface ReportParams extends Page {
  episodesPrefix?: string | undefined;
  /** Only facts that apply in this scope (as retrieval's `scope`): e.g. one project's episodes and what consolidated them. */
  scope?: ScopeFilter | undefined;
}

export interface ReportProgress {
  done: number;
  total: number;
}

/** Episodes fetched from the cursor per round trip. */
const CURSOR_BATCH = 2000;

/**
 * The report the principal may see: only facts visible to it, live, and applying in `scope`
 * count as episodes or as covering them. One repeatable-read snapshot, so counts and lists agree.
 */
export async function coverageReport(
  ctx: MemoryContext,
  params: ReportParams,
  onProgress?: (progress: ReportProgress) => Promise<void> | void,
): Promise<CoverageReport> {
  const prefix = normalizeEpisodesPrefix(params.episodesPrefix);
  const corpus = and(visibleTo(ctx.principal, facts), live(), params.scope ? appliesIn(params.scope) : undefined)!;
  const episodic = sql`(${facts.memoryKind} = 'episodic' or (${facts.memoryKind} is distinct from 'semantic' and ${facts.memoryKind} is distinct from 'consolidation' and starts_with(${facts.path}, ${prefix})))`;

  return inTenantTransaction(
    ctx,
    async (tx) => {
      const [totals] = (await tx.execute(sql`
        select
          (select count(*) from ${facts} where ${corpus} and ${episodic})::int as episodic_count,
          (select coalesce(sum(jsonb_array_length(${facts.mergedFrom})), 0) from ${facts} where ${corpus})::int as merged_from_refs
      `)) as unknown as [{ episodic_count: number; merged_from_refs: number }];

      const offset = params.offset ?? 0;
      const end = params.limit === undefined ? Number.POSITIVE_INFINITY : offset + params.limit;
      const episodicFiles: EpisodicFile[] = [];
      const unmerged: EpisodicFile[] = [];
      let seen = 0;
      let unmergedCount = 0;

      for await (const batch of episodeBatches(tx, corpus, episodic)) {
        for (const row of batch) {
          const file: EpisodicFile = {
            path: row.path,
            episode_id: row.episode_id,
            ...(row.memory_kind ? { memory_kind: row.memory_kind } : {}),
            fact_id: row.id,
          };
          if (seen >= offset && seen < end) episodicFiles.push(file);
          seen++;
          if (!row.covered) {
            if (unmergedCount >= offset && unmergedCount < end) unmerged.push(file);
            unmergedCount++;
          }
        }
        await onProgress?.({ done: seen, total: Math.max(seen, totals.episodic_count) });
      }

      return {
        episodic_count: seen,
        merged_from_refs: totals.merged_from_refs,
        unmerged_count: unmergedCount,
        episodic_files: episodicFiles,
        unmerged,
      };
    },
    { isolationLevel: 'repeatable read', accessMode: 'read only' },
  );
}

interface EpisodeRow {
  id: string;
  path: string;
  episode_id: string;
  memory_kind: string | null;
  covered: boolean;
}

/**
 * Memory for the report's one statement, set for its transaction only: the final sort of the
 * episodes by path (~15 MB at 100,000 episodes) and the hash of the corpus's coverage keys (~4 MB
 * per 50,000 keys) stay in memory instead of spilling to disk at the server's default 4 MB.
 */
const REPORT_WORK_MEM = '64MB';

/**
 * Every episode in KiwiFS's order (path, bytewise; then id), with whether some fact of the corpus
 * covers it: the corpus's coverage keys, once, joined by hash against each episode's keys (its
 * identity and its path). A correlated probe per episode through a GIN index on the keys was
 * planned as a scan per episode and ran for minutes.
 *
 * The planner cannot estimate how many distinct keys `unnest` yields (100,000 episodes: 290
 * estimated, 50,000 actual), so it took the key set for tiny and chose merge joins, sorting every
 * episode twice by key before the sort by path — three sorts, spilling to disk. A merge join is
 * never the better plan here (one probe per episode against a set built once), so merge joins are
 * off for this transaction.
 */
async function* episodeBatches(tx: Tx, corpus: SQL, episodic: SQL): AsyncGenerator<EpisodeRow[]> {
  await tx.execute(sql`select set_config('work_mem', ${REPORT_WORK_MEM}, true), set_config('enable_mergejoin', 'off', true)`);
  await tx.execute(sql`
    declare mnemo_coverage_episodes no scroll cursor for
    with covering as materialized (
      select distinct unnest(${facts.mergeKeys}) as key from ${facts} where ${corpus} and ${facts.mergeKeys} <> '{}'
    ),
    episodes as (
      select ${facts.id} as id, ${facts.path} as path, ${facts.episodeId} as episode_id, ${facts.memoryKind} as memory_kind,
        mnemo_episode_keys(coalesce(${facts.episodeId}, ${facts.id}::text), ${facts.path}) as keys
      from ${facts} where ${corpus} and ${episodic}
    )
    select e.id, coalesce(e.path, '') as path, coalesce(e.episode_id, e.id::text) as episode_id, e.memory_kind,
      (by_id.key is not null or by_path.key is not null) as covered
    from episodes e
    left join covering by_id on by_id.key = e.keys[1]
    left join covering by_path on by_path.key = e.keys[2]
    order by coalesce(e.path, '') collate "C", e.id
  `);
  let fetchFailed = false;
  try {
    for (;;) {
      const rows = (await tx
        .execute(sql.raw(`fetch ${CURSOR_BATCH} from mnemo_coverage_episodes`))
        .catch((error: unknown) => {
          fetchFailed = true;
          throw error;
        })) as unknown as EpisodeRow[];
      if (rows.length === 0) return;
      yield rows;
      if (rows.length < CURSOR_BATCH) return;
    }
  } finally {
    // After a failed fetch the transaction is aborted and the cursor goes with it: closing it
    // would only fail too, and replace the error that says what happened.
    if (!fetchFailed) await tx.execute(sql.raw('close mnemo_coverage_episodes'));
  }
}
