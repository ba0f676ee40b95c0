/**
 * Conversation sequences (DESIGN §5, "Conversations"; docs/decisions/0105-conversation-expand.md):
 * which facts are turns of one conversation, and their order. One definition for everything that
 * uses a turn's neighbours — retrieval's `expand` (src/memory/retrieval/expand.ts) and indexing
 * that carries a neighbour's words into a turn's searchable text.
 *
 * - A fact is **in a sequence** when `memory_kind = 'episodic'` and it has a `thread_id` or a
 *   `session_id`.
 * - Its **sequence** is the episodic facts of its tenant with the same scope: all six scope
 *   columns equal, NULL equal to NULL (`is not distinct from`). Two sessions of one thread are two
 *   sequences; so are one session id in two projects.
 * - **Order**: `observed_at`, else `created_at`, then `id`. Ids are uuidv7 (milliseconds, then
 *   random bits), and a batch's ids ascend in its order (insert.ts), so ties are write order; two
 *   requests written in the same millisecond have no order but a stable one. A writer that knows
 *   the turns' order gives `observedAt`.
 *
 * The index `facts_sequence_idx` (src/db/schema/facts.ts, drizzle/0012_conversation_sequence.sql)
 * serves "the turns before / after this one": tenant, thread and session ('' for NULL), position,
 * id, over episodic facts. `is not distinct from` cannot be an index condition, so `sameSequence`
 * also states the equality of thread and session with NULL read as '' — what the index is keyed
 * on; the exact six-column test then rechecks (ids are never empty strings, upstream validation,
 * so reading NULL as '' loses nothing). These expressions are CASE over a null test, not
 * COALESCE: for the app role, under row-level security, PostgreSQL makes a condition an index
 * condition only when it cannot leak row values, and it counts COALESCE as leaky (measured: the
 * COALESCE form scanned the tenant's facts, the CASE form reads the index). The expressions here
 * and the index's must stay the same text: test/integration/conversation-sequence.test.ts
 * EXPLAINs the neighbour query as the app role.
 *
 * Every helper takes the columns of a table or alias (`facts`, `alias(facts, 'n')`), so the
 * conditions can relate two rows of facts in one statement (a lateral join). Callers still name
 * the tenant of each table reference with a parameter: on Citus that routes the statement to the
 * tenant's one shard (issue 16).
 */
import { and, eq, isNotNull, or, type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { SCOPE_KEYS } from './conditions.ts';

/** The memory kind whose facts form conversation sequences. */
export const SEQUENCE_KIND = 'episodic';

/** The index that serves a sequence's order (src/db/schema/facts.ts). */
export const SEQUENCE_INDEX = 'facts_sequence_idx';

/** The columns of `facts` (or an alias of it) the sequence rules read. */
export type SequenceColumns = Record<
  'tenantId' | 'id' | 'memoryKind' | 'observedAt' | 'createdAt' | (typeof SCOPE_KEYS)[number],
  AnyPgColumn
>;

/**
 * `memory_kind = 'episodic'` with the kind written into the SQL, not bound: the index is partial on
 * that predicate, and a plan made for parameters (Citus sends a statement's values to the worker as
 * parameters) could not prove it from `memory_kind = $1` and would scan instead.
 */
const episodic = (t: SequenceColumns): SQL => sql`${t.memoryKind} = ${sql.raw(`'${SEQUENCE_KIND}'`)}`;

/** The fact is a turn of some sequence: episodic, with a thread or a session. */
export const inSequence = (t: SequenceColumns): SQL => and(episodic(t), or(isNotNull(t.threadId), isNotNull(t.sessionId)))!;

/**
 * A turn's position in its sequence (before `id`): when it was observed, else when it was written.
 * CASE rather than COALESCE, so that it can be an index condition under row-level security.
 */
export const sequencePosition = (t: SequenceColumns): SQL => sql`(case when ${t.observedAt} is null then ${t.createdAt} else ${t.observedAt} end)`;

/** A thread or session id, '' for none: the index's key (see above for why not COALESCE). */
const keyOf = (column: AnyPgColumn): SQL => sql`(case when ${column} is null then '' else ${column} end)`;

/**
 * `n` is in the same sequence as `h`: same tenant, episodic, all six scope columns equal (NULL =
 * NULL). `h` is assumed to be in a sequence itself (`inSequence(h)`); without that, two episodic
 * facts with neither thread nor session would count as one sequence. The thread and
 * session equalities ('' for NULL) are implied by the exact ones; they are there for the index.
 */
export const sameSequence = (n: SequenceColumns, h: SequenceColumns): SQL =>
  and(
    eq(n.tenantId, h.tenantId),
    episodic(n),
    eq(keyOf(n.threadId), keyOf(h.threadId)),
    eq(keyOf(n.sessionId), keyOf(h.sessionId)),
    ...SCOPE_KEYS.map((key) => sql`${n[key]} is not distinct from ${h[key]}`),
  )!;

/** `n` comes before `h` in their sequence (a row comparison, which the index answers in order). */
export const precedes = (n: SequenceColumns, h: SequenceColumns): SQL =>
  sql`(${sequencePosition(n)}, ${n.id}) < (${sequencePosition(h)}, ${h.id})`;

/** `n` comes after `h` in their sequence. */
export const follows = (n: SequenceColumns, h: SequenceColumns): SQL =>
  sql`(${sequencePosition(n)}, ${n.id}) > (${sequencePosition(h)}, ${h.id})`;

/** Sequence order, oldest first (`'asc'`) or newest first (`'desc'`, for "the turns before"). */
export const sequenceOrder = (t: SequenceColumns, direction: 'asc' | 'desc' = 'asc'): SQL[] =>
  direction === 'asc' ? [sql`${sequencePosition(t)} asc`, sql`${t.id} asc`] : [sql`${sequencePosition(t)} desc`, sql`${t.id} desc`];

// ---------------------------------------------------------------------------------------------
// The same rules over values, for code that orders turns it holds (a batch being written).

/** What a fact's sequence membership and position are read from. */
export interface SequenceFields {
  id: string;
  memoryKind: string | null;
  observedAt: Date | string | null;
  createdAt: Date | string;
  scope: Partial<Record<(typeof SCOPE_KEYS)[number], string | null | undefined>>;
}

/**
 * The fact's sequence as one string (tenant excluded: callers hold one tenant's facts), or null
 * when it is in none. Equal keys ⇔ same sequence.
 */
export function sequenceKey(fact: Pick<SequenceFields, 'memoryKind' | 'scope'>): string | null {
  const { scope } = fact;
  if (fact.memoryKind !== SEQUENCE_KIND || (scope.threadId == null && scope.sessionId == null)) return null;
  return JSON.stringify(SCOPE_KEYS.map((key) => scope[key] ?? null));
}

const instant = (value: Date | string) => (value instanceof Date ? value.getTime() : Date.parse(value));

/** Sequence order of two facts of one sequence: position, then id (lower-case uuid strings compare as PostgreSQL compares uuids). */
export function compareInSequence(a: SequenceFields, b: SequenceFields): number {
  const position = instant(a.observedAt ?? a.createdAt) - instant(b.observedAt ?? b.createdAt);
  if (position !== 0) return position;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
