import { and, asc, eq, isNull, lt, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/client.ts';
import { withTenant } from '../db/client.ts';
import { outbox } from '../db/schema.ts';
import { registerTenant } from '../db/tenants.ts';
import { enqueueUnique, type JobData, type Queues } from './queues.ts';

export interface OutboxRow {
  tenantId: string;
  id: string;
  queue: string;
  payload: unknown;
}

/**
 * Records work in the caller's transaction, so it exists exactly when the change that needs it
 * commits. After commit, `dispatchOutbox` hands it to BullMQ; if that never happens (crash,
 * Redis down), the reconciler does.
 */
export async function recordOutbox(tx: Tx, tenantId: string, queue: string, payload: unknown): Promise<OutboxRow> {
  await registerTenant(tx, tenantId);
  const [row] = await tx
    .insert(outbox)
    .values({ tenantId, queue, payload })
    .returning({ tenantId: outbox.tenantId, id: outbox.id, queue: outbox.queue, payload: outbox.payload });
  return row!;
}

/** The BullMQ job id of an outbox row: enqueueing the same row twice yields one job. */
export const outboxJobId = (id: string) => `outbox-${id}`;

/**
 * Enqueues outbox rows. Rows naming a queue this build does not run (a newer node wrote them
 * during a rolling deploy) are left for a worker that does; they are returned as skipped.
 */
export async function dispatchOutbox(queues: Queues, rows: readonly OutboxRow[]): Promise<{ enqueued: number; skipped: number }> {
  let enqueued = 0;
  let skipped = 0;
  for (const row of rows) {
    const queue = queues.get(row.queue);
    if (!queue) {
      skipped++;
      continue;
    }
    const data: JobData = { payload: row.payload, outbox: { tenantId: row.tenantId, id: row.id } };
    await enqueueUnique(queue, data, outboxJobId(row.id));
    enqueued++;
  }
  return { enqueued, skipped };
}

/** Outbox rows of one tenant still waiting, oldest first. */
export async function pendingOutbox(tx: Tx, tenantId: string, olderThan: Date, limit: number): Promise<OutboxRow[]> {
  return tx
    .select({ tenantId: outbox.tenantId, id: outbox.id, queue: outbox.queue, payload: outbox.payload })
    .from(outbox)
    .where(and(eq(outbox.tenantId, tenantId), isNull(outbox.doneAt), isNull(outbox.failedAt), lt(outbox.createdAt, olderThan)))
    .orderBy(asc(outbox.createdAt))
    .limit(limit);
}

export async function markOutboxDone(db: Db, ref: { tenantId: string; id: string }): Promise<void> {
  await withTenant(db, ref.tenantId, (tx) =>
    tx
      .update(outbox)
      .set({ doneAt: sql`now()`, attempts: sql`${outbox.attempts} + 1`, lastError: null })
      .where(and(eq(outbox.tenantId, ref.tenantId), eq(outbox.id, ref.id))),
  );
}

const ERROR_TEXT_MAX = 2000;

/** Records a failed attempt; `final` stops the reconciler from enqueueing the row again. */
export async function markOutboxAttemptFailed(
  db: Db,
  ref: { tenantId: string; id: string },
  error: unknown,
  final: boolean,
): Promise<void> {
  const message = (error instanceof Error ? error.message : String(error)).slice(0, ERROR_TEXT_MAX);
  await withTenant(db, ref.tenantId, (tx) =>
    tx
      .update(outbox)
      .set({ attempts: sql`${outbox.attempts} + 1`, lastError: message, ...(final ? { failedAt: sql`now()` } : {}) })
      .where(and(eq(outbox.tenantId, ref.tenantId), eq(outbox.id, ref.id))),
  );
}

// Claims, for the in-process transport (src/jobs/in-process/outbox-lease.ts): without Redis,
// processes that share the database take outbox rows from Postgres itself. Each call is one short
// transaction: nothing is held open while the job works (an embedded database runs one
// transaction at a time).

export type OutboxClaim =
  | { kind: 'claimed'; attempts: number; payload: unknown; createdAt: Date }
  /** A failed attempt's backoff: the row may be taken again in `waitMs`. */
  | { kind: 'later'; waitMs: number }
  /** Done, failed for good, gone, or being run by another process (claimed or being claimed). */
  | { kind: 'unavailable' };

const leaseFor = (ms: number) => sql`now() + (${ms})::double precision * interval '1 millisecond'`;

/**
 * Claims an outbox row for `leaseMs`, unless another process holds it (its lease not lapsed) or
 * is claiming it this instant (`SKIP LOCKED`: never waits on another's lock), or its backoff has
 * not elapsed. Two processes never both get `claimed` while a lease runs.
 */
export async function claimOutbox(
  db: Db,
  ref: { tenantId: string; id: string },
  claim: { by: string; leaseMs: number },
): Promise<OutboxClaim> {
  return withTenant(db, ref.tenantId, async (tx) => {
    const [row] = await tx
      .select({
        attempts: outbox.attempts,
        payload: outbox.payload,
        createdAt: outbox.createdAt,
        held: sql<boolean>`coalesce(${outbox.claimedUntil} > now(), false)`,
        waitMs: sql<number>`coalesce(greatest(extract(epoch from ${outbox.nextAttemptAt} - now()) * 1000, 0), 0)::float8`,
      })
      .from(outbox)
      .where(and(eq(outbox.tenantId, ref.tenantId), eq(outbox.id, ref.id), isNull(outbox.doneAt), isNull(outbox.failedAt)))
      .for('update', { skipLocked: true });
    if (!row || row.held) return { kind: 'unavailable' };
    if (row.waitMs > 0) return { kind: 'later', waitMs: Math.ceil(row.waitMs) };
    await tx
      .update(outbox)
      .set({ claimedUntil: leaseFor(claim.leaseMs), claimedBy: claim.by })
      .where(and(eq(outbox.tenantId, ref.tenantId), eq(outbox.id, ref.id)));
    return { kind: 'claimed', attempts: row.attempts, payload: row.payload, createdAt: row.createdAt };
  });
}

/** Extends a claim while its job runs; false when the claim is no longer this process's. */
export async function renewOutboxClaim(db: Db, ref: { tenantId: string; id: string }, claim: { by: string; leaseMs: number }): Promise<boolean> {
  const renewed = await withTenant(db, ref.tenantId, (tx) =>
    tx
      .update(outbox)
      .set({ claimedUntil: leaseFor(claim.leaseMs) })
      .where(and(eq(outbox.tenantId, ref.tenantId), eq(outbox.id, ref.id), eq(outbox.claimedBy, claim.by)))
      .returning({ id: outbox.id }),
  );
  return renewed.length > 0;
}

/**
 * Gives a claim up once its job has settled: with `retryInMs`, the row may be taken again only
 * after that backoff (kept in Postgres, so a restart honours it too).
 */
export async function releaseOutboxClaim(db: Db, ref: { tenantId: string; id: string }, by: string, retryInMs?: number): Promise<void> {
  await withTenant(db, ref.tenantId, (tx) =>
    tx
      .update(outbox)
      .set({ claimedUntil: null, claimedBy: null, nextAttemptAt: retryInMs === undefined ? null : leaseFor(retryInMs) })
      .where(and(eq(outbox.tenantId, ref.tenantId), eq(outbox.id, ref.id), eq(outbox.claimedBy, by))),
  );
}
