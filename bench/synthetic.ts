/**
 * Synthetic data for the side-by-side bench (bench/side-by-side.ts): realistic text recombined
 * from the IR collections' sentences, and vectors that are unique and clustered.
 *
 * Why clustered and unique: identical vectors make HNSW artificially cheap (the graph collapses)
 * and uniform random ones make it artificially hard (no neighbourhoods). Every vector here is a
 * cluster centroid plus its own gaussian noise. Which cluster a text lands in is either named by
 * the text (`cluster-17 …`, for queries and for the embedding endpoint the API calls) or chosen
 * by the loader per tenant, so a tenant can be made to sit in another tenant's clusters.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pgvector from 'pgvector';
import type { Sql } from 'postgres';

export const CLUSTERS = 200;
/** How far a point sits from its centroid (relative to the unit centroid). */
const SPREAD = 0.55;

/** A deterministic PRNG (mulberry32) so a run's data is the same for every size and rerun. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function gaussian(random: () => number): number {
  const u = Math.max(random(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

const normalize = (v: number[]) => {
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return v.map((x) => x / norm);
};

export class VectorSpace {
  readonly centroids: number[][];
  constructor(readonly dims: number) {
    const random = prng(12);
    this.centroids = Array.from({ length: CLUSTERS }, () => normalize(Array.from({ length: dims }, () => gaussian(random))));
  }

  /** A unit vector in `cluster`, unique for each seed. */
  point(cluster: number, seed: number): number[] {
    const random = prng(seed);
    const centroid = this.centroids[cluster % CLUSTERS]!;
    const scale = SPREAD / Math.sqrt(this.dims);
    return normalize(centroid.map((c) => c + gaussian(random) * scale));
  }

  /** The vector of a text as the fake endpoint answers it: `cluster-<k>` in the text picks the cluster. */
  embedText(text: string): number[] {
    const seed = createHash('sha256').update(text).digest().readUInt32LE(0);
    const named = /cluster-(\d+)/.exec(text);
    return this.point(named ? Number(named[1]) : seed % CLUSTERS, seed);
  }
}

/** Sentences of the IR collections' documents, for text that reads like documents. */
export function loadSentences(irRoot: string): string[] {
  const sentences: string[] = [];
  for (const name of ['cranfield', 'med', 'cacm']) {
    let raw: string;
    try {
      raw = readFileSync(join(irRoot, name, 'docs.jsonl'), 'utf8');
    } catch {
      continue;
    }
    for (const line of raw.split('\n')) {
      if (!line.trim()) continue;
      const doc = JSON.parse(line) as { title?: string; text: string };
      for (const sentence of `${doc.title ?? ''} . ${doc.text}`.split(/\s\.\s|\.\s/)) {
        const words = sentence.trim().split(/\s+/).length;
        if (words >= 5 && words <= 60) sentences.push(sentence.trim());
      }
    }
  }
  if (sentences.length < 100) throw new Error(`found ${sentences.length} sentences under ${irRoot}: pass --ir-data=<dir> (cranfield, med, cacm)`);
  return sentences;
}

/** Queries of the IR collections: realistic keyword queries (several terms, common and rare). */
export function loadQueries(irRoot: string, count: number): string[] {
  const queries: string[] = [];
  for (const name of ['cranfield', 'med', 'cacm']) {
    try {
      for (const line of readFileSync(join(irRoot, name, 'queries.jsonl'), 'utf8').split('\n')) {
        if (line.trim()) queries.push((JSON.parse(line) as { text: string }).text.replace(/\s+/g, ' ').trim().slice(0, 300));
      }
    } catch {
      continue;
    }
  }
  const random = prng(7);
  const picked: string[] = [];
  while (picked.length < Math.min(count, queries.length)) {
    const q = queries[Math.floor(random() * queries.length)]!;
    if (!picked.includes(q)) picked.push(q);
  }
  return picked;
}

export function textFor(sentences: readonly string[], seed: number): string {
  const random = prng(seed * 2654435761);
  const n = 2 + Math.floor(random() * 3);
  return Array.from({ length: n }, () => sentences[Math.floor(random() * sentences.length)]!).join('. ');
}

/** Fact types by selectivity: the filtered-recall queries filter on the rare ones. */
export const RARE_TYPES = { 'bench.rare2': 0.02, 'bench.rare01': 0.001 } as const;

function typeFor(index: number): string {
  // Every 50th fact is 2% and every 1000th (offset so they never coincide) is 0.1%.
  if (index % 1000 === 500) return 'bench.rare01';
  if (index % 50 === 7) return 'bench.rare2';
  return 'bench.note';
}

export interface TenantLoad {
  tenantId: string;
  /** Index of the first and one past the last fact to load (a tenant grows across sizes). */
  from: number;
  to: number;
  /** The clusters its vectors fall in. */
  clusters: readonly number[];
  seedBase: number;
}

/**
 * Loads facts (with their first revision) and their vectors of `model` as the owner, in
 * multi-row inserts of 1,000 in one transaction per chunk. Vectors are version 1, current.
 */
export async function loadFacts(
  owner: Sql,
  space: VectorSpace,
  sentences: readonly string[],
  model: string,
  load: TenantLoad,
  onProgress?: (done: number) => void,
): Promise<void> {
  await owner`insert into tenants (id) values (${load.tenantId}) on conflict do nothing`;
  const chunk = 1000;
  for (let start = load.from; start < load.to; start += chunk) {
    const end = Math.min(load.to, start + chunk);
    const rows: Record<string, unknown>[] = [];
    const vectors: Record<string, unknown>[] = [];
    for (let i = start; i < end; i++) {
      const seed = load.seedBase + i;
      const id = uuidFor(load.tenantId, i);
      const content = { text: textFor(sentences, seed) };
      const base = {
        tenant_id: load.tenantId,
        type: typeFor(i),
        content,
        trust: 'asserted',
        asserted_by_kind: 'service',
        asserted_by_id: 'bench',
        created_at: new Date(),
      };
      rows.push({ ...base, id, version: 1 });
      vectors.push({
        tenant_id: load.tenantId,
        fact_id: id,
        model,
        version: 1,
        dims: space.dims,
        embedding: pgvector.toSql(space.point(load.clusters[i % load.clusters.length]!, seed)),
      });
    }
    await owner.begin(async (tx) => {
      await tx`insert into facts ${tx(rows as never)}`;
      await tx`insert into fact_revisions ${tx(rows.map(({ id, ...rest }) => ({ ...rest, fact_id: id })) as never)}`;
      await tx`insert into fact_embeddings ${tx(vectors as never)}`;
    });
    onProgress?.(end);
  }
}

/** A stable uuid per (tenant, index), so growing a tenant never collides with what is there. */
export function uuidFor(tenantId: string, index: number): string {
  const h = createHash('md5').update(`${tenantId}/${index}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
