/**
 * Search side by side (bench/side-by-side.ts): keyword, semantic and both through the HTTP API
 * against their raw SQL on the same data and queries, at each size of the main tenant; and
 * filtered recall@10 of the API's semantic search against an exact scan.
 *
 * Raw SQL, run as the owner (no row-level security, no fact loading, nothing else):
 * - keyword: a plain `ts_rank` over the OR of the query's terms, the tenant's matches only;
 * - semantic: the query embedded by the same endpoint the API asks, then the model's HNSW index,
 *   `ORDER BY embedding <=> $1 LIMIT 10` in the tenant (iterative scan on, as the tenant filter
 *   needs it to return 10 rows);
 * - both: the two statements one after the other.
 * API and raw run query by query, interleaved, so the machine's load hits both alike.
 *
 * The breakdown (issue 30): the same searches through an API started with MNEMO_SERVER_TIMING, whose
 * `Server-Timing` header says where each request's milliseconds went (src/foundation/request-timing.ts);
 * what the client waited beyond the server's total is HTTP (both ends' handling and the loopback).
 */
import pgvector from 'pgvector';
import type { Sql } from 'postgres';
import { recallAt } from './ir.ts';
import { parseServerTiming } from '../src/foundation/request-timing.ts';
import { type Api, call, type Percentiles, percentiles, progress, timed } from './harness.ts';
import type { VectorSpace } from './synthetic.ts';

export type Mode = 'keyword' | 'semantic' | 'both';

export interface SearchRow {
  size: number;
  mode: Mode;
  api: Percentiles;
  raw: Percentiles;
}

export interface SearchSetup {
  api: Api;
  owner: Sql;
  space: VectorSpace;
  model: string;
  tenantId: string;
  token: string;
  /** Clusters of the tenant's vectors (semantic queries land in them). */
  clusters: readonly number[];
  keywordQueries: readonly string[];
  rounds: number;
  /** The query's vector from the embeddings endpoint the API uses (the raw search pays that call too). */
  embedQuery(text: string): Promise<number[]>;
}

const literal = (value: string) => `'${value.replace(/'/g, "''")}'`;

export function rawKeyword(owner: Sql, tenantId: string, query: string) {
  return owner`
    select id, ts_rank(search_vector, q) as rank
    from facts, to_tsquery('english', replace(plainto_tsquery('english', ${query})::text, ' & ', ' | ')) q
    where tenant_id = ${tenantId} and search_vector @@ q
    order by rank desc limit 10`;
}

export function rawSemantic(owner: Sql, model: string, dims: number, tenantId: string, vector: number[], iterative = true) {
  return owner.begin(async (tx) => {
    if (iterative) await tx.unsafe('set local hnsw.iterative_scan = relaxed_order');
    // The model name is inlined so the planner matches the model's partial index.
    return tx.unsafe(
      `select fact_id as id from fact_embeddings
       where tenant_id = $1 and model = ${literal(model)}
       order by embedding::vector(${dims}) <=> $2::vector(${dims}) limit 10`,
      [tenantId, pgvector.toSql(vector)],
    );
  });
}

/** The exact top 10 (no index) of a tenant's facts, optionally of one type. */
export async function exactTop10(owner: Sql, model: string, dims: number, tenantId: string, vector: number[], type?: string): Promise<string[]> {
  const rows = await owner.unsafe(
    `select e.fact_id as id from fact_embeddings e join facts f on f.tenant_id = e.tenant_id and f.id = e.fact_id
     where e.tenant_id = $1 and e.model = ${literal(model)} ${type ? 'and f.type = $3' : ''}
     order by (e.embedding::vector(${dims}) <=> $2::vector(${dims})) + 0 limit 10`,
    type ? [tenantId, pgvector.toSql(vector), type] : [tenantId, pgvector.toSql(vector)],
  );
  return rows.map((r) => r.id as string);
}

