/**
 * Semantic search's choice of strategy and filtered HNSW, with the real local model (USE lite) on
 * real pgvector, at a size that runs in seconds: 300 cranfield titles in one tenant (every 50th
 * typed `ir.rare`: 6 facts) and 50 cacm titles in another; a third tenant holds synthetic vectors
 * placed near and far from a query, for the index's fallback. Recall and starvation at full size
 * (2,442 vectors, ~2% filters, med nDCG@10 in every mode) are in test/slow/retrieval-quality.test.ts.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { withTenant } from '../../src/db/client.ts';
import { facts } from '../../src/db/schema.ts';
import { LOCAL_MODEL, type LocalEmbeddingsServer, startLocalEmbeddingsServer } from '../../src/embeddings/local-server.ts';
import { createOpenAICompatProvider } from '../../src/embeddings/openai-compat.ts';
import type { EmbeddingProvider } from '../../src/embeddings/provider.ts';
import { live, typeIn } from '../../src/memory/facts/conditions.ts';
import { ensureConfiguredModel, type ModelInfo } from '../../src/memory/facts/vectors.ts';
import { EXACT_SCAN_LIMIT, type SemanticPlan, semanticSearch } from '../../src/memory/retrieval/semantic.ts';
import { embedAll, indexCollection } from '../../bench/ir.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { fixtureCollection } from '../helpers/fixtures.ts';
import { seedFacts } from '../../support/seed.ts';

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });
const K = 10;

describe('semantic search strategies (real model, real pgvector)', () => {
  let t: TestDatabase;
  let server: LocalEmbeddingsServer;
  let provider: EmbeddingProvider;
  let model: ModelInfo;
  const cranfield = fixtureCollection('cranfield-titles');
  const cacm = fixtureCollection('cacm-titles');
  const large = admin(uniqueTenant('cran'));
  const small = admin(uniqueTenant('small'));
  const rare = () => [live(), ...typeIn(facts.type, 'ir.rare', undefined)];
  let cranQueries: number[][];
  let cacmQueries: number[][];

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startLocalEmbeddingsServer({ port: 0 });
    provider = createOpenAICompatProvider({ url: server.url, model: LOCAL_MODEL, timeoutMs: 60_000 });
    model = await ensureConfiguredModel(t.app.db, provider);
    await t.app.db.execute(sql`select ensure_embedding_index(${model.model}, ${model.dims})`);
    await indexCollection(t.app.db, large, { docs: cranfield.docs.slice(0, 300) }, { typeOf: (_, i) => (i % 50 === 25 ? 'ir.rare' : 'ir.doc') });
    await indexCollection(t.app.db, small, { docs: cacm.docs.slice(0, 50) });
    for (const p of [large, small]) await embedAll(t.app.db, provider, p.tenantId, model, { expected: 300 });
    // As autovacuum would after a bulk load: the planner needs statistics to consider the index.
    await t.admin`analyze facts`;
    await t.admin`analyze fact_embeddings`;
    [cranQueries, cacmQueries] = await Promise.all([
      provider.embed(cranfield.queries.slice(0, 10).map((q) => q.text)),
      provider.embed(cacm.queries.slice(0, 10).map((q) => q.text)),
    ]);
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    await t?.drop();
  });

  const search = (principal: Principal, vector: number[], corpus = [live()], strategy?: SemanticPlan['strategy'], narrowed?: boolean) =>
    withTenant(t.app.db, principal.tenantId, (tx) => semanticSearch(tx, principal, model, vector, corpus, K, { force: strategy, narrowed }));

  it(`scans exactly at or below EXACT_SCAN_LIMIT (${EXACT_SCAN_LIMIT}) candidates: the same rows as a forced exact scan`, async () => {
    for (const vector of cacmQueries) {
      const auto = await search(small, vector);
      expect(auto.strategy).toBe('exact');
      // Unnarrowed (an admin, no filter), the count reads the tenant's vectors alone: the same choice.
      expect((await search(small, vector, [live()], undefined, false)).strategy).toBe('exact');
      expect(auto).toHaveLength(K);
      expect(auto.map((r) => r.id)).toEqual((await search(small, vector, [live()], 'exact')).map((r) => r.id));
    }
  });

  it('takes the HNSW index above the limit, and finds what the exact scan finds', async () => {
    let hits = 0;
    for (const vector of cranQueries) {
      const auto = await search(large, vector);
      expect(auto.strategy).toBe('hnsw');
      expect((await search(large, vector, [live()], undefined, false)).strategy).toBe('hnsw');
      expect(auto).toHaveLength(K);
      const exact = new Set((await search(large, vector, [live()], 'exact')).map((r) => r.id));
      hits += auto.filter((r) => exact.has(r.id)).length;
    }
    // 300 vectors: the graph is near-exact; at 2,442 the slow suite holds recall@10 ≥ 0.95.
    expect(hits / (K * cranQueries.length)).toBeGreaterThanOrEqual(0.95);
  });

  it('a filter leaving 2% of a tenant never starves a "hnsw" search: every candidate comes back', async () => {
    for (const vector of [...cranQueries, ...cacmQueries]) {
      const exact = await search(large, vector, rare(), 'exact');
      expect(exact).toHaveLength(6);
      const hnsw = await search(large, vector, rare(), 'hnsw');
      expect(hnsw.strategy).toBe('hnsw');
      expect(hnsw.map((r) => r.id).sort()).toEqual(exact.map((r) => r.id).sort());
    }
  });

  // Under test:citus the search runs on a worker, where the budget this test lowers through the
  // session cannot reach: SET LOCAL takes literals, so on Citus the search sets its own budget
  // (src/memory/retrieval/semantic.ts) and an operator's lower hnsw.max_scan_tuples is not read there.
  it.skipIf(inject('citusNodes'))('falls back to an exact scan when the index gives up first: a filter whose facts all lie far from the query', async () => {
    // 500 facts near the query and 300 far from it (its opposite), typed apart. The filter keeps the
    // far ones: more than EXACT_SCAN_LIMIT, so the index is tried. A scan budget of 100 tuples
    // stands in for a large index, where the walk to them is longer than pgvector's budget, and so
    // does `enable_sort = off`: at this size the planner would rather sort 300 rows than use it.
    const skewed = admin(uniqueTenant('skewed'));
    const query = cranQueries[0]!;
    const random = (() => {
      let seed = 7;
      return () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) - 0.5;
    })();
    const around = (centre: number[]) => {
      const v = centre.map((x) => x + random() * 0.2);
      const norm = Math.hypot(...v);
      return `[${v.map((x) => x / norm).join(',')}]`;
    };
    await t.admin`insert into tenants (id) values (${skewed.tenantId})`;
    const inserted = await seedFacts(t.admin, {
      tenantId: skewed.tenantId,
      last: 800,
      type: t.admin`case when i > 500 then 'ir.far' else 'ir.near' end`,
      text: t.admin`'synthetic ' || i`,
      assertedBy: 'test',
      returning: true,
    });
    await t.admin`
      insert into fact_embeddings (tenant_id, fact_id, model, version, dims, embedding)
      select ${skewed.tenantId}, id::uuid, ${model.model}, 1, ${model.dims}, v::vector
      from unnest(${inserted.map((r) => r.id)}::text[], ${inserted.map((r) => around(r.type === 'ir.far' ? query.map((x) => -x) : query))}::text[]) as u(id, v)`;
    await t.admin`analyze fact_embeddings`;
    const far = () => [live(), ...typeIn(facts.type, 'ir.far', undefined)];
    const budgeted = (strategy?: SemanticPlan['strategy']) =>
      withTenant(t.app.db, skewed.tenantId, async (tx) => {
        await tx.execute(sql`select set_config('hnsw.max_scan_tuples', '100', true), set_config('enable_sort', 'off', true)`);
        return semanticSearch(tx, skewed, model, query, far(), K, { force: strategy });
      });

    // The setup does what it says: the index alone gives up with fewer than K.
    expect((await budgeted('hnsw')).length).toBeLessThan(K);
    const auto = await budgeted();
    expect(auto.strategy).toBe('exact');
    expect(auto).toHaveLength(K);
    expect(auto.map((r) => r.id)).toEqual((await budgeted('exact')).map((r) => r.id));
  });
});
