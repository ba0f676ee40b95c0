import { sql } from 'drizzle-orm';
import { check, index, integer, jsonb, pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
import { oneOf, tenantId, timestamptz } from '../columns.ts';

export const jobStatuses = ['pending', 'running', 'completed', 'failed'] as const;
export type JobStatus = (typeof jobStatuses)[number];

export const erasureTargets = ['fact', 'subject', 'conversation'] as const;

/**
 * Erasure requests (DESIGN §10). A person's or conversation's id is never stored here, only
 * `target_hash`, a keyed hash of it; the id travels in the erasure's outbox payload, which is
 * scrubbed when the erasure ends.
 */
export const erasures = pgTable(
  'erasures',
  {
    tenantId: tenantId(),
    id: uuid('id').notNull().defaultRandom(),
    targetKind: text('target_kind', { enum: erasureTargets }).notNull(),
    /** Set for `fact` erasures: a fact id is not personal data. */
    factId: uuid('fact_id'),
    /** `participant` or `external` for `subject` erasures. */
    subjectKind: text('subject_kind'),
    targetHash: text('target_hash'),
    status: text('status', { enum: jobStatuses }).notNull().default('pending'),
    requestedBy: text('requested_by').notNull(),
    factsErased: integer('facts_erased').notNull().default(0),
    revisionsErased: integer('revisions_erased').notNull().default(0),
    embeddingsDeleted: integer('embeddings_deleted').notNull().default(0),
    errorCode: text('error_code'),
    /** Facts under legal hold that stopped the erasure. */
    blockingFactIds: jsonb('blocking_fact_ids').$type<string[]>().notNull().default([]),
    createdAt: timestamptz('created_at').notNull().defaultNow(),
    startedAt: timestamptz('started_at'),
    finishedAt: timestamptz('finished_at'),
  },
  (t) => [
    primaryKey({ name: 'erasures_pkey', columns: [t.tenantId, t.id] }),
    check('erasures_status_known', oneOf(t.status, jobStatuses)),
    check('erasures_target_known', oneOf(t.targetKind, erasureTargets)),
    check(
      'erasures_target_present',
      sql`(${t.targetKind} = 'fact' and ${t.factId} is not null) or (${t.targetKind} <> 'fact' and ${t.targetHash} is not null)`,
    ),
    // Writes check for an erasure in progress on the people they name.
    index('erasures_open_idx')
      .on(t.tenantId, t.targetHash)
      .where(sql`${t.status} in ('pending', 'running')`),
  ],
);
