/**
 * Erasure of a person's or a conversation's data (DESIGN §10). A tenant admin asks for it; the
 * `erasure` job finds every matching fact (by scope or subjects), removes content, subjects and
 * vectors from the fact and every revision, keeps ids, versions and timestamps, and marks the
 * fact `invalidationReason: "erased"`. A fact under legal hold stops it (`legal-hold`, with the
 * fact ids). While an erasure is pending or running, writes that name its target answer 409
 * `erasure-in-progress`, checked in the write's own transaction.
 *
 * The erasure row keeps only an HMAC of the target's id; the id itself travels in the outbox
 * payload the job reads, which is scrubbed when the erasure completes.
 */
import { and, desc, eq, inArray, lt, or, type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { type Db, type Tx, withTenant } from '../db/client.ts';
import { erasures, factEmbeddings, factRevisions, facts, outbox } from '../db/schema.ts';
import { registerTenant } from '../db/tenants.ts';
import { AppError } from '../foundation/app-error.ts';
import { type OutboxRow, recordOutbox } from '../jobs/outbox.ts';
import { erasureQueue } from '../jobs/queues.ts';
import { type Caller, inTenantTransaction } from '../core/caller.ts';
import { decodeCursor, pageOf } from '../core/cursor.ts';
import { assertTenantAdmin, FactNotFound, LegalHold } from '../core/errors.ts';
import { uuidv7 } from '../core/ids.ts';
import { dropRecordsShowingRemovedFacts } from '../core/idempotency.ts';
import { lockNames, targetHash } from '../core/erasure-guard.ts';
import type { ErasureRequest, ErasureStatus } from './schemas.ts';

export type { ErasureStatus };

export const ERASURE_BATCH = 200;

/** What an erasure targets, as requested (the id is personal data: never stored in the erasure row). */
export type ErasureTarget =
  | { kind: 'fact'; id: string }
  | { kind: 'participant'; id: string }
  | { kind: 'external'; id: string }
  | { kind: 'conversation'; id: string };

/** What an erasure request names (exactly one of a fact, a subject or a conversation, as its schema checks). */
export function erasureTargetOf(request: ErasureRequest): ErasureTarget {
  if (request.factId) return { kind: 'fact', id: request.factId };
  if (request.subject) return { kind: request.subject.kind, id: request.subject.id };
  return { kind: 'conversation', id: request.conversationId! };
}

/**
 * What of a target may be kept outside its erasure record, e.g. hashed into an Idempotency-Key's
 * record for 24 h: a fact's id as it is, a person's or conversation's id only as the keyed hash the
 * erasure record keeps (DESIGN §10), never as plain text or a plain hash that guessed ids could be
 * tested against. Without a key nothing is recorded (the request fails), so the target is returned.
 */
export function keyedTarget(target: ErasureTarget, key: string | undefined): { kind: ErasureTarget['kind']; id?: string; hash?: string } {
  return target.kind === 'fact' || !key ? target : { kind: target.kind, hash: targetHash(key, target.kind, target.id) };
}

type ErasureRow = typeof erasures.$inferSelect;


/**
 * Erasure is off on a deployment without MNEMO_ERASURE_KEY. 501, not 503: it is not a passing
 * state that a retry outlives, and clients retry a 503 (DESIGN §7: nothing committed, retry).
 */
export class ErasureNotConfigured extends AppError {
  constructor() {
    super('memory-operation-unsupported', 'Erasure is not configured on this deployment: an operator sets MNEMO_ERASURE_KEY');
  }
}

export class ErasureNotFound extends AppError {
  constructor() {
    super('not-found', 'No such erasure');
  }
}

const ADMINS_ONLY = 'Erasure is for tenant admins';

function toStatus(row: ErasureRow): ErasureStatus {
  return {
    id: row.id,
    status: row.status,
    target:
      row.targetKind === 'fact'
        ? { kind: 'fact', factId: row.factId! }
        : row.targetKind === 'subject'
          ? { kind: 'subject', subjectKind: row.subjectKind! }
          : { kind: 'conversation' },
    requestedBy: row.requestedBy,
    factsErased: row.factsErased,
    revisionsErased: row.revisionsErased,
    embeddingsDeleted: row.embeddingsDeleted,
    error: row.errorCode ? { code: row.errorCode, ...(row.blockingFactIds.length > 0 ? { factIds: row.blockingFactIds } : {}) } : null,
    createdAt: row.createdAt.toISOString(),
    startedAt: row.startedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
  };
}

/**
 * Records an erasure and its outbox row in one transaction. The caller hands the row to BullMQ
 * after commit; the reconciler does if it cannot.
 */
export async function requestErasure(
  caller: Caller,
  target: ErasureTarget,
  key: string | undefined,
): Promise<{ erasure: ErasureStatus; outbox: OutboxRow }> {
  assertTenantAdmin(caller.principal, ADMINS_ONLY);
  if (!key) throw new ErasureNotConfigured();
  return inTenantTransaction(caller, async (tx) => {
    await registerTenant(tx, caller.principal.tenantId);
    if (target.kind === 'fact') {
      const [fact] = await tx
        .select({ id: facts.id, legalHold: facts.legalHold })
        .from(facts)
        .where(and(eq(facts.tenantId, caller.principal.tenantId), eq(facts.id, target.id)));
      if (!fact) throw new FactNotFound(target.id);
      // Known now, so said now (DESIGN §4); a person's facts are only known to the job.
      if (fact.legalHold) throw new LegalHold(target.id);
    }
    const [row] = await tx
      .insert(erasures)
      .values({
        tenantId: caller.principal.tenantId,
        id: uuidv7(),
        targetKind: target.kind === 'fact' ? 'fact' : target.kind === 'conversation' ? 'conversation' : 'subject',
        factId: target.kind === 'fact' ? target.id : null,
        subjectKind: target.kind === 'participant' || target.kind === 'external' ? target.kind : null,
        targetHash: target.kind === 'fact' ? null : targetHash(key, target.kind, target.id),
        requestedBy: caller.principal.sub,
      })
      .returning();
    const outbox = await recordOutbox(tx, caller.principal.tenantId, erasureQueue.name, { tenantId: caller.principal.tenantId, erasureId: row!.id, target });
    return { erasure: toStatus(row!), outbox };
  });
}

export async function getErasure(caller: Caller, id: string): Promise<ErasureStatus> {
  assertTenantAdmin(caller.principal, ADMINS_ONLY);
  const [row] = await inTenantTransaction(caller, (tx) =>
    tx
      .select()
      .from(erasures)
      .where(and(eq(erasures.tenantId, caller.principal.tenantId), eq(erasures.id, id))),
  );
  if (!row) throw new ErasureNotFound();
  return toStatus(row);
}

export async function listErasures(caller: Caller, query: { limit?: number | undefined; cursor?: string | undefined }) {
  assertTenantAdmin(caller.principal, ADMINS_ONLY);
  const limit = query.limit ?? 25;
  const after = decodeCursor(query.cursor);
  const rows = await inTenantTransaction(caller, (tx) =>
    tx
      .select()
      .from(erasures)
      .where(and(eq(erasures.tenantId, caller.principal.tenantId), after ? lt(erasures.id, after) : undefined))
      .orderBy(desc(erasures.id))
      .limit(limit + 1),
  );
  return pageOf(rows, limit, toStatus);
}

/**
 * Sets a failed erasure going again: a new outbox row from the one that still holds the target,
 * for the caller to hand to BullMQ. Only a failed erasure can be resumed.
 */
export async function resumeErasure(caller: Caller, id: string): Promise<{ erasure: ErasureStatus; outbox: OutboxRow }> {
  assertTenantAdmin(caller.principal, ADMINS_ONLY);
  const { tenantId } = caller.principal;
  return inTenantTransaction(caller, async (tx) => {
    const [row] = await tx
      .select()
      .from(erasures)
      .where(and(eq(erasures.tenantId, tenantId), eq(erasures.id, id)))
      .for('update');
    if (!row) throw new ErasureNotFound();
    if (row.status !== 'failed') throw new AppError('bad-input', `Only a failed erasure can be resumed; this one is ${row.status}`);
    const [updated] = await tx
      .update(erasures)
      .set({ status: 'pending', errorCode: null, blockingFactIds: [], finishedAt: null })
      .where(and(eq(erasures.tenantId, tenantId), eq(erasures.id, id)))
      .returning();
    // A new outbox row (so a new job: the last one ended), with the target the old one still holds.
    const now = await databaseTime(tx);
    const [previous] = await tx
      .update(outbox)
      .set({ doneAt: sql`coalesce(${outbox.doneAt}, ${now}::timestamptz)` })
      .where(
        and(
          eq(outbox.tenantId, tenantId),
          eq(outbox.queue, erasureQueue.name),
          sql`${outbox.payload}->>'erasureId' = ${id}`,
          sql`${outbox.payload} ? 'target'`,
        ),
      )
      .returning({ payload: outbox.payload });
    if (!previous) throw new AppError('internal', `erasure ${id} has no outbox row holding its target`);
    const pending = await recordOutbox(tx, tenantId, erasureQueue.name, previous.payload);
    return { erasure: toStatus(updated!), outbox: pending };
  });
}

/**
 * The tenant's facts the target names: by id, by scope (participant, conversation; fixed for a
 * fact's life) or by subjects — in any revision, since a supersede may have dropped the person
 * from the current one.
 */
function matching(tenantId: string, target: ErasureTarget): SQL {
  const named = (kind: 'participant' | 'external') => {
    const subject = JSON.stringify([{ kind, id: target.id }]);
    return or(
      sql`${facts.subjects} @> ${subject}::jsonb`,
      sql`exists (select 1 from ${factRevisions} where ${factRevisions.tenantId} = ${tenantId} and ${factRevisions.tenantId} = ${facts.tenantId} and ${factRevisions.factId} = ${facts.id} and ${factRevisions.subjects} @> ${subject}::jsonb)`,
    )!;
  };
  const ofTenant = eq(facts.tenantId, tenantId);
  switch (target.kind) {
    case 'fact':
      return and(ofTenant, eq(facts.id, target.id))!;
    case 'participant':
      return and(ofTenant, or(eq(facts.participantId, target.id), named('participant')))!;
    case 'external':
      return and(ofTenant, named('external'))!;
    case 'conversation':
      return and(ofTenant, eq(facts.threadId, target.id))!;
  }
}

/** Not erased yet: what is left to do. */
const notErased = sql`(${facts.invalidationReason} is distinct from 'erased' or ${facts.content} is not null)`;

export type ErasureOutcome = 'completed' | 'legal-hold' | 'skipped';

/**
 * Runs an erasure to the end, batch by batch (each its own transaction, so a worker killed midway
 * leaves no half-erased fact, and the next run goes on from where it stopped). Idempotent: an
 * erasure already completed is left alone.
 */
export async function runErasure(db: Db, tenantId: string, erasureId: string, target: ErasureTarget): Promise<ErasureOutcome> {
  const claimed = await withTenant(db, tenantId, async (tx) => {
    const now = await databaseTime(tx);
    const [row] = await tx
      .update(erasures)
      // Here and below, the database's time as a value or statement_timestamp(), never clock_timestamp():
      // Citus refuses a volatile function in an UPDATE, and any function but immutable ones in its COALESCE.
      .set({ status: 'running', startedAt: sql`coalesce(${erasures.startedAt}, ${now}::timestamptz)` })
      .where(and(eq(erasures.tenantId, tenantId), eq(erasures.id, erasureId), inArray(erasures.status, ['pending', 'running'])))
      .returning();
    if (!row) return undefined;
    // The barrier against writes that checked for an erasure before this one was recorded and
    // have not committed yet: it waits for them (see assertNoErasureInProgress in
    // src/core/erasure-guard.ts), so the batches below, each a later transaction, see their facts.
    if (row.targetHash) await lockNames(tx, [row.targetHash], 'exclusive');
    const held = await tx
      .select({ id: facts.id })
      .from(facts)
      .where(and(matching(tenantId, target), notErased, eq(facts.legalHold, true)))
      .orderBy(facts.id);
    if (held.length > 0) {
      await tx
        .update(erasures)
        .set({ status: 'failed', errorCode: 'legal-hold', blockingFactIds: held.map((f) => f.id), finishedAt: sql`statement_timestamp()` })
        .where(and(eq(erasures.tenantId, tenantId), eq(erasures.id, erasureId)));
      return 'legal-hold' as const;
    }
    return 'running' as const;
  });
  if (!claimed) return 'skipped';
  // Stopped by a hold, now or part way: what an earlier run or the batches below erased stays
  // erased, and so do the stored answers that showed it (see the end).
  const heldBack = async () => {
    await withTenant(db, tenantId, (tx) => dropRecordsShowingRemovedFacts(tx, tenantId));
    return 'legal-hold' as const;
  };
  if (claimed === 'legal-hold') return heldBack();

  for (;;) {
    const done = await withTenant(db, tenantId, async (tx) => {
      const batch = await tx
        .select({ id: facts.id, legalHold: facts.legalHold })
        .from(facts)
        .where(and(matching(tenantId, target), notErased))
        .orderBy(facts.id)
        .limit(ERASURE_BATCH)
        .for('update');
      if (batch.length === 0) return true;
      const blocked = batch.filter((f) => f.legalHold).map((f) => f.id);
      if (blocked.length > 0) {
        // A hold placed while the erasure ran: it stops here, what is erased stays erased.
        await tx
          .update(erasures)
          .set({ status: 'failed', errorCode: 'legal-hold', blockingFactIds: blocked, finishedAt: sql`statement_timestamp()` })
          .where(and(eq(erasures.tenantId, tenantId), eq(erasures.id, erasureId)));
        return 'legal-hold' as const;
      }
      await eraseBatch(tx, tenantId, erasureId, target, batch.map((f) => f.id));
      return false;
    });
    if (done === 'legal-hold') return heldBack();
    if (done) break;
  }

  await withTenant(db, tenantId, async (tx) => {
    // A stored Idempotency-Key response of a write, supersede or verify holds the fact as it was
    // answered, content and subjects: a replay must not hand back what was just erased.
    await dropRecordsShowingRemovedFacts(tx, tenantId);
    await tx
      .update(erasures)
      .set({ status: 'completed', finishedAt: sql`statement_timestamp()` })
      .where(and(eq(erasures.tenantId, tenantId), eq(erasures.id, erasureId)));
    // The target's id was only ever in the outbox payload (and perhaps quoted in an earlier
    // attempt's error): both go now.
    await tx
      .update(outbox)
      .set({ payload: { tenantId, erasureId }, lastError: null })
      .where(and(eq(outbox.tenantId, tenantId), eq(outbox.queue, erasureQueue.name), sql`${outbox.payload}->>'erasureId' = ${erasureId}`));
  });
  return 'completed';
}

/**
 * The scope keys that hold the target's own id (a person's participantId, a conversation's
 * threadId): cleared too, so the erased rows keep no trace of it. The row stays valid: a
 * conversation key may always be absent.
 */
function scrubbedScope(target: ErasureTarget, columns: { participantId: AnyPgColumn; threadId: AnyPgColumn }) {
  if (target.kind === 'participant') return { participantId: sql`nullif(${columns.participantId}, ${target.id})` };
  if (target.kind === 'conversation') return { threadId: sql`nullif(${columns.threadId}, ${target.id})` };
  return {};
}

/**
 * The database's clock, as a value for an UPDATE to keep with coalesce(): Citus refuses any
 * function but immutable ones inside COALESCE or CASE in an UPDATE of a distributed table.
 */
async function databaseTime(tx: Tx): Promise<string> {
  const [row] = (await tx.execute(sql`select statement_timestamp()::text as now`)) as unknown as [{ now: string }];
  return row.now;
}

async function eraseBatch(tx: Tx, tenantId: string, erasureId: string, target: ErasureTarget, ids: string[]): Promise<void> {
  const now = await databaseTime(tx);
  const erased = await tx
    .update(facts)
    .set({
      content: null,
      subjects: [],
      ...scrubbedScope(target, facts),
      invalidatedAt: sql`coalesce(${facts.invalidatedAt}, ${now}::timestamptz)`,
      invalidationReason: 'erased',
    })
    .where(and(eq(facts.tenantId, tenantId), inArray(facts.id, ids)))
    .returning({ id: facts.id });
  const revisions = await tx
    .update(factRevisions)
    .set({ content: null, subjects: [], ...scrubbedScope(target, factRevisions) })
    .where(and(eq(factRevisions.tenantId, tenantId), inArray(factRevisions.factId, ids)))
    .returning({ version: factRevisions.version });
  const vectors = await tx
    .delete(factEmbeddings)
    .where(and(eq(factEmbeddings.tenantId, tenantId), inArray(factEmbeddings.factId, ids)))
    .returning({ factId: factEmbeddings.factId });
  await tx
    .update(erasures)
    .set({
      factsErased: sql`${erasures.factsErased} + ${erased.length}`,
      revisionsErased: sql`${erasures.revisionsErased} + ${revisions.length}`,
      embeddingsDeleted: sql`${erasures.embeddingsDeleted} + ${vectors.length}`,
    })
    .where(and(eq(erasures.tenantId, tenantId), eq(erasures.id, erasureId)));
}

/** Marks an erasure failed for good (its job gave up); the cause is in the worker's log. */
export async function failErasure(db: Db, tenantId: string, erasureId: string): Promise<void> {
  await withTenant(db, tenantId, (tx) =>
    tx
      .update(erasures)
      .set({ status: 'failed', errorCode: 'internal', finishedAt: sql`statement_timestamp()` })
      .where(and(eq(erasures.tenantId, tenantId), eq(erasures.id, erasureId), inArray(erasures.status, ['pending', 'running']))),
  );
}
