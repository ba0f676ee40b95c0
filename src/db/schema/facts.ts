import { sql } from 'drizzle-orm';
import { type AnyPgColumn, boolean, check, index, integer, jsonb, pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
import { oneOf, tenantId, timestamptz, tsvector } from '../columns.ts';

export const trustLevels = ['asserted', 'unverified', 'verified'] as const;
export type Trust = (typeof trustLevels)[number];

export const principalKinds = ['service', 'user'] as const;
export const memoryKinds = ['episodic', 'semantic', 'consolidation', 'working'] as const;
export type MemoryKind = (typeof memoryKinds)[number];

/** Why a fact stopped being live: a delete, the retention sweep, or an erasure (DESIGN §4, §10). */
export const invalidationReasons = ['deleted', 'expired', 'erased'] as const;
export type InvalidationReason = (typeof invalidationReasons)[number];

/**
 * Why a fact waits for a person before any retrieval returns it: `pending` when an agent
 * remembered text that reads like an instruction (src/memory/remember/instruction-like.ts). Verifying the
 * fact clears it (null).
 */
export const reviewStates = ['pending'] as const;
export type ReviewState = (typeof reviewStates)[number];

/**
 * Why a revision is held (`review_reason`): what the instruction-like check found, for the
 * person who reviews it (src/memory/remember/instruction-like.ts).
 */
export interface ReviewReason {
  /** The check's signals: the patterns that matched, `classifier`, `check-budget`; empty when the server holds every remembered text. */
  signals: string[];
  /** The learned model's score, 0–1; null when the text was held unread. */
  score: number | null;
  /** The score at or above which the model held a text, when it was written. */
  threshold: number;
}

export interface Subject {
  kind: 'participant' | 'user' | 'external';
  id: string;
}

/** A KiwiFS provenance reference (`merged-from` / `derived-from`), DESIGN §6. */
export interface ProvenanceRef {
  type: string;
  id?: string;
  path?: string;
  date?: string;
  actor?: string;
  note?: string;
}

/**
 * The columns of one revision of a fact. `facts` holds the current revision and
 * `fact_revisions` every revision, so both tables are built from this one definition.
 * `content` is nullable because the retention sweep and erasure remove it while keeping
 * ids, versions and timestamps.
 */
function revisionColumns() {
  return {
    version: integer('version').notNull(),
    type: text('type').notNull(),
    // Scope (DESIGN §3). The tenant is tenant_id; an absent key is NULL.
    orgId: text('org_id'),
    projectId: text('project_id'),
    userId: text('user_id'),
    participantId: text('participant_id'),
    threadId: text('thread_id'),
    sessionId: text('session_id'),
    content: jsonb('content'),
    trust: text('trust', { enum: trustLevels }).notNull(),
    assertedByKind: text('asserted_by_kind', { enum: principalKinds }).notNull(),
    assertedById: text('asserted_by_id').notNull(),
    verifiedById: text('verified_by_id'),
    verifiedAt: timestamptz('verified_at'),
    keepDays: integer('keep_days'),
    keepUntil: timestamptz('keep_until'),
    legalHold: boolean('legal_hold').notNull().default(false),
    expiresAt: timestamptz('expires_at'),
    subjects: jsonb('subjects').$type<Subject[]>().notNull().default([]),
    validFrom: timestamptz('valid_from'),
    validUntil: timestamptz('valid_until'),
    observedAt: timestamptz('observed_at'),
    memoryKind: text('memory_kind', { enum: memoryKinds }),
    episodeId: text('episode_id'),
    path: text('path'),
    derivedFrom: jsonb('derived_from').$type<ProvenanceRef[]>().notNull().default([]),
    mergedFrom: jsonb('merged_from').$type<ProvenanceRef[]>().notNull().default([]),
    /** When version 1 was written; the same on every revision of a fact. */
    createdAt: timestamptz('created_at').notNull(),
    /** When this revision was written. */
    recordedAt: timestamptz('recorded_at').notNull().defaultNow(),
    invalidatedAt: timestamptz('invalidated_at'),
    invalidationReason: text('invalidation_reason', { enum: invalidationReasons }),
    review: text('review', { enum: reviewStates }),
    reviewReason: jsonb('review_reason').$type<ReviewReason>(),
  };
}

type CheckedColumns = Record<
  | 'version'
  | 'projectId'
  | 'userId'
  | 'participantId'
  | 'threadId'
  | 'sessionId'
  | 'trust'
  | 'assertedByKind'
  | 'memoryKind'
  | 'invalidationReason'
  | 'review'
  | 'keepDays'
  | 'validFrom'
  | 'validUntil'
  | 'subjects'
  | 'derivedFrom'
  | 'mergedFrom',
  AnyPgColumn
>;

function revisionChecks(prefix: string, t: CheckedColumns) {
  return [
    check(`${prefix}_version_positive`, sql`${t.version} >= 1`),
    check(`${prefix}_trust_known`, oneOf(t.trust, trustLevels)),
    check(`${prefix}_asserted_by_kind_known`, oneOf(t.assertedByKind, principalKinds)),
    check(`${prefix}_memory_kind_known`, oneOf(t.memoryKind, memoryKinds)),
    check(`${prefix}_invalidation_reason_known`, oneOf(t.invalidationReason, invalidationReasons)),
    check(`${prefix}_review_known`, oneOf(t.review, reviewStates)),
    check(`${prefix}_keep_days_positive`, sql`${t.keepDays} >= 1`),
    check(`${prefix}_validity_ordered`, sql`${t.validFrom} <= ${t.validUntil}`),
    // A conversation (participant, thread, session) belongs to a project or a user (DESIGN §3).
    check(
      `${prefix}_conversation_owned`,
      sql`(${t.participantId} is null and ${t.threadId} is null and ${t.sessionId} is null) or ${t.projectId} is not null or ${t.userId} is not null`,
    ),
    check(`${prefix}_subjects_array`, sql`jsonb_typeof(${t.subjects}) = 'array'`),
    check(`${prefix}_derived_from_array`, sql`jsonb_typeof(${t.derivedFrom}) = 'array'`),
    check(`${prefix}_merged_from_array`, sql`jsonb_typeof(${t.mergedFrom}) = 'array'`),
  ];
}

/** The current revision of every fact. */
export const facts = pgTable(
  'facts',
  {
    tenantId: tenantId(),
    id: uuid('id').notNull(),
    ...revisionColumns(),
    /**
     * Full-text document, defined once in SQL by `mnemo_search_document(type, content)`: the
     * type split on `.`, `_` and `-` (so `acme.preference` matches "preference") plus every
     * string inside `content`. Generated, so it can never drift from the content, and it
     * empties itself when content is purged.
     */
    searchVector: tsvector('search_vector')
      .notNull()
      .generatedAlwaysAs(sql`mnemo_search_document(type, content)`),
    /** Tokens in the document (BM25's document length), from the same definition. */
    searchLength: integer('search_length')
      .notNull()
      .generatedAlwaysAs(sql`mnemo_token_count(mnemo_search_document(type, content))`),
    /**
     * What this fact's `mergedFrom` covers, as coverage keys (`id:<episode id>`, `path:<path>`;
     * the rules of src/kiwifs/coverage.ts restated in SQL by `mnemo_merge_keys`), computed once
     * per write so the coverage report joins on them instead of reading every fact's JSON.
     */
    mergeKeys: text('merge_keys')
      .array()
      .notNull()
      .generatedAlwaysAs(sql`mnemo_merge_keys(merged_from)`),
    /**
     * The keys that would cover this fact as an episode (its identity, else the fact id, and its
     * path; `mnemo_episode_keys`), computed once per write: the report probes them for a million
     * episodes, and trimming each episode's id and path with regular expressions per report cost
     * more than the report's own scan.
     */
    episodeKeys: text('episode_keys')
      .array()
      .notNull()
      .generatedAlwaysAs(sql`mnemo_episode_keys(coalesce(episode_id, id::text), path)`),
  },
  (t) => [
    primaryKey({ name: 'facts_pkey', columns: [t.tenantId, t.id] }),
    ...revisionChecks('facts', t),
    // btree_gin puts tenant_id inside the GIN index, so per-tenant matches and document
    // frequencies are answered by the index alone.
    // No pending list (fastupdate off): drizzle/0013_keyword_search_costs.sql says why.
    index('facts_search_idx').using('gin', t.tenantId, t.searchVector).with({ fastupdate: false }),
    index('facts_subjects_idx').using('gin', t.tenantId, sql`${t.subjects} jsonb_path_ops`),
    index('facts_created_idx').on(t.tenantId, t.createdAt, t.id),
    index('facts_type_idx').on(t.tenantId, t.type, t.createdAt),
    // The coverage report's order (KiwiFS's: path bytewise, then id), so a page of episodes is
    // read in order and stops at its end instead of sorting every episode of the tenant.
    index('facts_report_order_idx').on(t.tenantId, sql`(coalesce(path, '') collate "C")`, t.id),
    // A conversation's turns in order (src/memory/facts/sequence.ts): "the turns before and after
    // this one" read a few index entries. Thread and session are '' for NULL because a sequence
    // matches NULL to NULL, which `=` cannot and `is not distinct from` is no index condition.
    // CASE, not COALESCE: under row-level security PostgreSQL uses an expression as an index
    // condition only if it cannot leak, and it counts COALESCE as leaky, CASE over a null test
    // not. The expressions must stay the text sequence.ts writes.
    index('facts_sequence_idx')
      .on(
        t.tenantId,
        sql`(case when thread_id is null then '' else thread_id end)`,
        sql`(case when session_id is null then '' else session_id end)`,
        sql`(case when observed_at is null then created_at else observed_at end)`,
        t.id,
      )
      .where(sql`${t.memoryKind} = 'episodic'`),
    // The review queue (`?review=pending`): a few facts among many, found without a scan.
    index('facts_review_idx')
      .on(t.tenantId, t.id)
      .where(sql`${t.review} is not null`),
    index('facts_expiry_idx')
      .on(t.tenantId, t.expiresAt)
      .where(sql`${t.expiresAt} is not null and ${t.invalidatedAt} is null`),
  ],
);

/** Every revision of every fact, the current one included (one row per version). */
export const factRevisions = pgTable(
  'fact_revisions',
  {
    tenantId: tenantId(),
    factId: uuid('fact_id').notNull(),
    ...revisionColumns(),
  },
  (t) => [
    primaryKey({ name: 'fact_revisions_pkey', columns: [t.tenantId, t.factId, t.version] }),
    ...revisionChecks('fact_revisions', t),
  ],
);
