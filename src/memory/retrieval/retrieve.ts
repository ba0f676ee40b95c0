/**
 * `POST /v1/memory/retrieve` (DESIGN §5): list, keyword, semantic, or both fused by reciprocal
 * rank fusion. Every mode returns only facts the principal can see that are live and, with
 * `validAt`, valid then; all of it is in the SQL of each search.
 */
import { and, desc, eq, isNull, type SQL } from 'drizzle-orm';
import { visibleTo } from '../../auth/permissions.ts';
import { type Caller, inTenantTransaction } from '../../core/caller.ts';
import { ScopeMismatch } from '../../core/errors.ts';
import { type Tx, withTenant } from '../../db/client.ts';
import { facts } from '../../db/schema.ts';
import { EmbeddingsUnavailable } from '../../embeddings/provider.ts';
import { semanticWeightOf } from '../../embeddings/registry.ts';
import { AppError } from '../../foundation/app-error.ts';
import { retrievalDuration } from '../../foundation/metrics.ts';
import { phase } from '../../foundation/request-timing.ts';
import { appliesIn, live, namesSubject, typeIn, validAt } from '../facts/conditions.ts';
import { factsAsOf, factsByIds } from '../facts/read.ts';
import type { Fact } from '../facts/schemas.ts';
import { type ModelInfo, servingModel } from '../facts/vectors.ts';
import { withNeighbours } from './expand.ts';
import { FUSION_DEPTH, fuse } from './fusion.ts';
import { keywordSearch, type RankedId } from './keyword.ts';
import { type Journal, RETRIEVE_LIMIT_DEFAULT, type RetrievalMode, type RetrieveBody, type RetrieveResult } from './schemas.ts';
import { semanticSearch } from './semantic.ts';

export const SEMANTIC_UNAVAILABLE_MESSAGE =
  'Mode "semantic" searches by meaning, and this runtime has no embeddings. An operator turns them on with KINDGI_MEMORY_EMBEDDINGS; until then use "keyword".';

/** Embeds a search query with a given model (the serving model, which may not be the configured one during a switch). */
export interface QueryEmbedder {
  embed(model: string, text: string): Promise<number[]>;
  /** The model's weight in `both` (DESIGN §5); absent, the measured default of a known model, else 1. */
  semanticWeight?(model: string): number;
}

export interface RetrievalCaller extends Caller {
  /** Absent when this runtime has no embeddings. */
  embedder?: QueryEmbedder | undefined;
}

type Degraded = NonNullable<Journal['degraded']>;

/** The query embedded with the model that served when the search started, or why there is none. */
type QueryVector = { model: ModelInfo; vector: number[] } | { degraded: Degraded };

/** The semantic list, with the model whose vectors it searched, or why there is none. */
type SemanticList = { model: ModelInfo; ranked: RankedId[] } | { degraded: Degraded };

const ENDPOINT_DOWN_MESSAGE = 'The embeddings endpoint is not answering; try again, or use mode "keyword"';

