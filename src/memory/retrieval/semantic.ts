/**
 * Search by meaning: cosine similarity on pgvector (DESIGN §5).
 *
 * Filtered vector search must not starve. With pgvector's defaults an HNSW top-10 filtered to one
 * tenant at 2% selectivity returned 0.79 rows on average (STACK-NOTES). So each query chooses:
 * - when the facts it may return (visible, live, filtered, embedded with the model) are few,
 *   an exact scan over them: exact, and faster than the index for a small set;
 * - otherwise the model's partial HNSW index with `hnsw.iterative_scan = relaxed_order`, which
 *   keeps scanning until enough rows pass the filters, and `ef_search` at least the depth;
 * - and when that scan gives up (its tuple budget spent) before it found `depth` rows, an exact
 *   scan after all: the filter is selective, so its candidates are few for the index's size.
 *   Measured at 100k facts (bench, 151k vectors in the index): a type filter leaving 2,000 facts
 *   all in clusters far from the query made the iterative scan walk its default 20,000 tuples
 *   (235 ms) and return 9.3 rows with recall@10 0.235; the bounded scan gives up in ~15 ms and the
 *   exact scan over the 2,000 takes ~15 ms, with recall 1.
 */
import { and, type SQL, sql } from 'drizzle-orm';
import pgvector from 'pgvector';
import { type Principal, visibleTo } from '../../auth/permissions.ts';
import { onCitus, setLocal, type Tx } from '../../db/client.ts';
import { facts } from '../../db/schema.ts';
import type { RankedId } from './keyword.ts';
import type { ModelInfo } from '../facts/vectors.ts';

/**
 * Up to this many candidates, an exact scan; above, the HNSW index. Measured (npm run bench, 512-d):
 * exact 1.4 ms at ~50 candidates vs 6.5 ms HNSW for far-away queries, but 7.7 ms at 1,033 vs 2 ms.
 */
export const EXACT_SCAN_LIMIT = 250;

/**
 * Tuples the HNSW scan may visit before it gives up (pgvector's `hnsw.max_scan_tuples`, 20,000 by
 * default, is the ceiling: a lower server setting wins). Each visited tuple costs ~4-8 µs here (a
 * heap fetch and the filters), so a starving scan costs ~10-40 ms before the exact fallback. A
 * scan that finds `depth` rows within the budget has a filter that keeps at least depth/budget of
 * the index, where the index's order is worth following.
 */
export const scanBudget = (depth: number) => Math.min(20_000, Math.max(2_000, 50 * depth));

export interface SemanticPlan {
  strategy: 'exact' | 'hnsw';
}

export interface SemanticOptions {
  /** Run one strategy, no choice and no fallback (tests, the bench). */
  force?: SemanticPlan['strategy'] | undefined;
  /**
   * Whether `corpus` or the principal's visibility may narrow the tenant's facts (a type, scope or
   * validity filter; a caller other than an admin). Unnarrowed, the candidates are the tenant's
   * vectors of the model, counted on the primary key alone (an index-only scan, ~0.1 ms) instead
   * of joined to the facts (~2 ms at 251 rows). Default true: the joined count is always right.
   */
  narrowed?: boolean | undefined;
}

/** Best first, with the strategy that ran and the model serving in the search's snapshot. */
export type SemanticResult = RankedId[] & { strategy: SemanticPlan['strategy']; servingModel: string | null };

/** Quotes a string as an SQL literal. Model names are inlined so the partial index can match. */
const literal = (value: string) => sql.raw(`'${value.replace(/'/g, "''")}'`);

