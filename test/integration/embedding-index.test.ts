import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../../src/db/client.ts';
import { factEmbeddings } from '../../src/db/schema.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { insertFact, uniqueTenant } from '../helpers/factories.ts';

describe('per-model HNSW index (ensure_embedding_index)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(() => t.drop());

  it('is created by the app role for a model on first use, and only once', async () => {
    const [first] = await t.app.sql<{ name: string }[]>`select ensure_embedding_index('test-model-3d', 3) as name`;
    const [again] = await t.app.sql<{ name: string }[]>`select ensure_embedding_index('test-model-3d', 3) as name`;
    expect(again!.name).toBe(first!.name);
    const indexes = await t.admin<{ indexdef: string }[]>`
      select indexdef from pg_indexes where tablename = 'fact_embeddings' and indexname = ${first!.name}`;
    expect(indexes).toHaveLength(1);
    expect(indexes[0]!.indexdef).toMatch(/USING hnsw \(\(\(embedding\)::vector\(3\)\) vector_cosine_ops\) WHERE \(model = 'test-model-3d'::text\)/);
  });

  it('can serve a nearest-neighbour query for that model (its expression and predicate match)', async () => {
    const tenant = uniqueTenant();
    await t.app.sql`select ensure_embedding_index('planner-model', 3)`;
    for (let i = 0; i < 20; i++) {
      const fact = await insertFact(t.app.db, tenant);
      await withTenant(t.app.db, tenant, (tx) =>
        tx.insert(factEmbeddings).values({ tenantId: tenant, factId: fact.id, model: 'planner-model', version: 1, dims: 3, embedding: [1, i, 0] }),
      );
    }
    // Planned without the tenant condition RLS adds (which favours an exact scan of the tenant's
    // rows via the primary key, a choice for the retrieval code), and with the cheaper scans of
    // 20 rows forbidden: the plan shows the index's expression and predicate match the query.
    const plan = await t.admin.begin(async (tx) => {
      await tx`set local enable_seqscan = off`;
      await tx`set local enable_bitmapscan = off`;
      return tx`explain select fact_id from fact_embeddings where model = 'planner-model'
                order by embedding::vector(3) <=> '[1,0,0]'::vector(3) limit 5`;
    });
    expect(JSON.stringify(plan)).toMatch(/fact_embeddings_hnsw_/);
  });

  it('rejects dimensions HNSW cannot index and names that are empty', async () => {
    await expect(t.app.sql`select ensure_embedding_index('too-wide', 4096)`).rejects.toThrow(/outside 1..2000/);
    await expect(t.app.sql`select ensure_embedding_index('', 3)`).rejects.toThrow(/1 to 200 characters/);
  });

  it('quotes model names, whatever they contain', async () => {
    const model = `evil'); drop table facts; --`;
    const [{ name }] = (await t.app.sql`select ensure_embedding_index(${model}, 4) as name`) as unknown as [{ name: string }];
    const [index] = await t.admin<{ indexdef: string }[]>`select indexdef from pg_indexes where indexname = ${name}`;
    expect(index!.indexdef).toContain(`WHERE (model = 'evil''); drop table facts; --'::text)`);
    const [facts] = await t.admin<{ exists: boolean }[]>`select to_regclass('public.facts') is not null as exists`;
    expect(facts!.exists).toBe(true);
  });
});
