/**
 * The coverage report over a tenant's facts (DESIGN §6), for the REST routes, the report job
 * and the MCP tool. The rules are coverage.ts's; here they run in SQL, so a tenant's facts are
 * never loaded at once: the counts are one aggregate, each episode's keys (`facts.episode_keys`)
 * probed against the corpus's coverage keys (`facts.merge_keys`, generated from `mergedFrom`), and
 * only the page of each list that was asked for is read, in order, from facts_report_order_idx.
 */
import { and, eq, sql } from 'drizzle-orm';
import { visibleTo } from '../auth/permissions.ts';
import { facts } from '../db/schema.ts';
import { setLocal } from '../db/client.ts';
import { appliesIn, live, type ScopeFilter } from '../memory/facts/conditions.ts';
import { type Caller, inTenantTransaction } from '../core/caller.ts';
import { type CoverageReport, type EpisodicFile, normalizeEpisodesPrefix, type Page } from '../kiwifs/coverage.ts';

export interface ReportParams extends Page {
  episodesPrefix?: string | undefined;
  /** Only facts that apply in this scope (as retrieval's `scope`): e.g. one project's episodes and what consolidated them. */
  scope?: ScopeFilter | undefined;
}

export interface ReportProgress {
  done: number;
  total: number;
}

/**
 * The report the principal may see: only facts visible to it, live, and applying in `scope`
 * count as episodes or as covering them. One repeatable-read snapshot, so counts and lists agree.
 */
export async function coverageReport(
  caller: Caller,
  params: ReportParams,
  onProgress?: (progress: ReportProgress) => Promise<void> | void,
): Promise<CoverageReport> {
  const prefix = normalizeEpisodesPrefix(params.episodesPrefix);
  const corpus = and(
    eq(facts.tenantId, caller.principal.tenantId),
    visibleTo(caller.principal, facts),
    live(),
    params.scope ? appliesIn(params.scope) : undefined,
  )!;
  const episodic = sql`(${facts.memoryKind} = 'episodic' or (${facts.memoryKind} is distinct from 'semantic' and ${facts.memoryKind} is distinct from 'consolidation' and starts_with(${facts.path}, ${prefix})))`;

  return inTenantTransaction(
    caller,
    async (tx) => {
      // Where the report's statements run: on Citus, the tenant's worker (setLocal forwards them).
      await setLocal(tx, [
        ['work_mem', REPORT_WORK_MEM],
        ['enable_sort', 'off'],
      ]);
      const order = sql`coalesce(${facts.path}, '') collate "C", ${facts.id}`;
      const page = sql`offset ${params.offset ?? 0} limit ${params.limit ?? null}::bigint`;
      const file = sql`${facts.id} as fact_id, coalesce(${facts.path}, '') as path, coalesce(${facts.episodeId}, ${facts.id}::text) as episode_id, ${facts.memoryKind} as memory_kind`;

      const [totals] = (await tx.execute(sql`
        with covering as materialized (
          select distinct unnest(${facts.mergeKeys}) as key from ${facts} where ${corpus} and ${facts.mergeKeys} <> '{}'
        ),
        totals as materialized (
          select
            count(*) filter (where ${episodic})::int as episodic_count,
            count(*) filter (where ${episodic} and ${uncovered})::int as unmerged_count,
            coalesce(sum(jsonb_array_length(${facts.mergedFrom})), 0)::int as merged_from_refs
          from ${facts} where ${corpus}
        ),
        unmerged as (
          select ${file}, ${facts.path} as sort_path from ${facts} where ${corpus} and ${episodic} and ${uncovered} order by ${order} ${page}
        )
        select totals.*,
          (select coalesce(json_agg(u order by coalesce(u.sort_path, '') collate "C", u.fact_id), '[]') from unmerged u) as unmerged
        from totals
      `)) as unknown as [{ episodic_count: number; unmerged_count: number; merged_from_refs: number; unmerged: FileRow[] }];
      await onProgress?.({ done: totals.episodic_count, total: totals.episodic_count });

      const episodicRows = (await tx.execute(sql`
        select ${file} from ${facts} where ${corpus} and ${episodic} order by ${order} ${page}
      `)) as unknown as FileRow[];

      return {
        episodic_count: totals.episodic_count,
        merged_from_refs: totals.merged_from_refs,
        unmerged_count: totals.unmerged_count,
        episodic_files: episodicRows.map(toFile),
        unmerged: totals.unmerged.map(toFile),
      };
    },
    { isolationLevel: 'repeatable read', accessMode: 'read only' },
  );
}

interface FileRow {
  fact_id: string;
  path: string;
  episode_id: string;
  memory_kind: string | null;
}

const toFile = (row: FileRow): EpisodicFile => ({
  path: row.path,
  episode_id: row.episode_id,
  ...(row.memory_kind ? { memory_kind: row.memory_kind } : {}),
  fact_id: row.fact_id,
});

/**
 * Memory for the report's statements, set for its transaction only: the hash of the corpus's
 * coverage keys (~4 MB per 50,000 keys) stays in memory instead of the probe falling back to a
 * scan of the keys per episode at the server's default 4 MB.
 *
 * Sorts are off for the transaction too: the pages come in order from the index, and the key set
 * is made distinct by hashing. Estimating that set at a few hundred keys, the planner sorted the
 * 500,000 keys of 1M episodes to drop duplicates (0.7 s of 2.4 s).
 */
const REPORT_WORK_MEM = '64MB';

/**
 * No fact of the corpus covers this episode: neither of its keys (stored per write in
 * `episode_keys`: its identity, its path) is among the corpus's coverage keys. `not in` over the
 * keys is one hash built once and probed as each episode is read, so episodes stay in the order
 * the index gives them (a hash join's output is unordered and would be sorted again). A missing
 * key is '' (no coverage key is empty), since `not in` with NULL is never true.
 *
 * The key set is `distinct` for the planner's sake: it estimates `unnest` at ten keys per fact
 * with keys (10 million at 1M episodes), too many to hash in work_mem, and would probe by
 * scanning the whole set per episode; the estimate of a distinct set is small, so the probe is
 * always hashed (the actual set, ~500,000 keys at 1M episodes, fits: no spill, tested with
 * temp_file_limit 0).
 */
const uncovered = sql`coalesce(${facts.episodeKeys}[1], '') not in (select key from covering) and coalesce(${facts.episodeKeys}[2], '') not in (select key from covering)`;
