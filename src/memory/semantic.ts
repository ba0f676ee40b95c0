/**
 * Search by meaning: cosine similarity on pgvector (DESIGN §5).
 *
 * Filtered vector search must not starve. With pgvector's defaults an HNSW top-10 filtered to one
 * tenant at 2% selectivity returned 0.79 rows on average (STACK-NOTES). So each query chooses:
 * - when the facts it may return (visible, live, filtered, embedded with the model) are few,
 *   an exact scan over them: exact, and faster than the index for a small set;
 * - otherwise the model's partial HNSW index with `hnsw.iterative_scan = relaxed_order`, which
 *   keeps scanning until enough rows pass the filters, and `ef_search` at least the depth.
 */
import { and, type SQL, sql } from 'drizzle-orm';
import pgvector from 'pgvector';
import { type Principal, visibleTo } from '../auth/permissions.ts';
import type { Tx } from '../db/client.ts';
import { facts } from '../db/schema.ts';
import type { RankedId } from './keyword.ts';
import type { ModelInfo } from './embeddings.ts';

/**
 * Up to this many candidates, an exact scan; above, the HNSW index. Measured (npm run bench, 512-d):
 * exact 1.4 ms at ~50 candidates vs 6.5 ms HNSW for far-away queries, but 7.7 ms at 1,033 vs 2 ms.
 */
export const EXACT_SCAN_LIMIT = 250;

export interface SemanticPlan {
  strategy: 'exact' | 'hnsw';
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
  force?: SemanticPlan['strategy'],
): Promise<SemanticResult> {
  const dims = sql.raw(String(Math.trunc(model.dims)));
  const vector = sql`${pgvector.toSql(queryVector)}::vector(${dims})`;
  const candidates = and(visibleTo(principal, facts), ...corpus)!;
  const joined = sql`fact_embeddings e join facts on facts.tenant_id = e.tenant_id and facts.id = e.fact_id`;
  const modelIs = sql`e.model = ${literal(model.model)}`;

  // The two statements below go out together (pipelined: one round trip). The choice of strategy is
  // made inside the search statement: each branch runs only when its one-time filter holds.
  const ef = Math.max(40, Math.min(1000, depth));
  const settings = tx.execute(
    sql`select set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ${String(ef)}, true)`,
  );
  const few =
    force === undefined
      ? sql`(select count(*) from (select 1 from ${joined} where ${modelIs} and ${candidates} limit ${EXACT_SCAN_LIMIT + 1}) capped) <= ${EXACT_SCAN_LIMIT}`
      : sql.raw(force === 'exact' ? 'true' : 'false');
  const search = tx.execute(sql`
    with few as materialized (select ${few} as yes),
    found as (
      (
        -- \`+ 0\` keeps the planner off the index: an exact ordering over the candidates.
        select e.fact_id as id, (e.embedding::vector(${dims}) <=> ${vector}) as distance, 'exact' as strategy
        from ${joined}
        where (select yes from few) and ${modelIs} and ${candidates}
        order by (e.embedding::vector(${dims}) <=> ${vector}) + 0, e.fact_id desc
        limit ${depth}
      )
      union all
      (
        -- relaxed_order may return neighbours slightly out of order: sorted exactly below.
        select id, distance, 'hnsw' as strategy from (
          select e.fact_id as id, (e.embedding::vector(${dims}) <=> ${vector}) as distance
          from ${joined}
          where ${modelIs} and ${candidates}
          order by e.embedding::vector(${dims}) <=> ${vector}
          limit ${depth}
        ) nearest
        where not (select yes from few)
      )
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