async function apiSearch(setup: SearchSetup, mode: Mode, query: string, filters: Record<string, unknown> = {}, api = setup.api) {
  const answer = await call(api, setup.token, 'POST', '/v1/memory/retrieve', { mode, query, limit: 10, ...filters });
  if (answer.status !== 200) throw new Error(`retrieve ${mode} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  if (answer.body.journal.degraded) throw new Error(`retrieve ${mode} degraded: ${answer.body.journal.degraded}`);
  return { ids: (answer.body.results as { fact: { id: string } }[]).map((r) => r.fact.id), serverTiming: answer.headers.get('server-timing') };
}

/** Semantic queries: a keyword query's text, placed in one of the tenant's clusters. */
export const semanticQuery = (clusters: readonly number[], i: number, text: string) => `cluster-${clusters[(i * 7) % clusters.length]} ${text}`;

export async function searchSideBySide(setup: SearchSetup, size: number, modes: readonly Mode[]): Promise<SearchRow[]> {
  const { owner, space, model, tenantId } = setup;
  const dims = space.dims;
  const queries = setup.keywordQueries.map((text, i) => ({ keyword: text, semantic: semanticQuery(setup.clusters, i, text) }));
  const raw: Record<Mode, (q: (typeof queries)[number]) => Promise<unknown>> = {
    keyword: (q) => rawKeyword(owner, tenantId, q.keyword),
    semantic: async (q) => rawSemantic(owner, model, dims, tenantId, await setup.embedQuery(q.semantic)),
    both: async (q) => {
      await rawKeyword(owner, tenantId, q.semantic);
      await rawSemantic(owner, model, dims, tenantId, await setup.embedQuery(q.semantic));
    },
  };
  const rows: SearchRow[] = [];
  for (const mode of modes) {
    const text = (q: (typeof queries)[number]) => (mode === 'keyword' ? q.keyword : q.semantic);
    // One untimed round: caches, prepared plans, connections.
    for (const q of queries) {
      await apiSearch(setup, mode, text(q));
      await raw[mode](q);
    }
    const apiSamples: number[] = [];
    const rawSamples: number[] = [];
    for (let round = 0; round < setup.rounds; round++) {
      for (const q of queries) {
        apiSamples.push((await timed(() => apiSearch(setup, mode, text(q)))).ms);
        rawSamples.push((await timed(() => raw[mode](q))).ms);
      }
    }
    const row = { size, mode, api: percentiles(apiSamples), raw: percentiles(rawSamples) };
    progress(`search ${size}: ${mode} API p50 ${row.api.p50.toFixed(1)} ms, raw ${row.raw.p50.toFixed(1)} ms (×${(row.api.p50 / row.raw.p50).toFixed(2)})`);
    rows.push(row);
  }
  return rows;
}

/** Where one mode's requests spent their time, on average (ms): the client's wait and each phase of the server's. */
export interface BreakdownRow {
  /** The tenant's facts; null for writes (their tenant grows as they are measured). */
  size: number | null;
  /** A search mode, or the write measured (write-side.ts). */
  mode: string;
  requests: number;
  /** What the client waited, mean and p50. */
  client: { mean: number; p50: number };
  /** The server's total (its `Server-Timing`), mean. */
  server: number;
  /** Each phase's mean over the requests (0 for a request without it), in the order first seen. */
  phases: Record<string, number>;
}

/**
 * The searches of searchSideBySide, through `timedApi` (an API with MNEMO_SERVER_TIMING): one
 * untimed round, then `rounds` timed ones, averaging each phase of the answers' `Server-Timing`.
 */
export async function searchBreakdown(setup: SearchSetup, timedApi: Api, size: number, modes: readonly Mode[]): Promise<BreakdownRow[]> {
  const queries = setup.keywordQueries.map((text, i) => ({ keyword: text, semantic: semanticQuery(setup.clusters, i, text) }));
  const rows: BreakdownRow[] = [];
  for (const mode of modes) {
    const text = (q: (typeof queries)[number]) => (mode === 'keyword' ? q.keyword : q.semantic);
    for (const q of queries) await apiSearch(setup, mode, text(q), {}, timedApi);
    const client: number[] = [];
    const totals = new Map<string, number>();
    for (let round = 0; round < setup.rounds; round++) {
      for (const q of queries) {
        const { ms, value } = await timed(() => apiSearch(setup, mode, text(q), {}, timedApi));
        addServerTiming(totals, value.serverTiming);
        client.push(ms);
      }
    }
    rows.push(breakdownRow(size, mode, client, totals));
  }
  return rows;
}

/** A breakdown row from each request's client time and the sum of each phase over the requests. */
export function breakdownRow(size: number | null, mode: string, client: readonly number[], totals: ReadonlyMap<string, number>): BreakdownRow {
  const n = client.length;
  const { total = 0, ...phases } = Object.fromEntries([...totals].map(([name, sum]) => [name, sum / n]));
  const row = { size, mode, requests: n, client: { mean: client.reduce((a, b) => a + b, 0) / n, p50: percentiles(client).p50 }, server: total, phases };
  progress(`breakdown ${size ?? ''} ${mode}: client ${row.client.mean.toFixed(2)} ms, server ${total.toFixed(2)} ms (${Object.entries(phases).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')})`);
  return row;
}

/** Adds a `Server-Timing` header's phases to `totals`; throws when the API sent none. */
export function addServerTiming(totals: Map<string, number>, header: string | null): void {
  const phases = parseServerTiming(header);
  if (!phases.has('total')) throw new Error('the timed API answered no Server-Timing header: is MNEMO_SERVER_TIMING read?');
  for (const [name, ms] of phases) totals.set(name, (totals.get(name) ?? 0) + ms);
}

export interface RecallCase {
  label: string;
  tenantId: string;
  token: string;
  clusters: readonly number[];
  type?: string;
}

export interface RecallRow {
  size: number;
  label: string;
  /** Facts the filter leaves in the tenant. */
  candidates: number;
  api: number;
  /** Mean results the API returned (fewer than 10 with 10+ candidates: the search starved). */
  returned: number;
  /** Plain HNSW (no iterative scan), what a naive filtered query finds. */
  rawHnsw: number;
  queries: number;
}

export async function filteredRecall(setup: SearchSetup, size: number, cases: readonly RecallCase[], queryCount: number): Promise<RecallRow[]> {
  const { owner, space, model } = setup;
  const rows: RecallRow[] = [];
  for (const c of cases) {
    const [{ n }] = await owner<[{ n: number }]>`
      select count(*)::int as n from facts where tenant_id = ${c.tenantId} ${c.type ? owner`and type = ${c.type}` : owner``}`;
    let api = 0;
    let returned = 0;
    let naive = 0;
    for (let i = 0; i < queryCount; i++) {
      const query = semanticQuery(c.clusters, i, `recall probe ${i}`);
      const vector = space.embedText(query);
      const truth = await exactTop10(owner, model, space.dims, c.tenantId, vector, c.type);
      const { ids: found } = await apiSearch({ ...setup, token: c.token }, 'semantic', query, c.type ? { type: c.type } : {});
      api += recallAt(10, found, truth);
      returned += found.length;
      // A naive filtered HNSW query: the tenant and type filters applied after the index's ef_search candidates.
      const plain = await owner.unsafe(
        `select e.fact_id as id from fact_embeddings e join facts f on f.tenant_id = e.tenant_id and f.id = e.fact_id
         where e.tenant_id = $1 and e.model = ${literal(model)} ${c.type ? 'and f.type = $3' : ''}
         order by e.embedding::vector(${space.dims}) <=> $2::vector(${space.dims}) limit 10`,
        c.type ? [c.tenantId, pgvector.toSql(vector), c.type] : [c.tenantId, pgvector.toSql(vector)],
      );
      naive += recallAt(10, plain.map((r) => r.id as string), truth);
    }
    const row = { size, label: c.label, candidates: n, api: api / queryCount, returned: returned / queryCount, rawHnsw: naive / queryCount, queries: queryCount };
    progress(`recall ${size}: ${c.label} (${n} candidates) API ${row.api.toFixed(3)} (${row.returned.toFixed(1)} returned), plain HNSW ${row.rawHnsw.toFixed(3)}`);
    rows.push(row);
  }
  return rows;
}
