/**
 * A stored revision as every route returns it (`Fact`, facts/schemas.ts): the row → wire mapping,
 * and which embedding model has embedded exactly that revision.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import type { factRevisions, facts } from '../../db/schema.ts';
import { SCOPE_KEYS } from './conditions.ts';
import type { Fact } from './schemas.ts';

export type FactRow = typeof facts.$inferSelect;
type RevisionRow = typeof factRevisions.$inferSelect;
/** The columns a revision shares with the current row (everything but the ids and search vector). */
export type RevisionBody = Omit<RevisionRow, 'tenantId' | 'factId'>;

const iso = (date: Date | null) => (date ? date.toISOString() : null);

function scopeOf(row: Pick<FactRow, 'tenantId' | 'orgId' | 'projectId' | 'userId' | 'participantId' | 'threadId' | 'sessionId'>) {
  const scope: Fact['scope'] = { tenantId: row.tenantId };
  for (const key of SCOPE_KEYS) {
    if (row[key] !== null) scope[key] = row[key];
  }
  return scope;
}

/** A stored revision as every route returns it. */
export function toFact(id: string, row: RevisionBody & Pick<FactRow, 'tenantId'>, embeddingModel: string | null): Fact {
  return {
    id,
    version: row.version,
    type: row.type,
    scope: scopeOf(row),
    content: row.content,
    trust: row.trust,
    assertedBy: { kind: row.assertedByKind, id: row.assertedById },
    verifiedBy: row.verifiedById ? { kind: 'user', id: row.verifiedById } : null,
    verifiedAt: iso(row.verifiedAt),
    retention: { keepDays: row.keepDays, keepUntil: iso(row.keepUntil), legalHold: row.legalHold },
    expiresAt: iso(row.expiresAt),
    subjects: row.subjects,
    validFrom: iso(row.validFrom),
    validUntil: iso(row.validUntil),
    observedAt: iso(row.observedAt),
    memoryKind: row.memoryKind,
    episodeId: row.episodeId,
    path: row.path,
    derivedFrom: row.derivedFrom,
    mergedFrom: row.mergedFrom,
    embeddingModel,
    createdAt: row.createdAt.toISOString(),
    recordedAt: row.recordedAt.toISOString(),
    invalidatedAt: iso(row.invalidatedAt),
    invalidationReason: row.invalidationReason,
    review: row.review,
    reviewReason: row.reviewReason,
  };
}

/**
 * The active embedding model, when it has embedded exactly this revision; null otherwise
 * (no embeddings configured, not embedded yet, or embedded at another version).
 */
export const embeddingModelOf = (tenantId: string, factId: AnyPgColumn | SQL, version: AnyPgColumn | SQL) => sql<string | null>`(
  select e.model from fact_embeddings e
  join embedding_models m on m.model = e.model and m.state = 'active'
  where e.tenant_id = ${tenantId} and e.fact_id = ${factId} and e.version = ${version}
  limit 1)`;
