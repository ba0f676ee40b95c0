/**
 * Retrieval quality on the classic IR collections in shared/data/ir (cranfield, med, cacm):
 * loads a collection into a tenant through the real write path, runs every judged query and
 * reports mean nDCG@10. Used by the test suite (med) and by `npm run bench` (all three).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Principal } from '../src/auth/permissions.ts';
import type { Db } from '../src/db/client.ts';
import { writeFact } from '../src/memory/facts.ts';

export const IR_ROOT = process.env.MNEMO_IR_DATA ?? join(import.meta.dirname, '../../shared/data/ir');

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

export function loadCollection(name: string, root = IR_ROOT): Collection {
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

/** Writes every document as a fact (`ir.doc`, content {title, text}); returns fact id → doc id. */
export async function indexCollection(db: Db, principal: Principal, collection: Collection): Promise<Map<string, string>> {
  const docOf = new Map<string, string>();
  for (const doc of collection.docs) {
    const fact = await writeFact({ db, principal }, { type: 'ir.doc', content: { title: doc.title, text: doc.text } });
    docOf.set(fact.id, doc.id);
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
