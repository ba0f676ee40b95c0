/**
 * Latency of retrieval at one collection's size (bench/index.ts): retrieve() end to end per mode
 * (with the real query embedder), the query embedding alone, and the vector search alone with
 * each strategy (exact scan, iterative HNSW) on pre-embedded queries.
 *
 * Every measure runs the collection's queries once untimed (warm caches, prepared statements,
 * the model's first calls), then `rounds` times timed, one call at a time.
 */
import { sql } from 'drizzle-orm';
import { live } from '../src/memory/facts/conditions.ts';
import { withTenant } from '../src/db/client.ts';
import type { EmbeddingProvider } from '../src/embeddings/provider.ts';
import type { ModelInfo } from '../src/memory/facts/vectors.ts';
import { retrieve, type RetrievalCaller } from '../src/memory/retrieval/retrieve.ts';
import { type SemanticPlan, semanticSearch } from '../src/memory/retrieval/semantic.ts';
import { percentile, type SearchMode, SEARCH_MODES } from './ir.ts';

export interface Latency {
  p50: number;
  p95: number;
  samples: number;
}

export const LATENCY_LIMIT = 10;

export async function timeEach<T>(inputs: readonly T[], run: (input: T) => Promise<unknown>, rounds = 3): Promise<Latency> {
  for (const input of inputs) await run(input);
  const samples: number[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const input of inputs) {
      const started = performance.now();
      await run(input);
      samples.push(performance.now() - started);
    }
  }
  return { p50: percentile(samples, 50), p95: percentile(samples, 95), samples: samples.length };
}

export interface RetrievalLatencies {
  retrieve: Record<SearchMode, Latency>;
  embedQuery: Latency;
  vector: Record<SemanticPlan['strategy'], Latency>;
  /** Of the queries, how many the "hnsw" strategy actually ran on the HNSW index (the planner decides). */
  hnswIndexUsed: { used: number; of: number };
}

export async function measureRetrievalLatency(
  ctx: RetrievalCaller,
  provider: EmbeddingProvider,
  model: ModelInfo,
  queries: readonly string[],
  rounds = 3,
): Promise<RetrievalLatencies> {
  const retrieveLatency = {} as Record<SearchMode, Latency>;
  for (const mode of SEARCH_MODES) {
    retrieveLatency[mode] = await timeEach(
      queries,
      async (query) => {
        const { journal } = await retrieve(ctx, { mode, query, limit: LATENCY_LIMIT });
        if (journal.degraded) throw new Error(`retrieve(${mode}) degraded: ${journal.degraded}`);
      },
      rounds,
    );
  }
  const embedQuery = await timeEach(queries, (query) => provider.embed([query]), rounds);
  const vectors = await provider.embed(queries);
  const vector = {} as Record<SemanticPlan['strategy'], Latency>;
  for (const strategy of ['exact', 'hnsw'] as const) {
    vector[strategy] = await timeEach(
      vectors,
      (queryVector) =>
        withTenant(ctx.db, ctx.principal.tenantId, (tx) =>
          semanticSearch(tx, ctx.principal, model, queryVector, [live()], LATENCY_LIMIT, { force: strategy }),
        ),
      rounds,
    );
  }
  const [index] = (await ctx.db.execute(sql`select ensure_embedding_index(${model.model}, ${model.dims}) as name`)) as unknown as [{ name: string }];
  let used = 0;
  for (const queryVector of vectors) {
    const scanned = await withTenant(ctx.db, ctx.principal.tenantId, async (tx) => {
      const scans = sql`select pg_stat_get_xact_numscans(to_regclass(${index.name}))::int as n`;
      const [before] = (await tx.execute(scans)) as unknown as [{ n: number }];
      await semanticSearch(tx, ctx.principal, model, queryVector, [live()], LATENCY_LIMIT, { force: 'hnsw' });
      const [after] = (await tx.execute(scans)) as unknown as [{ n: number }];
      return after.n > before.n;
    });
    if (scanned) used++;
  }
  return { retrieve: retrieveLatency, embedQuery, vector, hnswIndexUsed: { used, of: vectors.length } };
}
