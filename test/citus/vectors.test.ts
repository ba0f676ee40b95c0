/**
 * Vectors on shards: the model's partial HNSW index, which the app asks the SECURITY DEFINER
 * function `ensure_embedding_index` for, exists on every shard of `fact_embeddings` on every
 * worker; written facts are embedded by the worker on their tenant's shard and found by meaning.
 * (test/integration/vector-search.test.ts, in this suite too, covers the exact and iterative
 * strategies on the shards.)
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type TestApi, startTestApi } from '../helpers/api.ts';

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({ embeddings: true });
});

afterAll(async () => {
  await api?.close();
});

it('creates the model’s HNSW index on every shard, and semantic search finds a tenant’s facts on its shard', async () => {
  const shards = await api.db.admin<{ shard: string; port: number; indexes: string }[]>`
    select shardid::text as shard, nodeport as port, result as indexes
    from run_command_on_shards('fact_embeddings',
      $$select count(*) from pg_indexes where tablename = '%s' and indexdef ilike '%%using hnsw%%'$$)
    join citus_shards using (shardid)`;
  expect(new Set(shards.map((s) => s.port)).size).toBe(2);
  for (const shard of shards) expect(Number(shard.indexes), `shard ${shard.shard} on :${shard.port}`).toBe(1);

  const { tenantId, admin } = await api.newTenant('citus-vectors');
  const texts = ['the washing machine drum is broken', 'invoice for spare parts', 'holiday plans for August', 'the dishwasher leaks water'];
  for (const text of texts) {
    expect((await api.request('POST', '/v1/memory/facts', { token: admin, body: { type: 'citus.note', content: { text } } })).status).toBe(201);
  }
  await api.embeddings!.settled(tenantId, 60_000);
  const search = await api.request('POST', '/v1/memory/retrieve', { token: admin, body: { query: 'my washing machine is broken', mode: 'semantic' } });
  expect(search.status).toBe(200);
  expect(search.body.results[0].fact.content.text).toBe('the washing machine drum is broken');
  expect(search.body.journal.embeddingModel).toBe(api.embeddings!.server.model);
});
