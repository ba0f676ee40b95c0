/**
 * Retrieval quality on the classic IR collections (cranfield, med, cacm): loads a collection into
 * a tenant through the real write path, runs every judged query and reports mean nDCG@10. Used by
 * the tests (on the copies in test/fixtures/ir, whose root they pass) and by `npm run bench` (on
 * the full collections under IR_ROOT).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Principal } from '../src/auth/permissions.ts';
import { type Db, withTenant } from '../src/db/client.ts';
import type { EmbeddingProvider } from '../src/embeddings/provider.ts';
import { live } from '../src/memory/facts/conditions.ts';
import { embedPending, type ModelInfo } from '../src/memory/facts/vectors.ts';
import { writeFact } from '../src/memory/facts/insert.ts';
import { keywordSearch, type RankedId } from '../src/memory/retrieval/keyword.ts';
import { FUSION_DEPTH, fuse } from '../src/memory/retrieval/fusion.ts';
import { type QueryEmbedder, type RetrievalCaller, retrieve } from '../src/memory/retrieval/retrieve.ts';
import { semanticSearch } from '../src/memory/retrieval/semantic.ts';

/**
 * Where `npm run bench` reads the full collections: `--ir-data=<dir>`, else MNEMO_IR_DATA, else
 * ../shared/data/ir beside the repository. Nothing else reads from there.
 */
export const IR_ROOT =
  process.argv.find((arg) => arg.startsWith('--ir-data='))?.slice('--ir-data='.length) ??
  process.env.MNEMO_IR_DATA ??
  join(import.meta.dirname, '../../shared/data/ir');

export interface Collection {
  name: string;
  docs: { id: string; title: string; text: string }[];
  queries: { id: string; text: string }[];
  /** query id → doc id → relevance (0 marks a doc to leave out of that query's ranking). */
  qrels: Map<string, Map<string, number>>;
}

const jsonl = <T>(path: string): T[] =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as T);

/** The collection `name` under `root` (docs.jsonl, queries.jsonl with its judged queries only, qrels.tsv). */
export function loadCollection(name: string, root: string): Collection {
  const dir = join(root, name);
  const qrels = new Map<string, Map<string, number>>();
  for (const line of readFileSync(join(dir, 'qrels.tsv'), 'utf8').split('\n')) {
    const [query, doc, relevance] = line.trim().split('\t');
    if (!query || !doc || relevance === undefined) continue;
    if (!qrels.has(query)) qrels.set(query, new Map());
    qrels.get(query)!.set(doc, Number(relevance));
  }
  return {
    name,
    docs: jsonl(join(dir, 'docs.jsonl')),
    queries: jsonl<{ id: string; text: string }>(join(dir, 'queries.jsonl')).filter((q) => qrels.has(q.id)),
    qrels,
  };
}

/**
 * Writes every document as a fact (`ir.doc` unless `typeOf` says otherwise, content {title, text});
 * returns fact id → doc id.
 */
export async function indexCollection(
  db: Db,
  principal: Principal,
  collection: Pick<Collection, 'docs'>,
  options: { typeOf?: (doc: Collection['docs'][number], index: number) => string; onProgress?: (written: number) => void } = {},
): Promise<Map<string, string>> {
  const { typeOf = () => 'ir.doc', onProgress } = options;
  const docOf = new Map<string, string>();
  for (const [index, doc] of collection.docs.entries()) {
    const fact = await writeFact({ db, principal }, { type: typeOf(doc, index), content: { title: doc.title, text: doc.text } });
    docOf.set(fact.id, doc.id);
    onProgress?.(index + 1);
  }
  return docOf;
}

/** nDCG@k with linear gains, as trec_eval computes it. */
export function ndcgAt(k: number, ranked: readonly string[], judgments: ReadonlyMap<string, number>): number {
  const dcg = ranked.slice(0, k).reduce((sum, doc, i) => sum + (judgments.get(doc) ?? 0) / Math.log2(i + 2), 0);
  const ideal = [...judgments.values()]
    .filter((g) => g > 0)
    .sort((a, b) => b - a)
    .slice(0, k)
    .reduce((sum, gain, i) => sum + gain / Math.log2(i + 2), 0);
  return ideal === 0 ? 0 : dcg / ideal;
}

export type RankFn = (query: string, depth: number) => Promise<string[]>;

/**
 * Mean nDCG@10 of a ranking function (fact ids, best first) over the collection's judged
 * queries. Documents judged 0 for a query (cranfield: the one it was written from) are left
 * out of that query's ranking.
 */
export async function meanNdcg10(collection: Collection, docOf: ReadonlyMap<string, string>, rank: RankFn): Promise<number> {
  let total = 0;
  for (const query of collection.queries) {
    const judgments = collection.qrels.get(query.id)!;
    const excluded = [...judgments].filter(([, gain]) => gain === 0).length;
    const ranked = (await rank(query.text, 10 + excluded))
      .map((id) => docOf.get(id)!)
      .filter((doc) => judgments.get(doc) !== 0)
      .slice(0, 10);
    total += ndcgAt(10, ranked, judgments);
  }
  return total / collection.queries.length;
}

/**
 * Embeds every live fact of `tenantId` that lacks a vector of `model`, batch by batch, as the
 * embed jobs do (without BullMQ). Returns how many facts were embedded. Stops with an error
 * rather than loop forever when the same facts keep coming back (vectors that were not stored).
 */
