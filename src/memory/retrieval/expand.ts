/**
 * `expand: {before?, after?}` on retrieve and context (DESIGN §5, "Conversations";
 * docs/decisions/0105-conversation-expand.md): each hit that is a turn of a conversation comes
 * back with the turns just before and after it in its sequence (src/memory/facts/sequence.ts),
 * oldest first, beside it rather than as results of their own.
 *
 * A neighbour is shown when the hits themselves would be: visible to the principal, live, not held
 * for review. The request's other filters (type, trust, validAt, scope, minScore, …) choose the
 * hits, not their context: the turn before a reply is what the reply answers, whatever its type.
 * (A sequence is one scope, so its turns are as visible as the hit; the condition stays, so
 * that a wider sequence could never show what the principal may not read.)
 *
 * All hits' neighbours are read in one statement, in the transaction that loaded the hits (the
 * same snapshot): per hit and side a lateral lookup of a few entries of facts_sequence_idx for the
 * neighbours' ids, then their rows by primary key. (Selecting the whole rows inside each side
 * instead cost PGlite 17.8 ms of planning for 10 hits, against 4.4 ms this way.) Nothing is read
 * when no hit is a turn or both sides are 0.
 */
import { and, eq, getTableColumns, inArray, isNull, sql } from 'drizzle-orm';
import { alias, unionAll } from 'drizzle-orm/pg-core';
import { type Principal, visibleTo } from '../../auth/permissions.ts';
import type { Tx } from '../../db/client.ts';
import { facts } from '../../db/schema.ts';
import { live } from '../facts/conditions.ts';
import type { Fact } from '../facts/schemas.ts';
import { follows, inSequence, precedes, sameSequence, sequenceKey, sequenceOrder, sequencePosition } from '../facts/sequence.ts';
import { embeddingModelOf, toFact } from '../facts/wire.ts';

/** How many turns on each side; each 0 to 5 (schemas.ts). */
export interface Expand {
  before?: number | undefined;
  after?: number | undefined;
}

export interface Neighbours {
  before: Fact[];
  after: Fact[];
}

/** Each hit with its neighbours, oldest first; empty arrays for a hit in no sequence. */
export async function withNeighbours<T extends { fact: Fact }>(
  tx: Tx,
  principal: Principal,
  hits: readonly T[],
  expand: Expand,
): Promise<(T & Neighbours)[]> {
  const found = await neighboursOf(tx, principal, hits.map((hit) => hit.fact), expand);
  return hits.map((hit) => {
    const around = found.get(hit.fact.id);
    return { ...hit, before: around?.before ?? [], after: around?.after ?? [] };
  });
}

/** A neighbour's row, as `turn`: the columns of its wire shape (not the search document and the keys generated from it). */
const turn = alias(facts, 'turn');
const { searchVector: _vector, searchLength: _length, mergeKeys: _merge, episodeKeys: _episode, ...turnColumns } = getTableColumns(turn);

/**
 * The neighbours of the given facts, by hit id, in one statement; only hits in a sequence are
 * looked up, and nothing is sent when there are none or both sides are 0.
 */
export async function neighboursOf(tx: Tx, principal: Principal, hits: readonly Fact[], expand: Expand): Promise<Map<string, Neighbours>> {
  const turns = hits.filter((fact) => sequenceKey(fact) !== null).map((fact) => fact.id);
  const found = new Map<string, Neighbours>();
  if (turns.length === 0 || (expand.before ?? 0) + (expand.after ?? 0) === 0) return found;
  for (const { hitId, side, row, embeddingModel } of await neighbourStatement(tx, principal, turns, expand)) {
    let entry = found.get(hitId);
    if (!entry) found.set(hitId, (entry = { before: [], after: [] }));
    entry[side].push(toFact(row.id, row, embeddingModel));
  }
  return found;
}

/**
 * The statement of neighboursOf, for hits `turns` (ids) and at least one side above 0: rows of
 * (hit id, side, neighbour), oldest neighbour first. Exported so a test can EXPLAIN it.
 */
export function neighbourStatement(tx: Tx, principal: Principal, turns: readonly string[], expand: Expand) {
  const before = expand.before ?? 0;
  const after = expand.after ?? 0;
  const { tenantId } = principal;
  const hit = alias(facts, 'hit');
  // Each side finds the neighbours' ids (`facts` there is the neighbour, `hit` the lateral
  // reference); the outer query reads their rows by primary key. The tenant is named on every
  // table (Citus routes the statement by it); the shown conditions are retrieve()'s.
  const side = (name: 'before' | 'after', take: number) => {
    const [order, onThisSide] = name === 'before' ? (['desc', precedes(facts, hit)] as const) : (['asc', follows(facts, hit)] as const);
    return tx
      .select({ side: sql<'before' | 'after'>`${name}::text`.as('side'), position: sql<Date>`${sequencePosition(facts)}`.as('position'), id: facts.id })
      .from(facts)
      .where(and(eq(facts.tenantId, tenantId), sameSequence(facts, hit), onThisSide, visibleTo(principal, facts), live(), isNull(facts.review)))
      .orderBy(...sequenceOrder(facts, order))
      .limit(take);
  };
  const sides = [...(before > 0 ? [side('before', before)] : []), ...(after > 0 ? [side('after', after)] : [])];
  const around = (sides.length === 2 ? unionAll(sides[0]!, sides[1]!) : sides[0]!).as('around');
  return tx
    .select({ hitId: hit.id, side: around.side, row: turnColumns, embeddingModel: embeddingModelOf(tenantId, turn.id, turn.version) })
    .from(hit)
    .crossJoinLateral(around)
    .innerJoin(turn, and(eq(turn.tenantId, tenantId), eq(turn.id, around.id)))
    .where(and(eq(hit.tenantId, tenantId), inArray(hit.id, [...turns]), inSequence(hit)))
    .orderBy(around.position, around.id);
}
