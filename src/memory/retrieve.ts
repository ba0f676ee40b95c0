/**
 * `POST /v1/memory/retrieve` (DESIGN §5): list, keyword, semantic, or both fused by reciprocal
 * rank fusion. Every mode returns only facts the principal can see that are live and, with
 * `validAt`, valid then; all of it is in the SQL of each search.
 */
import { and, desc, type SQL } from 'drizzle-orm';
import { visibleTo } from '../auth/permissions.ts';
import { facts } from '../db/schema.ts';
import { EmbeddingsUnavailable } from '../embeddings/provider.ts';
import { AppError } from '../errors.ts';
import { appliesIn, live, typeIn, validAt } from './conditions.ts';
import { type MemoryContext, inTenantTransaction } from './context.ts';
import { servingModel } from './embeddings.ts';
import { ScopeMismatch } from './errors.ts';
import { factsByIds } from './facts.ts';
import { keywordSearch, type RankedId } from './keyword.ts';
import { type Fact, type Journal, RETRIEVE_LIMIT_DEFAULT, type RetrieveBody, type RetrieveResult } from './schemas.ts';
import { semanticSearch } from './semantic.ts';

/** RRF's k, and the least depth of each list fused (100 beat 40 on every measure when one list was weak). */
export const RRF_K = 60;
export const FUSION_DEPTH = 100;

export const SEMANTIC_UNAVAILABLE_MESSAGE =
  'Mode "semantic" searches by meaning, and this runtime has no embeddings. An operator turns them on with KINDGI_MEMORY_EMBEDDINGS; until then use "keyword".';

/** Embeds a search query with a given model (the serving model, which may not be the configured one during a switch). */
export interface QueryEmbedder {
  embed(model: string, text: string): Promise<number[]>;
}

export interface RetrievalContext extends MemoryContext {
  /** Absent when this runtime has no embeddings. */
  embedder?: QueryEmbedder | undefined;
}

/**
 * Reciprocal rank fusion: `score = Σ w / (k + rank)`, ranks from 1 in each list. Equal scores keep
 * the order in which the lists first saw them (the first list before the second).
 */
export function fuse(lists: readonly { ranked: readonly RankedId[]; weight: number }[], k = RRF_K): RankedId[] {
  const scores = new Map<string, { score: number; seen: number }>();
  let seen = 0;
  for (const { ranked, weight } of lists) {
    ranked.forEach(({ id }, index) => {
      const entry = scores.get(id) ?? { score: 0, seen: seen++ };
      entry.score += weight / (k + index + 1);
      scores.set(id, entry);
    });
  }
  return [...scores]
    .sort(([, a], [, b]) => b.score - a.score || a.seen - b.seen)
    .map(([id, { score }]) => ({ id, score }));
}

export async function retrieve(ctx: RetrievalContext, body: RetrieveBody): Promise<RetrieveResult> {
  const started = performance.now();
  const mode = body.mode ?? 'both';
  const limit = body.limit ?? RETRIEVE_LIMIT_DEFAULT;
  const { tenantId: scopeTenant, ...scope } = body.scope ?? {};
  if (scopeTenant !== undefined && scopeTenant !== ctx.principal.tenantId) throw new ScopeMismatch();
  if (mode === 'semantic' && !ctx.embedder) throw new AppError('semantic-unavailable', SEMANTIC_UNAVAILABLE_MESSAGE);

  const corpus: SQL[] = [live(), ...typeIn(facts.type, body.type, body.types)];
  if (body.scope) corpus.push(appliesIn(scope));
  if (body.validAt) corpus.push(validAt(facts, new Date(body.validAt)));

  // One snapshot for the whole search: the serving model and its vectors are read together, so a
  // model switch committing meanwhile (which deletes the old vectors) cannot empty the answer.
  return inTenantTransaction(ctx, async (tx) => {
    const journal: Omit<Journal, 'tookMs'> = { mode };
    let ranked: RankedId[] | null;

    if (mode === 'list') {
      const rows = await tx
        .select({ id: facts.id })
        .from(facts)
        .where(and(visibleTo(ctx.principal, facts), ...corpus))
        .orderBy(desc(facts.id))
        .limit(limit);
      const found = await factsByIds(tx, rows.map((r) => r.id));
      return finish(rows.map((r) => ({ fact: found.get(r.id)!, score: null })));
    }

    const depth = mode === 'both' ? Math.max(FUSION_DEPTH, limit) : limit;
    const keyword = mode === 'semantic' ? [] : await keywordSearch(tx, ctx.principal, body.query!, corpus, depth);

    let semantic: RankedId[] | undefined;
    if (mode !== 'keyword') {
      if (!ctx.embedder) {
        journal.degraded = 'no-embeddings';
      } else {
        const model = await servingModel(tx);
        if (!model) {
          journal.degraded = 'embeddings-pending';
        } else {
          journal.embeddingModel = model.model;
          try {
            const vector = await ctx.embedder.embed(model.model, body.query!);
            semantic = await semanticSearch(tx, ctx.principal, model, vector, corpus, depth);
          } catch (error) {
            if (!(error instanceof EmbeddingsUnavailable)) throw error;
            if (mode === 'semantic') throw new AppError('unavailable', 'The embeddings endpoint is not answering; try again, or use mode "keyword"');
            journal.degraded = 'embeddings-unavailable';
          }
        }
      }
    }

    if (mode === 'keyword') ranked = keyword;
    else if (mode === 'semantic') ranked = semantic ?? [];
    else if (semantic === undefined) ranked = keyword;
    else {
      ranked = fuse([
        { ranked: keyword, weight: body.weights?.keyword ?? 1 },
        { ranked: semantic, weight: body.weights?.semantic ?? 1 },
      ]);
    }
    const top = ranked.slice(0, limit);
    const found = await factsByIds(tx, top.map((r) => r.id));
    return finish(top.map((r) => ({ fact: found.get(r.id)!, score: r.score })));

    function finish(results: { fact: Fact; score: number | null }[]): RetrieveResult {
      return { results, journal: { ...journal, tookMs: Math.round((performance.now() - started) * 10) / 10 } };
    }
  }, SNAPSHOT);
}

const SNAPSHOT = { isolationLevel: 'repeatable read', accessMode: 'read only' } as const;
