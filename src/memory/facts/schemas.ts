/**
 * The wire shapes of facts (DESIGN §4), as zod schemas. Routes validate with them, OpenAPI is
 * generated from them, and the TypeScript client infers its types from them: one definition.
 */
import { z } from '@hono/zod-openapi';
import { reviewStates } from '../../db/schema/facts.ts';
import { CONTENT_MAX_DEPTH, textSchema, unstorableJson } from '../../foundation/storable.ts';
import { FactTypeSchema, IdSchema, MemoryKindSchema, scopeKeys, ScopeInputSchema, SubjectKindSchema, TimestampSchema, TrustSchema } from '../schemas.ts';

export const CONTENT_MAX_BYTES = 64 * 1024;
export const SUBJECTS_MAX = 20;
/** Provenance entries per request. */
export const PROVENANCE_MAX = 100;
/** `mergedFrom` entries one fact holds, as supersedes add to them. */
export const MERGED_FROM_MAX = 1000;
export const LIST_LIMIT_DEFAULT = 25;
export const LIST_LIMIT_MAX = 100;

/** A scope as returned: always the tenant, plus the keys that are set. */
export const ScopeSchema = z.object({ tenantId: IdSchema, ...scopeKeys }).openapi('Scope');

export const SubjectSchema = z
  .strictObject({ kind: SubjectKindSchema, id: IdSchema })
  .openapi('Subject');

export const ProvenanceRefSchema = z
  .strictObject({
    type: textSchema().min(1).max(128),
    id: textSchema().max(1024).optional(),
    path: textSchema().max(1024).optional(),
    date: textSchema().max(64).optional(),
    actor: textSchema().max(256).optional(),
    note: textSchema().max(2048).optional(),
  })
  .openapi('ProvenanceRef');

/**
 * A `mergedFrom` entry as written: a type, and an id or a path to name what was merged (an entry
 * naming nothing could never cover an episode). KiwiFS refuses the same.
 */
const MergedFromEntrySchema = ProvenanceRefSchema.superRefine((entry, ctx) => {
  // Zod runs refinements on objects that already failed (e.g. no type): nothing here is assumed.
  if (typeof entry.type === 'string' && !entry.type.trim()) ctx.addIssue({ code: 'custom', message: 'must not be blank', path: ['type'] });
  if (!entry.id?.trim() && !entry.path?.trim()) ctx.addIssue({ code: 'custom', message: 'needs an id or a path', path: ['id'] });
});

/** `mergedFrom` as written: a list of entries, or a single entry (normalised to a list of one). */
// Wrapped before validation rather than a union, so an error still names the field (mergedFrom.0.type).
export const MergedFromInputSchema = z
  .preprocess(
    (value) => (value !== null && typeof value === 'object' && !Array.isArray(value) ? [value] : value),
    z.array(MergedFromEntrySchema).max(PROVENANCE_MAX, `at most ${PROVENANCE_MAX} entries`),
  )
  .openapi({ description: 'Entries {type, id?, path?, date?, actor?, note?}, each with an id or a path; a single entry is accepted' });

export const RetentionInputSchema = z
  .strictObject({
    keepDays: z.number().int('must be a whole number of days').min(1, 'must be at least 1').max(36_500).optional(),
    keepUntil: TimestampSchema.optional(),
    legalHold: z.boolean().optional(),
  })
  .refine((r) => r.keepDays === undefined || r.keepUntil === undefined, {
    message: 'give keepDays or keepUntil, not both',
    path: ['keepDays'],
  })
  .openapi('RetentionInput');

/**
 * Any JSON value but null, at most 64 KiB serialized and 64 levels deep, that PostgreSQL can
 * store (no NUL, no unpaired surrogate in a string or key, no infinite number).
 */
export const ContentSchema = z
  .unknown()
  .superRefine((value, ctx) => {
    if (value === undefined || value === null) {
      ctx.addIssue({ code: 'custom', message: 'is required (any JSON value but null)' });
      return;
    }
    // Checked before serializing: a deep enough value makes JSON.stringify throw (RangeError).
    const problem = unstorableJson(value);
    if (problem) {
      ctx.addIssue({ code: 'custom', message: problem.message, path: problem.path });
      return;
    }
    const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
    if (bytes > CONTENT_MAX_BYTES) {
      ctx.addIssue({ code: 'custom', message: `must be at most 64 KiB serialized (is ${bytes} bytes)` });
    }
  })
  .openapi({
    description: `Any JSON value but null, at most 64 KiB serialized and ${CONTENT_MAX_DEPTH} levels deep; strings and keys without NUL or unpaired surrogates`,
    example: { text: 'Prefers email.' } });

