/**
 * Retrieval quality and filtered vector search with the real local model (USE lite, 512-d), on
 * real PostgreSQL + pgvector:
 *
 * - med (1033 abstracts, 30 judged queries) in a tenant of its own: mean nDCG@10 of keyword,
 *   semantic and both through retrieve();
 * - recall@10 of the HNSW strategy against the exact scan, unfiltered and with filters that
 *   leave ~2% of the vectors (a small tenant; a rare type in another tenant), and that a filtered
 *   search never starves (it returns min(10, candidates) rows);
 * - the automatic choice of strategy below EXACT_SCAN_LIMIT.
 *
 * The HNSW index holds 2442 unique vectors: med's 1033 abstracts (tenant "med"), the 1359
 * distinct cranfield titles (tenant "cran", every 50th typed `ir.rare`: 27 facts, 2% of that
 * tenant) and 50 cacm titles (tenant "small": 2% of all vectors). Titles keep the extra embedding
 * cheap. Cases: unfiltered (med queries on med, cranfield queries on cran), and each ~2% filter
 * with queries near its facts (cacm / cranfield queries) and far from them (med queries).
 * Recall is measured twice: with the HNSW index pinned (pgvector's filtered iterative scan
 * itself) and with the planner's own plan (what production runs; for a few candidates the
 * planner scans them exactly even when "hnsw" is asked for).
 */