export async function retrieve(caller: RetrievalCaller, body: RetrieveBody): Promise<RetrieveResult> {
  const started = performance.now();
  const mode = body.mode ?? 'both';
  const limit = body.limit ?? RETRIEVE_LIMIT_DEFAULT;
  const { tenantId: scopeTenant, ...scope } = body.scope ?? {};
  if (scopeTenant !== undefined && scopeTenant !== caller.principal.tenantId) throw new ScopeMismatch();
  if (mode === 'semantic' && !caller.embedder) throw new AppError('semantic-unavailable', SEMANTIC_UNAVAILABLE_MESSAGE);

  const filters: SQL[] = typeIn(facts.type, body.type, body.types);
  if (body.scope) filters.push(appliesIn(scope));
  if (body.validAt) filters.push(validAt(facts, new Date(body.validAt)));
  if (body.trust) filters.push(eq(facts.trust, body.trust));
  if (body.memoryKind) filters.push(eq(facts.memoryKind, body.memoryKind));
  if (body.subjectKind && body.subjectId) filters.push(namesSubject(facts.subjects, body.subjectKind, body.subjectId));
  // Held for review (an agent remembered text that reads like an instruction): no mode returns
  // it until a person verifies it (src/memory/remember/remember.ts).
  const corpus: SQL[] = [live(), notHeldForReview, ...filters];
  // Whether the searchable facts may be a small part of the tenant's: the semantic search then
  // counts them exactly before choosing its strategy (semantic.ts).
  const narrowed = filters.length > 0 || caller.principal.role !== 'admin';
  const searchable = and(visibleTo(caller.principal, facts), ...corpus)!;
  // Each statement names the tenant besides row-level security: on Citus that routes it to the
  // tenant's one shard (issue 16). The searches and factsByIds add it themselves.
  const { tenantId } = caller.principal;
  // With `expand` each hit gains `before` and `after` (expand.ts); without it the answer is as it was.
  const expanded = async (tx: Tx, hits: { fact: Fact; score: number | null }[]): Promise<RetrieveResult['results']> =>
    body.expand === undefined ? hits : withNeighbours(tx, caller.principal, hits, body.expand);
  // Every answer passes here once: the metric and the journal tell the same time.
  const finish = (journal: Omit<Journal, 'tookMs'>, results: RetrieveResult['results']): RetrieveResult => {
    const tookMs = performance.now() - started;
    retrievalDuration.observe({ mode }, tookMs / 1000);
    return { results, journal: { ...journal, tookMs: Math.round(tookMs * 10) / 10 } };
  };

  if (mode === 'list' && body.asOf !== undefined) {
    // History: each fact as it was then (the list route's asOf), among the facts that apply in
    // the scope. A hold follows the revision it judged (docs/guide/review.md): a revision held when it
    // was written stays out, although a later one released the fact; a fact held now stays out
    // whole, as it does from every search.
    return inTenantTransaction(caller, async (tx) => {
      const released = { ...body, review: null };
      const found = await factsAsOf(tx, caller.principal, released, and(notHeldForReview, body.scope ? appliesIn(scope) : undefined), limit);
      return finish({ mode }, found.map((fact) => ({ fact, score: null })));
    }, SNAPSHOT);
  }

  if (mode === 'list') {
    return inTenantTransaction(caller, async (tx) => {
      const rows = await tx
        .select({ id: facts.id })
        .from(facts)
        .where(and(eq(facts.tenantId, tenantId), searchable))
        .orderBy(desc(facts.id))
        .limit(limit);
      const found = await factsByIds(tx, tenantId, rows.map((r) => r.id));
      return finish({ mode }, await expanded(tx, rows.map((r) => ({ fact: found.get(r.id)!, score: null }))));
    }, SNAPSHOT);
  }

  const query = body.query!;
  const depth = mode === 'both' ? Math.max(FUSION_DEPTH, limit) : limit;
  const floor = scoreFloors(mode, body.minScore);
  const keyword = async (tx: Tx) => atLeast(await keywordSearch(tx, caller.principal, query, corpus, depth), floor.keyword);
  const semantic = async (tx: Tx, embedded: QueryVector): Promise<SemanticList> => {
    const list = await semanticList(caller, tx, query, embedded, corpus, depth, narrowed);
    return 'degraded' in list ? list : { ...list, ranked: atLeast(list.ranked, floor.semantic) };
  };
  // The query is embedded before the semantic search takes a connection (and while the keyword
  // search of `both` runs): a slow endpoint must not hold a database connection.
  const embedded = mode === 'keyword' ? undefined : phase('embed-query', () => embedQuery(caller, query));

  /**
   * The facts of the fused or single list, best first, loaded in one statement; with `expand`,
   * their neighbours in one more, in the same transaction.
   */
  const load = async (tx: Tx, ranked: RankedId[], journal: Omit<Journal, 'tookMs'>) => {
    const top = ranked.slice(0, limit);
    const found = await phase('load-facts', () => factsByIds(tx, tenantId, top.map((r) => r.id), searchable));
    const hits = top.flatMap((r) => (found.has(r.id) ? [{ fact: found.get(r.id)!, score: r.score }] : []));
    return finish(journal, await phase('expand', () => expanded(tx, hits)));
  };

  if (mode === 'keyword') return inTenantTransaction(caller, async (tx) => load(tx, await keyword(tx), { mode }), SNAPSHOT, PREPARED);

  if (mode === 'semantic') {
    const vector = await embedded!;
    if ('degraded' in vector && vector.degraded === 'embeddings-unavailable') throw new AppError('unavailable', ENDPOINT_DOWN_MESSAGE);
    // Read committed (no `set transaction` round trip): the search is one statement, and the load filters again.
    return inTenantTransaction(caller, async (tx) => {
      const list = await semantic(tx, vector);
      if (!('degraded' in list)) return load(tx, list.ranked, { mode, embeddingModel: list.model.model });
      if (list.degraded === 'embeddings-unavailable') throw new AppError('unavailable', ENDPOINT_DOWN_MESSAGE);
      return finish({ mode, degraded: list.degraded }, []);
    }, undefined, PREPARED);
  }

  const fuseAndLoad = (tx: Tx, keywordList: RankedId[], list: SemanticList) => {
    if ('degraded' in list) {
      // Keyword alone, by its own scores: the semantic list took no part.
      return load(tx, keywordList, { mode, degraded: list.degraded, weights: { keyword: body.weights?.keyword ?? 1, semantic: 0 } });
    }
    const model = list.model.model;
    const weights = {
      keyword: body.weights?.keyword ?? 1,
      semantic: body.weights?.semantic ?? caller.embedder?.semanticWeight?.(model) ?? semanticWeightOf(model),
    };
    const ranked = fuse([
      { ranked: keywordList, weight: weights.keyword },
      { ranked: list.ranked, weight: weights.semantic },
    ]);
    return load(tx, ranked, { mode, embeddingModel: model, weights });
  };

  if (caller.tx) {
    // A transaction given (and so one connection): the two searches one after the other.
    const tx = caller.tx;
    const vector = await embedded!;
    return fuseAndLoad(tx, await keyword(tx), await semantic(tx, vector));
  }
  return bothConcurrently(caller, keyword, embedded!, semantic, fuseAndLoad);
}

