/** SQL conditions over facts shared by reads, revisions, retrieval and reports. */
import { and, eq, gt, inArray, isNull, lte, or, type SQL, sql } from 'drizzle-orm';
import { type Principal, visibleTo } from '../../auth/permissions.ts';
import { facts } from '../../db/schema.ts';

/** The scope keys below the tenant, in the order the schema lists them. */
export const SCOPE_KEYS = ['orgId', 'projectId', 'userId', 'participantId', 'threadId', 'sessionId'] as const;
export type ScopeFilter = Partial<Record<(typeof SCOPE_KEYS)[number], string>>;

/** Not deleted, erased or swept, and not past its expiry. */
export const live = (at: SQL = sql`now()`) => and(isNull(facts.invalidatedAt), or(isNull(facts.expiresAt), gt(facts.expiresAt, at)))!;

/** The fact `id`, if the principal can see it and it is live: the condition of every lookup. */
export const visibleLive = (principal: Principal, id: string) =>
  and(eq(facts.tenantId, principal.tenantId), eq(facts.id, id), visibleTo(principal, facts), live());

/** `[validFrom, validUntil]` contains `at`; an open end is unbounded, both ends inclusive. */
export function validAt(columns: Pick<typeof facts, 'validFrom' | 'validUntil'>, at: Date): SQL {
  return and(
    or(isNull(columns.validFrom), lte(columns.validFrom, at)),
    or(isNull(columns.validUntil), gt(columns.validUntil, at), eq(columns.validUntil, at)),
  )!;
}

/** The fact names this subject among its `subjects` (jsonb containment, which the GIN index serves). */
export const namesSubject = (subjects: typeof facts.subjects, kind: string, id: string): SQL =>
  sql`${subjects} @> ${JSON.stringify([{ kind, id }])}::jsonb`;

export function typeIn(column: typeof facts.type, type: string | undefined, types: readonly string[] | undefined): SQL[] {
  const conditions: SQL[] = [];
  if (type !== undefined) conditions.push(eq(column, type));
  if (types !== undefined) conditions.push(inArray(column, [...types]));
  return conditions;
}

/**
 * Facts that apply in a scope: every scope key the fact sets equals the given scope's value.
 * For `{projectId: p1, participantId: end-7}` that is the tenant-wide facts, p1's facts and
 * end-7's facts in p1 — what an agent talking to end-7 in p1 should know — but not p2's, nor
 * another participant's. (Who may see them is a separate condition: `visibleTo`.)
 */
export function appliesIn(scope: ScopeFilter): SQL {
  return and(...SCOPE_KEYS.map((key) => (scope[key] === undefined ? isNull(facts[key]) : or(isNull(facts[key]), eq(facts[key], scope[key]!)))))!;
}