export async function semanticSearch(
  tx: Tx,
  principal: Principal,
  model: ModelInfo,
  queryVector: number[],
  corpus: SQL[],
  depth: number,
  { force, narrowed = true }: SemanticOptions = {},
): Promise<SemanticResult> {
  const dims = sql.raw(String(Math.trunc(model.dims)));
  const vector = sql`${pgvector.toSql(queryVector)}::vector(${dims})`;
  const candidates = and(visibleTo(principal, facts), ...corpus)!;
  const joined = sql`fact_embeddings e join facts on facts.tenant_id = e.tenant_id and facts.id = e.fact_id`;
  // Both tables name the tenant besides row-level security: on Citus that routes the statement to
  // the tenant's one shard (issue 16).
  const inTenant = sql`e.tenant_id = ${principal.tenantId} and facts.tenant_id = ${principal.tenantId}`;
  const modelIs = sql`e.model = ${literal(model.model)}`;

  // The two statements below go out together (pipelined: one round trip). The choice of strategy is
  // made inside the search statement: each branch runs only when its one-time filter holds.
  const ef = Math.max(40, Math.min(1000, depth));
  // The tuple budget belongs to the fallback: a forced "hnsw" (no fallback) scans as far as the
  // server's setting lets pgvector go, showing what the index alone finds.
  const budget =
    force === undefined
      ? sql`, set_config('hnsw.max_scan_tuples', least(coalesce(current_setting('hnsw.max_scan_tuples', true)::int, 20000), ${scanBudget(depth)}::int)::text, true)`
      : sql``;
  // On Citus the search runs on the tenant's worker, which must get the settings too (setLocal
  // sends them as SET LOCAL, forwarded there). SET takes a literal, so there the budget cannot
  // defer to a lower server setting of hnsw.max_scan_tuples: 20,000 is its ceiling.
  const settings = onCitus(tx)
    ? setLocal(tx, [
        ['hnsw.iterative_scan', 'relaxed_order'],
        ['hnsw.ef_search', String(ef)],
        ...(force === undefined ? ([['hnsw.max_scan_tuples', String(scanBudget(depth))]] as const) : []),
        ['plan_cache_mode', 'force_custom_plan'],
      ])
    : tx.execute(
        sql`select set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ${String(ef)}, true)${budget},
          set_config('plan_cache_mode', 'force_custom_plan', true)`,
      );
  const counted = narrowed
    ? sql`select 1 from ${joined} where ${inTenant} and ${modelIs} and ${candidates}`
    : sql`select 1 from fact_embeddings e where e.tenant_id = ${principal.tenantId} and ${modelIs}`;
  const few =
    force === undefined
      ? sql`(select count(*) from (${counted} limit ${EXACT_SCAN_LIMIT + 1}) capped) <= ${EXACT_SCAN_LIMIT}`
      : sql.raw(force === 'exact' ? 'true' : 'false');
  // A forced "hnsw" (tests, the bench) never falls back: it shows what the index alone finds.
  const fallback = force === undefined ? sql`(select count(*) from nearest) < ${depth}` : sql.raw('false');
  const search = tx.execute(sql`
    with few as materialized (select ${few} as yes),
    nearest as materialized (
      -- relaxed_order may return neighbours slightly out of order: sorted exactly below.
      select id, distance from (
        select e.fact_id as id, (e.embedding::vector(${dims}) <=> ${vector}) as distance
        from ${joined}
        where ${inTenant} and ${modelIs} and ${candidates}
        order by e.embedding::vector(${dims}) <=> ${vector}
        limit ${depth}
      ) scanned
      where not (select yes from few)
    ),
    exact as materialized (select (select yes from few) or ${fallback} as yes),
    found as (
      (
        -- \`+ 0\` keeps the planner off the index: an exact ordering over the candidates.
        select e.fact_id as id, (e.embedding::vector(${dims}) <=> ${vector}) as distance, 'exact' as strategy
        from ${joined}
        where (select yes from exact) and ${inTenant} and ${modelIs} and ${candidates}
        order by (e.embedding::vector(${dims}) <=> ${vector}) + 0, e.fact_id desc
        limit ${depth}
      )
      union all
      (select id, distance, 'hnsw' as strategy from nearest where not (select yes from exact))
    )
    -- The serving model in the same snapshot as the vectors, so a caller can tell whether they
    -- are still the ones it meant to search (one row even when nothing was found).
    select (select model from embedding_models where state in ('active', 'backfilling') order by state = 'active' desc limit 1) as serving,
      found.id, found.distance, found.strategy
    from (select 1) one left join found on true
    order by found.distance, found.id desc
  `);
  // Drizzle sends a statement when it is awaited: both at once, so they are pipelined.
  const [, found] = await Promise.all([settings, search]);
  const rows = found as unknown as { serving: string | null; id: string | null; distance: number | string; strategy: SemanticPlan['strategy'] }[];
  const strategy: SemanticPlan['strategy'] = rows[0]?.strategy ?? force ?? 'exact';
  const ranked = rows.flatMap((row) => (row.id === null ? [] : [{ id: row.id, score: 1 - Number(row.distance) }]));
  return Object.assign(ranked, { strategy, servingModel: rows[0]?.serving ?? null });
}