const notHeldForReview = isNull(facts.review);

/** The floor of each search's own score (DESIGN §5): a number names the mode's one search. */
function scoreFloors(mode: RetrievalMode, minScore: RetrieveBody['minScore']): { keyword?: number | undefined; semantic?: number | undefined } {
  if (minScore === undefined) return {};
  if (typeof minScore === 'object') return minScore;
  return mode === 'keyword' ? { keyword: minScore } : { semantic: minScore };
}

/** A ranked list cut where its scores fall below the floor (each list is best first). */
const atLeast = (ranked: RankedId[], floor: number | undefined) => (floor === undefined ? ranked : ranked.filter((r) => r.score >= floor));

/** For what reads in more than one statement (keyword's statistics and scores, a list and its facts). */
const SNAPSHOT = { isolationLevel: 'repeatable read', accessMode: 'read only' } as const;

/**
 * Searches prepare their statements: their text is long and the same from one query to the next,
 * and a prepared statement is parsed once per connection and sent in one round trip instead of
 * two (semantic at 100k facts: 8.5 → 5.0 ms in-process). Their plans still follow each query's
 * parameters (a term's frequency, a tenant's size): each search sets `plan_cache_mode =
 * force_custom_plan` for its transaction before its first prepared statement (semantic.ts,
 * keyword.ts), so no generic plan is ever used.
 */
const PREPARED = { prepared: true } as const;

/**
 * The keyword and semantic searches of `both` at once, each in a transaction of its own connection
 * under the tenant (row-level security applies to both); the semantic half opens its
 * transaction only once the query is embedded. Whichever finishes second fuses and loads the facts
 * in its still open transaction, so no connection sits idle waiting for the other. The snapshots
 * may differ by the milliseconds between them: the load filters the ids again (visible, live,
 * valid), so a fact deleted in between is left out rather than shown deleted.
 */