const TrustInputSchema = z.enum(['asserted', 'unverified'], {
  error: (issue) =>
    issue.input === 'verified'
      ? 'cannot be "verified" here: a person verifies a fact with POST /v1/memory/facts/{id}/verify'
      : 'must be "asserted" or "unverified"',
});


const revisable = {
  retention: RetentionInputSchema.optional(),
  subjects: z.array(SubjectSchema).max(SUBJECTS_MAX, `at most ${SUBJECTS_MAX} subjects`).optional(),
  validFrom: TimestampSchema.optional(),
  validUntil: TimestampSchema.optional(),
  observedAt: TimestampSchema.optional(),
  mergedFrom: MergedFromInputSchema.optional(),
};

const validityOrdered = (body: { validFrom?: string | undefined; validUntil?: string | undefined }) =>
  body.validFrom === undefined || body.validUntil === undefined || Date.parse(body.validFrom) <= Date.parse(body.validUntil);
const validityIssue = { message: 'must not be later than validUntil', path: ['validFrom'] };

export const WriteFactBodySchema = z
  .strictObject({
    type: FactTypeSchema,
    content: ContentSchema,
    scope: ScopeInputSchema.optional(),
    trust: TrustInputSchema.optional(),
    memoryKind: MemoryKindSchema.optional(),
    episodeId: IdSchema.optional(),
    path: textSchema().min(1).max(1024).optional(),
    ...revisable,
  })
  .refine(validityOrdered, validityIssue)
  .openapi('WriteFactBody');

/** What a supersede can change; left out, each stays as it is (content included). */
const supersedable = ['content', 'retention', 'subjects', 'validFrom', 'validUntil', 'observedAt', 'mergedFrom'] as const;

export const SupersedeBodySchema = z
  .strictObject(
    {
      content: ContentSchema.optional().openapi({ description: 'The new content; left out, the content (and its verification) stays' }),
      expectVersion: z.number().int().min(1).optional(),
      ...revisable,
    },
    {
      error: (issue) =>
        issue.code === 'unrecognized_keys' && issue.keys.some((key) => key === 'type' || key === 'scope')
          ? 'type and scope cannot change on supersede; write a new fact instead'
          : undefined,
    },
  )
  .refine(validityOrdered, validityIssue)
  .refine((body) => supersedable.some((field) => body[field] !== undefined), {
    message: `Nothing to change: give ${supersedable.slice(0, -1).join(', ')} or ${supersedable.at(-1)}`,
  })
  .openapi('SupersedeBody');

export const VerifyBodySchema = z.strictObject({ expectVersion: z.number().int().min(1).optional() }).openapi('VerifyBody');

export const FactSchema = z
  .object({
    id: z.uuid(),
    version: z.number().int(),
    type: FactTypeSchema,
    scope: ScopeSchema,
    content: z.unknown().openapi({ description: 'Any JSON value; null once purged or erased' }),
    trust: TrustSchema,
    assertedBy: z.object({ kind: z.enum(['service', 'user']), id: z.string() }),
    verifiedBy: z.object({ kind: z.literal('user'), id: z.string() }).nullable(),
    verifiedAt: z.string().nullable(),
    retention: z.object({ keepDays: z.number().int().nullable(), keepUntil: z.string().nullable(), legalHold: z.boolean() }),
    expiresAt: z.string().nullable(),
    subjects: z.array(SubjectSchema),
    validFrom: z.string().nullable(),
    validUntil: z.string().nullable(),
    observedAt: z.string().nullable(),
    memoryKind: MemoryKindSchema.nullable(),
    episodeId: z.string().nullable(),
    path: z.string().nullable(),
    derivedFrom: z.array(ProvenanceRefSchema),
    mergedFrom: z.array(ProvenanceRefSchema),
    embeddingModel: z.string().nullable(),
    createdAt: z.string(),
    recordedAt: z.string(),
    invalidatedAt: z.string().nullable(),
    invalidationReason: z.enum(['deleted', 'expired', 'erased']).nullable(),
    review: z.enum(reviewStates).nullable().openapi({
      description:
        '"pending": an agent remembered text that reads like an instruction; no retrieval returns this revision, nor the fact while it is held, until a person other than its asserter verifies it (which clears this). List them with ?review=pending',
    }),
    reviewReason: z
      .object({
        signals: z.array(z.string()).openapi({
          description:
            'What the instruction-like check found: the patterns that matched (role-tag, override, assistant-addressed, response-directive, secrecy, exfiltration), classifier (the learned score reached the threshold), check-budget (held unread or out of time); empty when the server holds every remembered text (MNEMO_MCP_REVIEW=all)',
        }),
        score: z.number().nullable().openapi({ description: 'The learned model\'s score, 0–1 (higher reads more like an instruction); null when the text was held unread' }),
        threshold: z.number().openapi({ description: 'The score at or above which the model held a text when this was written (MNEMO_MCP_REVIEW_THRESHOLD)' }),
      })
      .nullable()
      .openapi({ description: 'Why this revision is held, while `review` is "pending"; null otherwise' }),
  })
  .openapi('Fact');

