/**
 * LangGraph.js's `PostgresStore` on the same PostgreSQL, the same texts and the same synthetic
 * vectors (embedded by the endpoint the API uses, so each search pays the same call): puts per second from 1 and 2
 * clients, and vector search p50 at each size with the same semantic queries as Mnemo's.
 *
 * The store lives in a schema of its own in the scratch database, with its own vector index
 * (HNSW, cosine, its defaults). The items for search are loaded straight into its two tables
 * and its index rebuilt after, as Mnemo's are, so both are searched over the same build.
 */
import { PostgresStore } from '@langchain/langgraph-checkpoint-postgres/store';
import pgvector from 'pgvector';
import type { Sql } from 'postgres';
import { percentiles, type Percentiles, progress, throughput, timed } from './harness.ts';
import { semanticQuery } from './search-scale.ts';
import { textFor, type TenantLoad, type VectorSpace } from './synthetic.ts';

const SCHEMA = 'langgraph';

export interface LangGraph {
  store: PostgresStore;
  loaded: number;
  close(): Promise<void>;
}

export async function openLangGraph(owner: Sql, ownerUrl: string, space: VectorSpace, embed: (texts: string[]) => Promise<number[][]>): Promise<LangGraph> {
  await owner.unsafe(`create schema if not exists ${SCHEMA}`);
  const store = PostgresStore.fromConnString(ownerUrl, {
    schema: SCHEMA,
    index: { dims: space.dims, embed: { embedDocuments: embed, embedQuery: async (text: string) => (await embed([text]))[0]! }, fields: ['text'] },
  });
  await store.setup();
  return { store, loaded: 0, close: () => store.stop() };
}

export async function langGraphPuts(lg: LangGraph, sentences: readonly string[], seconds: number): Promise<{ clients: number; putsPerSecond: number }[]> {
  let n = 0;
  const put = async () => {
    const i = n++;
    await lg.store.put(['bench', 'puts'], `put-${i}`, { text: textFor(sentences, 4_000_000 + i) });
    return 1;
  };
  await throughput(2, 1, put);
  const rows = [];
  for (const clients of [1, 2, 8]) {
    const putsPerSecond = await throughput(clients, seconds, put);
    progress(`langgraph puts ${clients} clients: ${putsPerSecond.toFixed(0)}/s`);
    rows.push({ clients, putsPerSecond });
  }
  return rows;
}

/** Loads the main tenant's facts (same texts, same vectors) as items of namespace bench/main, up to `load.to`. */
export async function loadLangGraph(owner: Sql, lg: LangGraph, space: VectorSpace, sentences: readonly string[], load: TenantLoad): Promise<void> {
  const indexes = await owner<{ indexname: string; indexdef: string }[]>`
    select indexname, indexdef from pg_indexes where schemaname = ${SCHEMA} and tablename = 'store_vectors' and indexdef ilike '%hnsw%'`;
  for (const index of indexes) await owner.unsafe(`drop index ${SCHEMA}."${index.indexname}"`);
  for (let start = Math.max(lg.loaded, load.from); start < load.to; start += 1000) {
    const end = Math.min(load.to, start + 1000);
    const items: Record<string, unknown>[] = [];
    const vectors: Record<string, unknown>[] = [];
    for (let i = start; i < end; i++) {
      const seed = load.seedBase + i;
      const text = textFor(sentences, seed);
      items.push({ namespace_path: 'bench:main', key: `fact-${i}`, value: { text } });
      vectors.push({
        namespace_path: 'bench:main',
        key: `fact-${i}`,
        field_path: 'text',
        text_content: text,
        embedding: pgvector.toSql(space.point(load.clusters[i % load.clusters.length]!, seed)),
      });
    }
    await owner.begin(async (tx) => {
      await tx`insert into ${tx(SCHEMA)}.store ${tx(items as never)}`;
      await tx`insert into ${tx(SCHEMA)}.store_vectors ${tx(vectors as never)}`;
    });
  }
  lg.loaded = load.to;
  await owner.begin(async (tx) => {
    await tx`set local maintenance_work_mem = '512MB'`;
    for (const index of indexes) await tx.unsafe(index.indexdef);
  });
  await owner.unsafe(`analyze ${SCHEMA}.store, ${SCHEMA}.store_vectors`);
}

export async function langGraphSearch(lg: LangGraph, clusters: readonly number[], queries: readonly string[], rounds: number): Promise<Percentiles> {
  const texts = queries.map((text, i) => semanticQuery(clusters, i, text));
  const search = async (query: string) => {
    const found = await lg.store.search(['bench', 'main'], { query, limit: 10 });
    if (found.length === 0) throw new Error('langgraph search found nothing');
  };
  for (const query of texts) await search(query);
  const samples: number[] = [];
  for (let round = 0; round < rounds; round++) for (const query of texts) samples.push((await timed(() => search(query))).ms);
  return percentiles(samples);
}