async function bothConcurrently(
  caller: RetrievalCaller,
  keyword: (tx: Tx) => Promise<RankedId[]>,
  embedded: Promise<QueryVector>,
  semantic: (tx: Tx, vector: QueryVector) => Promise<SemanticList>,
  fuseAndLoad: (tx: Tx, keyword: RankedId[], semantic: SemanticList) => Promise<RetrieveResult>,
): Promise<RetrieveResult> {
  let keywordList: RankedId[] | undefined;
  let semanticResult: SemanticList | undefined;
  const lastLoads = (tx: Tx) => (keywordList && semanticResult ? fuseAndLoad(tx, keywordList, semanticResult) : undefined);
  const open = <T>(fn: (tx: Tx) => Promise<T>, config?: typeof SNAPSHOT) => withTenant(caller.db, caller.principal.tenantId, fn, config, PREPARED);
  const [first, second] = await Promise.all([
    open(async (tx) => {
      keywordList = await keyword(tx);
      return lastLoads(tx);
    }, SNAPSHOT),
    embedded.then((vector) =>
      open(async (tx) => {
        semanticResult = await semantic(tx, vector);
        return lastLoads(tx);
      }),
    ),
  ]);
  return (first ?? second)!;
}

/**
 * The model that served the last search on each database handle. A search embeds its query with
 * it before taking a connection, and its snapshot checks it (semanticList), so a stale entry costs
 * one more embedding call after a switch, never a wrong answer; it saves a read per search.
 */
const lastServing = new WeakMap<object, ModelInfo>();

/** Embeds the query with the serving model, before any search holds a connection. */
async function embedQuery(caller: RetrievalCaller, query: string): Promise<QueryVector> {
  if (!caller.embedder) return { degraded: 'no-embeddings' };
  // `embedding_models` is not per tenant: one statement, no transaction.
  const model = lastServing.get(caller.db) ?? (await servingModel(caller.db));
  if (!model) return { degraded: 'embeddings-pending' };
  return embedWith(caller.embedder, model, query);
}

async function embedWith(embedder: QueryEmbedder, model: ModelInfo, query: string): Promise<QueryVector> {
  try {
    return { model, vector: await embedder.embed(model.model, query) };
  } catch (error) {
    if (error instanceof EmbeddingsUnavailable) return { degraded: 'embeddings-unavailable' };
    throw error;
  }
}

/**
 * The semantic list. Its search statement also reads the serving model, in the same snapshot as the
 * vectors, so a model switch that committed while the query was being embedded (which deletes the
 * old model's vectors) cannot go unnoticed and empty the answer: the query is then embedded again
 * with the model that serves now. That is rare, and only then does a connection wait on the endpoint.
 */
async function semanticList(
  caller: RetrievalCaller,
  tx: Tx,
  query: string,
  embedded: QueryVector,
  corpus: SQL[],
  depth: number,
  narrowed: boolean,
): Promise<SemanticList> {
  if ('degraded' in embedded) return embedded;
  // The search statement also reads the serving model, in its own snapshot.
  const ranked = await phase('semantic-search', () => semanticSearch(tx, caller.principal, embedded.model, embedded.vector, corpus, depth, { narrowed }));
  if (ranked.servingModel === embedded.model.model) {
    lastServing.set(caller.db, embedded.model);
    return { model: embedded.model, ranked };
  }
  const model = await servingModel(tx);
  if (!model) {
    lastServing.delete(caller.db);
    return { degraded: 'embeddings-pending' };
  }
  lastServing.set(caller.db, model);
  const again = await embedWith(caller.embedder!, model, query);
  if ('degraded' in again) return again;
  return { model, ranked: await semanticSearch(tx, caller.principal, model, again.vector, corpus, depth, { narrowed }) };
}