export const FactListSchema = z
  .object({ data: z.array(FactSchema), hasMore: z.boolean(), nextCursor: z.string().nullable() })
  .openapi('FactList');

export const RevisionListSchema = z.object({ data: z.array(FactSchema) }).openapi('RevisionList');

/** Facts one batch write takes (`POST /v1/memory/facts:batch`). */
export const BATCH_FACTS_MAX = 1000;

export const WriteFactsBodySchema = z
  .strictObject({
    facts: z
      .array(WriteFactBodySchema)
      .min(1, 'must hold at least one fact')
      .max(BATCH_FACTS_MAX, `at most ${BATCH_FACTS_MAX} facts per batch`)
      .openapi({ description: `1 to ${BATCH_FACTS_MAX} write bodies, written all or nothing` }),
  })
  .openapi('WriteFactsBody');

export const WrittenFactsSchema = z
  .object({ data: z.array(FactSchema).openapi({ description: 'The facts, version 1, in the order of the request' }) })
  .openapi('WrittenFacts');

const positiveInt = (name: string) =>
  z
    .string()
    .regex(/^[1-9][0-9]{0,8}$/, `${name} must be a whole number, at least 1`)
    .transform(Number);

export const FactIdParamSchema = z.object({
  id: z.uuid({ message: 'must be a fact id (a UUID)' }).openapi({ param: { name: 'id', in: 'path' } }),
});

export const ReadQuerySchema = z
  .strictObject({ version: positiveInt('version').optional(), asOf: TimestampSchema.optional() })
  .refine((q) => q.version === undefined || q.asOf === undefined, { message: 'give version or asOf, not both', path: ['version'] });

export const DeleteQuerySchema = z.strictObject({ expectVersion: positiveInt('expectVersion').optional() });

export const ListQuerySchema = z
  .strictObject({
    type: FactTypeSchema.optional(),
    types: z
      .string()
      .transform((value) => value.split(',').map((t) => t.trim()).filter(Boolean))
      .pipe(z.array(FactTypeSchema).min(1, 'must name at least one type').max(50, 'at most 50 types'))
      .optional()
      .openapi({ description: 'Comma-separated types', example: 'acme.note,acme.preference' }),
    ...scopeKeys,
    trust: TrustSchema.optional(),
    memoryKind: MemoryKindSchema.optional(),
    path: textSchema().min(1).max(1024).optional().openapi({ description: 'Exact path (an importer finds the fact holding a file)' }),
    episodeId: IdSchema.optional(),
    subjectKind: SubjectKindSchema.optional(),
    subjectId: IdSchema.optional(),
    validAt: TimestampSchema.optional(),
    asOf: TimestampSchema.optional(),
    review: z.enum(reviewStates).optional().openapi({ description: '"pending": the facts held for review, which retrieval does not return until verified' }),
    limit: z
      .string()
      .regex(/^[0-9]+$/, 'must be a whole number')
      .transform(Number)
      .pipe(z.number().int().min(1, 'must be at least 1').max(LIST_LIMIT_MAX, `must be at most ${LIST_LIMIT_MAX}`))
      .optional(),
    cursor: textSchema().max(512).optional(),
  })
  .refine((q) => (q.subjectKind === undefined) === (q.subjectId === undefined), {
    message: 'subjectKind and subjectId go together',
    path: ['subjectKind'],
  });

export type WriteFactBody = z.infer<typeof WriteFactBodySchema>;
export type WriteFactsBody = z.infer<typeof WriteFactsBodySchema>;
export type SupersedeBody = z.infer<typeof SupersedeBodySchema>;
export type VerifyBody = z.infer<typeof VerifyBodySchema>;
export type Fact = z.infer<typeof FactSchema>;
export type FactList = z.infer<typeof FactListSchema>;
export type ListQuery = z.infer<typeof ListQuerySchema>;
export type ProvenanceRef = z.infer<typeof ProvenanceRefSchema>;

