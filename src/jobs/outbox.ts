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
export async function pendingOutbox(tx: Tx, olderThan: Date, limit: number): Promise<OutboxRow[]> {
  return tx
    .select({ tenantId: outbox.tenantId, id: outbox.id, queue: outbox.queue, payload: outbox.payload })
    .from(outbox)
    .where(and(isNull(outbox.doneAt), isNull(outbox.failedAt), lt(outbox.createdAt, olderThan)))
    .orderBy(asc(outbox.createdAt))
    .limit(limit);
}

export async function markOutboxDone(db: Db, ref: { tenantId: string; id: string }): Promise<void> {
  await withTenant(db, ref.tenantId, (tx) =>
    tx
      .update(outbox)
      .set({ doneAt: sql`now()`, attempts: sql`${outbox.attempts} + 1`, lastError: null })
      .where(eq(outbox.id, ref.id)),
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
      .where(eq(outbox.id, ref.id)),
  );
}
