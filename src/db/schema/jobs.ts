import { sql } from 'drizzle-orm';
import { index, integer, jsonb, pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
import { tenantId, timestamptz } from '../columns.ts';

/**
 * Work that must not be lost (DESIGN §8): written in the same transaction as the change that
 * causes it, then handed to BullMQ. Redis may lose the job; the reconciler re-enqueues every
 * row that is not done, using the row id as the BullMQ job id so a job is never doubled. Without
 * Redis, the API process claims and runs the rows itself (claimed_until, next_attempt_at).
 */
export const outbox = pgTable(
  'outbox',
  {
    tenantId: tenantId(),
    id: uuid('id').notNull().defaultRandom(),
    queue: text('queue').notNull(),
    payload: jsonb('payload').notNull(),
    createdAt: timestamptz('created_at').notNull().defaultNow(),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    doneAt: timestamptz('done_at'),
    /** Set when the job failed for good (invalid payload, unrecoverable error): not re-enqueued. */
    failedAt: timestamptz('failed_at'),
    /**
     * In-process jobs only (no Redis; src/jobs/in-process.ts): the process running the row holds
     * it until then, renewing as it goes; once it lapses (the process died) another may take it.
     */
    claimedUntil: timestamptz('claimed_until'),
    /** Which process holds the claim (a random id per process), so only it renews or releases it. */
    claimedBy: uuid('claimed_by'),
    /** In-process jobs only: a failed attempt's retry is not taken before then (the backoff). */
    nextAttemptAt: timestamptz('next_attempt_at'),
  },
  (t) => [
    primaryKey({ name: 'outbox_pkey', columns: [t.tenantId, t.id] }),
    index('outbox_pending_idx')
      .on(t.tenantId, t.createdAt)
      .where(sql`${t.doneAt} is null and ${t.failedAt} is null`),
  ],
);