export async function embedAll(
  db: Db,
  provider: EmbeddingProvider,
  tenantId: string,
  model: ModelInfo,
  options: { batch?: number; expected?: number; onProgress?: (embedded: number) => void } = {},
): Promise<number> {
  const { batch = 64, expected, onProgress } = options;
  let embedded = 0;
  for (;;) {
    const n = await embedPending(db, provider, tenantId, model, { batch });
    if (n === 0) return embedded;
    embedded += n;
    onProgress?.(embedded);
    if (expected !== undefined && embedded > expected + batch) {
      throw new Error(`embedded ${embedded} facts for ${expected} expected: vectors are not being stored`);
    }
  }
}

/** A query embedder for retrieve() backed by one provider (queries of another model are refused). */
export function embedderFor(provider: EmbeddingProvider): QueryEmbedder {
  return {
    async embed(model, text) {
      if (model !== provider.model) throw new Error(`query embedder has model ${provider.model}, asked for ${model}`);
      return (await provider.embed([text]))[0]!;
    },
  };
}

export type SearchMode = 'keyword' | 'semantic' | 'both';
export const SEARCH_MODES: readonly SearchMode[] = ['keyword', 'semantic', 'both'];

/**
 * A RankFn through the real retrieve() (visibility, live, fusion, fact loading). Fails when the
 * search degraded (no embeddings, model pending, endpoint down): a silent fallback to keyword
 * would report keyword figures as semantic or fused ones.
 */
export function retrieveRanker(ctx: RetrievalCaller, mode: SearchMode): RankFn {
  return async (query, depth) => {
    const { results, journal } = await retrieve(ctx, { mode, query, limit: depth });
    if (journal.degraded) throw new Error(`retrieve(${mode}) degraded: ${journal.degraded}`);
    return results.map((r) => r.fact.id);
  };
}

/** The p-th percentile (0..100) of samples, nearest-rank. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Recall@k of `found` against the exact answer `truth` (both best first): |found ∩ truth[:k]| / |truth[:k]|. */
export function recallAt(k: number, found: readonly string[], truth: readonly string[]): number {
  const expected = truth.slice(0, k);
  if (expected.length === 0) return 1;
  const got = new Set(found.slice(0, k));
  return expected.filter((id) => got.has(id)).length / expected.length;
}

export interface FusionVariant {
  k: number;
  semanticWeight: number;
}

/** Each judged query's keyword and semantic lists, as retrieve() computes them for mode "both". */
export type FusionLists = Map<string, { keyword: RankedId[]; semantic: RankedId[] }>;

/** The keyword and semantic lists of every judged query, each `depth` deep (computed once, fused many ways). */
export async function fusionLists(
  ctx: RetrievalCaller & { embedder: QueryEmbedder },
  model: ModelInfo,
  collection: Collection,
  depth = FUSION_DEPTH,
): Promise<FusionLists> {
  const lists: FusionLists = new Map();
  for (const query of collection.queries) {
    const vector = await ctx.embedder.embed(model.model, query.text);
    lists.set(
      query.text,
      await withTenant(ctx.db, ctx.principal.tenantId, async (tx) => ({
        keyword: await keywordSearch(tx, ctx.principal, query.text, [live()], depth),
        semantic: await semanticSearch(tx, ctx.principal, model, vector, [live()], depth),
      })),
    );
  }
  return lists;
}

/** Mean nDCG@10 of RRF (fuse()) over precomputed lists, keyword weight 1. */
export function fusedNdcg(
  collection: Collection,
  docOf: ReadonlyMap<string, string>,
  lists: FusionLists,
  { k, semanticWeight }: FusionVariant,
): Promise<number> {
  return meanNdcg10(collection, docOf, async (query, limit) => {
    const { keyword, semantic } = lists.get(query)!;
    return fuse([{ ranked: keyword, weight: 1 }, { ranked: semantic, weight: semanticWeight }], k)
      .slice(0, limit)
      .map((r) => r.id);
  });
}

/** Mean nDCG@10 of one list alone (keyword or semantic) over precomputed lists. */
export function singleListNdcg(
  collection: Collection,
  docOf: ReadonlyMap<string, string>,
  lists: FusionLists,
  which: 'keyword' | 'semantic',
): Promise<number> {
  return meanNdcg10(collection, docOf, async (query, limit) =>
    lists
      .get(query)!
      [which].slice(0, limit)
      .map((r) => r.id),
  );
}

/**
 * Mean nDCG@10 of RRF variants over the same two lists per query (keyword and semantic, each
 * `depth` deep, as retrieve() computes them for mode "both"), fused with fuse() and another k or
 * semantic weight. For comparing fusion settings.
 */
export async function fusionSweep(
  ctx: RetrievalCaller & { embedder: QueryEmbedder },
  model: ModelInfo,
  collection: Collection,
  docOf: ReadonlyMap<string, string>,
  variants: readonly FusionVariant[],
  depth = FUSION_DEPTH,
): Promise<number[]> {
  const lists = await fusionLists(ctx, model, collection, depth);
  const scores: number[] = [];
  for (const variant of variants) scores.push(await fusedNdcg(collection, docOf, lists, variant));
  return scores;
}
