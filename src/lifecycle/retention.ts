/**
 * The retention sweep (DESIGN §4): facts past `expiresAt` are closed (a revision with
 * `invalidationReason: "expired"`), and the content of deleted and expired facts is purged after a
 * grace period from the fact, every revision and every embedding, keeping ids, versions and
 * timestamps. A fact under legal hold is never expired nor purged.
 *
 * Batched, one transaction per batch, so a sweep can stop anywhere and the next one resumes; rows
 * are claimed with `FOR UPDATE SKIP LOCKED`, so several workers sweeping at once share the work
 * and never process a fact twice.
 */
import { and, eq, inArray, isNotNull, isNull, lte, sql } from 'drizzle-orm';
import { dropExpiredRecords, dropRecordsShowingRemovedFacts } from '../core/idempotency.ts';
import { type Db, withTenant } from '../db/client.ts';
import { factEmbeddings, factRevisions, facts } from '../db/schema.ts';
import { expireFact } from '../memory/facts/revise.ts';

export const SWEEP_BATCH = 500;

export interface SweepResult {
  expired: number;
  purged: number;
  /** `Idempotency-Key` records dropped: expired, or showing purged content. */
  idempotencyRecords: number;
}

export interface SweepOptions {
  /** How long deleted and expired content is kept before it is purged. */
  purgeGraceMs: number;
  batch?: number;
}

/** Sweeps one tenant until nothing is due. */
export async function sweepTenant(db: Db, tenantId: string, { purgeGraceMs, batch = SWEEP_BATCH }: SweepOptions): Promise<SweepResult> {
  const result: SweepResult = { expired: 0, purged: 0, idempotencyRecords: 0 };
  for (;;) {
    const expired = await withTenant(db, tenantId, async (tx) => {
      const due = await tx
        .select()
        .from(facts)
        .where(and(eq(facts.tenantId, tenantId), isNull(facts.invalidatedAt), lte(facts.expiresAt, sql`now()`), eq(facts.legalHold, false)))
        .orderBy(facts.id)
        .limit(batch)
        .for('update', { skipLocked: true });
      for (const row of due) await expireFact(tx, row);
      return due.length;
    });
    result.expired += expired;
    if (expired < batch) break;
  }
  for (;;) {
    const purged = await withTenant(db, tenantId, async (tx) => {
      const due = await tx
        .select({ id: facts.id })
        .from(facts)
        .where(
          and(
            eq(facts.tenantId, tenantId),
            inArray(facts.invalidationReason, ['deleted', 'expired']),
            isNotNull(facts.content),
            eq(facts.legalHold, false),
            lte(facts.invalidatedAt, sql`now() - make_interval(secs => ${purgeGraceMs / 1000}::double precision)`),
          ),
        )
        .orderBy(facts.id)
        .limit(batch)
        .for('update', { skipLocked: true });
      const ids = due.map((row) => row.id);
      if (ids.length === 0) return 0;
      await tx
        .update(facts)
        .set({ content: null })
        .where(and(eq(facts.tenantId, tenantId), inArray(facts.id, ids)));
      await tx
        .update(factRevisions)
        .set({ content: null })
        .where(and(eq(factRevisions.tenantId, tenantId), inArray(factRevisions.factId, ids), isNotNull(factRevisions.content)));
      await tx.delete(factEmbeddings).where(and(eq(factEmbeddings.tenantId, tenantId), inArray(factEmbeddings.factId, ids)));
      return ids.length;
    });
    result.purged += purged;
    if (purged < batch) break;
  }
  if (result.purged > 0) {
    result.idempotencyRecords += await withTenant(db, tenantId, (tx) => dropRecordsShowingRemovedFacts(tx, tenantId));
  }
  for (;;) {
    const dropped = await withTenant(db, tenantId, (tx) => dropExpiredRecords(tx, tenantId, batch));
    result.idempotencyRecords += dropped;
    if (dropped < batch) break;
  }
  return result;
}