import { type SQL, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { type Db, type Tx, withTenant } from '../../src/db/client.ts';
import { LOCAL_MODEL, type LocalEmbeddingsServer, startLocalEmbeddingsServer } from '../../src/embeddings/local-server.ts';
import { createOpenAICompatProvider } from '../../src/embeddings/openai-compat.ts';
import type { EmbeddingProvider } from '../../src/embeddings/provider.ts';
import { live, typeIn } from '../../src/memory/facts/conditions.ts';
import { ensureConfiguredModel, type ModelInfo } from '../../src/memory/facts/vectors.ts';
import { facts } from '../../src/db/schema.ts';
import { type RetrievalCaller, retrieve } from '../../src/memory/retrieval/retrieve.ts';
import { MEASURED_SEMANTIC_WEIGHTS } from '../../src/embeddings/registry.ts';
import { EXACT_SCAN_LIMIT, type SemanticPlan, semanticSearch } from '../../src/memory/retrieval/semantic.ts';
import {
  type Collection,
  embedAll,
  embedderFor,
  indexCollection,
  meanNdcg10,
  retrieveRanker,
  SEARCH_MODES,
  type SearchMode,
} from '../../bench/ir.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { fixtureCollection } from '../helpers/fixtures.ts';

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

const BM25_MED = 0.661;
const K = 10;

/** Titles only: short texts, cheap to embed, and unique vectors (no duplicates to flatter HNSW). */
const titlesOf = (collection: Collection, count: number): Collection['docs'] => {
  const seen = new Set<string>();
  const docs: Collection['docs'] = [];
  for (const doc of collection.docs) {
    const title = doc.title.trim().toLowerCase();
    if (!title || seen.has(title)) continue;
    seen.add(title);
    docs.push({ id: doc.id, title: doc.title, text: '' });
    if (docs.length === count) break;
  }
  return docs;
};

interface VectorCase {
  label: string;
  principal: Principal;
  corpus: SQL[];
  queries: number[][];
}

interface CaseResult {
  label: string;
  candidates: number;
  queries: number;
  recall: number;
  minRecall: number;
  /** Queries whose HNSW search returned fewer than min(10, candidates) rows. */
  starved: number;
  /** Queries whose "hnsw" search actually scanned the HNSW index (the planner decides). */
  indexUsed: number;
  /** Median time of one search (its transaction included), ms. */
  exactMs: number;
  hnswMs: number;
}

describe('retrieval quality on med and filtered vector search (real model, real pgvector)', () => {
  let t: TestDatabase;
  let server: LocalEmbeddingsServer;
  let provider: EmbeddingProvider;
  let model: ModelInfo;
  let hnswIndex: string;
  const med = fixtureCollection('med');
  const cranfield = fixtureCollection('cranfield-titles');
  const cacm = fixtureCollection('cacm-titles');
  const tenants = { med: admin(uniqueTenant('med')), cran: admin(uniqueTenant('cran')), small: admin(uniqueTenant('small')) };
  let medDocOf: Map<string, string>;
  let vectorCount = 0;
  const counts = { cran: 0, rare: 0, small: 0 };

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startLocalEmbeddingsServer({ port: 0 });
    provider = createOpenAICompatProvider({ url: server.url, model: LOCAL_MODEL, timeoutMs: 120_000 });
    model = await ensureConfiguredModel(t.app.db, provider);
    const [index] = (await t.app.db.execute(sql`select ensure_embedding_index(${model.model}, ${model.dims}) as name`)) as unknown as [{ name: string }];
    hnswIndex = index.name;

    medDocOf = await indexCollection(t.app.db, tenants.med, med);
    // Every 50th cranfield title typed ir.rare: a type filter keeping 2% of that tenant.
    const cranTitles = titlesOf(cranfield, 1400);
    const typeOf = (_: unknown, i: number) => (i % 50 === 25 ? 'ir.rare' : 'ir.doc');
    await indexCollection(t.app.db, tenants.cran, { docs: cranTitles }, { typeOf });
    counts.cran = cranTitles.length;
    counts.rare = cranTitles.filter((doc, i) => typeOf(doc, i) === 'ir.rare').length;
    const smallTitles = titlesOf(cacm, 50);
    await indexCollection(t.app.db, tenants.small, { docs: smallTitles });
    counts.small = smallTitles.length;
    for (const p of Object.values(tenants)) {
      vectorCount += await embedAll(t.app.db, provider, p.tenantId, model, { batch: 64, expected: 1400 });
    }
    // As autovacuum would after a bulk load; without statistics the planner takes every table
    // for one row and never picks the HNSW index, so "hnsw" would silently be an exact scan.
    await t.admin`analyze facts`;
    await t.admin`analyze fact_embeddings`;
  }, 900_000);

  afterAll(async () => {
    await server?.close();
    await t?.drop();
  });

  // ---------------------------------------------------------------------------------------------
  // nDCG@10 on med through retrieve()

  let figures: Promise<Record<SearchMode, number>> | undefined;
  const ndcgFigures = () =>
    (figures ??= (async () => {
      const ctx: RetrievalCaller = { db: t.app.db, principal: tenants.med, embedder: embedderFor(provider) };
      const result = {} as Record<SearchMode, number>;
      for (const mode of SEARCH_MODES) result[mode] = await meanNdcg10(med, medDocOf, retrieveRanker(ctx, mode));
      console.log(
        `med nDCG@10 (${med.queries.length} queries, ${med.docs.length} docs): keyword ${result.keyword.toFixed(3)}, semantic ${result.semantic.toFixed(3)}, both ${result.both.toFixed(3)}`,
      );
      return result;
    })());

  it('keyword reaches the BM25 reference on med (nDCG@10 ≥ 0.661 − 0.02)', async () => {
    const { keyword } = await ndcgFigures();
    expect(keyword).toBeGreaterThanOrEqual(BM25_MED - 0.02);
  }, 300_000);

  it('semantic finds relevant documents on med (nDCG@10 well above chance)', async () => {
    const { semantic } = await ndcgFigures();
    // USE lite on long medical abstracts; a sanity floor, not a target.
    expect(semantic).toBeGreaterThan(0.3);
  }, 300_000);

  it(`both, with the built-in model's default fusion weight (${MEASURED_SEMANTIC_WEIGHTS[LOCAL_MODEL]}), is within 0.02 of the better single mode on med`, async () => {
    const { keyword, semantic, both } = await ndcgFigures();
    // Issue 12's bar (DESIGN §5, fusion weights per model). With equal weights this small model
    // cost 0.025 on med and 0.1 on cranfield and cacm; the weight was chosen by
    // `npm run bench -- --calibrate` (docs/decisions/0052-fusion-weights-per-model.md).
    const { journal } = await retrieve({ db: t.app.db, principal: tenants.med, embedder: embedderFor(provider) }, { query: med.queries[0]!.text });
    expect(journal.weights).toEqual({ keyword: 1, semantic: MEASURED_SEMANTIC_WEIGHTS[LOCAL_MODEL] });
    expect(both).toBeGreaterThanOrEqual(Math.max(keyword, semantic) - 0.02);
    expect(both).toBeGreaterThan(semantic);
  }, 300_000);

  // ---------------------------------------------------------------------------------------------
  // HNSW against the exact scan

  /** How many times the transaction so far scanned the model's HNSW index. */
  const indexScans = async (tx: Tx) => {
    const [row] = (await tx.execute(sql`select pg_stat_get_xact_numscans(to_regclass(${hnswIndex}))::int as n`)) as unknown as [{ n: number }];
    return row.n;
  };

  const candidateCount = (db: Db, { principal, corpus }: VectorCase) =>
    withTenant(db, principal.tenantId, async (tx) => {
      const [row] = (await tx.execute(sql`
        select count(*)::int as n from fact_embeddings e join facts on facts.tenant_id = e.tenant_id and facts.id = e.fact_id
        where e.model = ${model.model} and ${sql.join(corpus, sql` and `)}`)) as unknown as [{ n: number }];
      return row.n;
    });

  /**
   * One search in its own tenant transaction. With `pinIndex`, sorting is priced out and plans are
   * made per execution, so the planner takes the HNSW index whenever it can: that measures
   * pgvector's filtered iterative scan itself (the plan is the one the planner picks for a large
   * tenant: HNSW index scan with the filters, nested loop to facts, limit). Without it, the plan
   * is the planner's own, as in production: for a few candidates it scans them exactly even when
   * "hnsw" is asked for.
   */
  const search = (c: VectorCase, vector: number[], strategy: SemanticPlan['strategy'], pinIndex: boolean) =>
    withTenant(t.app.db, c.principal.tenantId, async (tx) => {
      if (pinIndex) {
        await tx.execute(sql.raw('set local plan_cache_mode = force_custom_plan'));
        await tx.execute(sql.raw('set local enable_sort = off'));
        await tx.execute(sql.raw('set local enable_incremental_sort = off'));
        // Pricing sorts out lifts the plan's cost above jit_above_cost: JIT compilation would add
        // ~140 ms per query to the timings, and nothing to the results.
        await tx.execute(sql.raw('set local jit = off'));
      }
      const before = await indexScans(tx);
      const started = performance.now();
      const rows = await semanticSearch(tx, c.principal, model, vector, c.corpus, K, { force: strategy });
      const ms = performance.now() - started;
      return { rows, ms, usedIndex: (await indexScans(tx)) > before };
    });

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

  const compare = async (c: VectorCase, pinIndex: boolean): Promise<CaseResult> => {
    const candidates = await candidateCount(t.app.db, c);
    const recalls: number[] = [];
    let starved = 0;
    let indexUsed = 0;
    const exactMs: number[] = [];
    const hnswMs: number[] = [];
    for (const vector of c.queries) {
      const exact = await search(c, vector, 'exact', false);
      const hnsw = await search(c, vector, 'hnsw', pinIndex);
      exactMs.push(exact.ms);
      hnswMs.push(hnsw.ms);
      expect(exact.usedIndex).toBe(false);
      expect(exact.rows.strategy).toBe('exact');
      expect(hnsw.rows.strategy).toBe('hnsw');
      expect(exact.rows).toHaveLength(Math.min(K, candidates));
      if (hnsw.rows.length < Math.min(K, candidates)) starved++;
      if (hnsw.usedIndex) indexUsed++;
      // Tie-aware: a row as close as the exact k-th counts (equal distances may be ordered apart).
      const kth = exact.rows[exact.rows.length - 1]!.score;
      const truth = new Set(exact.rows.map((r) => r.id));
      const hits = hnsw.rows.filter((r) => truth.has(r.id) || r.score >= kth - 1e-6).length;
      recalls.push(Math.min(1, hits / exact.rows.length));
    }
    return {
      label: c.label,
      candidates,
      queries: c.queries.length,
      recall: recalls.reduce((a, b) => a + b, 0) / recalls.length,
      minRecall: Math.min(...recalls),
      starved,
      indexUsed,
      exactMs: median(exactMs),
      hnswMs: median(hnswMs),
    };
  };

  let cases: Promise<VectorCase[]> | undefined;
  const vectorCases = () =>
    (cases ??= (async () => {
      const [medQ, cranQ, cacmQ] = await Promise.all([
        provider.embed(med.queries.map((q) => q.text)),
        provider.embed(cranfield.queries.slice(0, 50).map((q) => q.text)),
        provider.embed(cacm.queries.map((q) => q.text)),
      ]);
      const rare = typeIn(facts.type, 'ir.rare', undefined);
      const { cran, rare: rareCount, small } = counts;
      return [
        { label: `unfiltered: tenant med (${med.docs.length} abstracts), med queries`, principal: tenants.med, corpus: [live()], queries: medQ },
        { label: `unfiltered: tenant cran (${cran} titles), cranfield queries`, principal: tenants.cran, corpus: [live()], queries: cranQ },
        { label: `small tenant (${small} of ${vectorCount} vectors), cacm queries (near)`, principal: tenants.small, corpus: [live()], queries: cacmQ },
        { label: `small tenant (${small} of ${vectorCount} vectors), med queries (far)`, principal: tenants.small, corpus: [live()], queries: medQ },
        { label: `type ir.rare (${rareCount} of cran ${cran}), cranfield queries (near)`, principal: tenants.cran, corpus: [live(), ...rare], queries: cranQ },
        { label: `type ir.rare (${rareCount} of cran ${cran}), med queries (far)`, principal: tenants.cran, corpus: [live(), ...rare], queries: medQ },
      ];
    })());

  const report = (title: string, results: CaseResult[]) =>
    console.log(
      [
        `${title} (recall@${K} of "hnsw" against "exact", ${vectorCount} vectors in the index):`,
        ...results.map(
          (r) =>
            `  ${r.label}: ${r.candidates} candidates, ${r.queries} queries, recall ${r.recall.toFixed(3)} (min ${r.minRecall.toFixed(2)}), starved ${r.starved}, HNSW index scanned in ${r.indexUsed}/${r.queries}; median ms exact ${r.exactMs.toFixed(1)}, hnsw ${r.hnswMs.toFixed(1)}`,
        ),
      ].join('\n'),
    );

  it('HNSW itself (index pinned): recall@10 ≥ 0.95 and no starvation, unfiltered and at ~2% selectivity', async () => {
    const results: CaseResult[] = [];
    for (const c of await vectorCases()) results.push(await compare(c, true));
    report('HNSW index pinned', results);
    for (const r of results) {
      expect(r.indexUsed, `${r.label}: the HNSW index must serve every query`).toBe(r.queries);
      expect(r.starved, `${r.label}: starved queries`).toBe(0);
      expect(r.recall, `${r.label}: mean recall@10`).toBeGreaterThanOrEqual(0.95);
    }
  }, 300_000);

  it('"hnsw" as planned in production: recall@10 ≥ 0.95 and no starvation, unfiltered and at ~2% selectivity', async () => {
    const results: CaseResult[] = [];
    for (const c of await vectorCases()) results.push(await compare(c, false));
    report('"hnsw" as the planner runs it', results);
    for (const r of results) {
      expect(r.starved, `${r.label}: starved queries`).toBe(0);
      expect(r.recall, `${r.label}: mean recall@10`).toBeGreaterThanOrEqual(0.95);
    }
  }, 300_000);

  it(`chooses by itself: an exact scan below EXACT_SCAN_LIMIT (${EXACT_SCAN_LIMIT}) candidates, HNSW above`, async () => {
    const small = (await vectorCases())[2]!;
    expect(await candidateCount(t.app.db, small)).toBeLessThanOrEqual(EXACT_SCAN_LIMIT);
    for (const vector of small.queries.slice(0, 5)) {
      const auto = await withTenant(t.app.db, small.principal.tenantId, (tx) => semanticSearch(tx, small.principal, model, vector, small.corpus, K));
      const exact = await search(small, vector, 'exact', false);
      expect(auto.strategy).toBe('exact');
      expect(auto).toHaveLength(K);
      expect(auto.map((r) => r.id)).toEqual(exact.rows.map((r) => r.id));
    }
    const [large] = await vectorCases();
    expect(await candidateCount(t.app.db, large!)).toBeGreaterThan(EXACT_SCAN_LIMIT);
    const auto = await withTenant(t.app.db, large!.principal.tenantId, (tx) =>
      semanticSearch(tx, large!.principal, model, large!.queries[0]!, large!.corpus, K),
    );
    expect(auto.strategy).toBe('hnsw');
    expect(auto).toHaveLength(K);
  }, 120_000);
});
