/**
 * The wire shapes of retrieval and the context (DESIGN §5), as zod schemas: what a search takes and
 * what it answers, with the facts' own shape (facts/schemas.ts) inside the answer.
 */
import { z } from '@hono/zod-openapi';
import { textSchema } from '../../foundation/storable.ts';
import { FactSchema } from '../facts/schemas.ts';
import { FactTypeSchema, IdSchema, MemoryKindSchema, ScopeInputSchema, SubjectKindSchema, TimestampSchema, TrustSchema } from '../schemas.ts';

export const RETRIEVE_LIMIT_DEFAULT = 10;
export const RETRIEVE_LIMIT_MAX = 100;
export const QUERY_MAX_CHARS = 4000;

export const retrievalModes = ['list', 'keyword', 'semantic', 'both'] as const;
export type RetrievalMode = (typeof retrievalModes)[number];

/** Floors of each search's own score (DESIGN §5): BM25's is 0 or more, a cosine similarity is -1 to 1. */
const KeywordFloorSchema = z.number().min(0, 'a keyword (BM25) score is 0 or more');
const SemanticFloorSchema = z.number().min(-1, 'a cosine similarity is -1 to 1').max(1, 'a cosine similarity is -1 to 1');

const MinScoreSchema = z
  .union([z.number(), z.strictObject({ keyword: KeywordFloorSchema.optional(), semantic: SemanticFloorSchema.optional() })])
  .openapi({
    description:
      'Leave out facts scoring below this in their search: the BM25 score in mode "keyword", the cosine similarity (-1 to 1) in "semantic". ' +
      'A number applies to the mode\'s one search; {keyword?, semantic?} names each (in "both" each list is cut before fusion, so a fact may still come in through the other list). ' +
      'Without it every search returns its best facts however weak; with it a search for something never stored can return nothing.',
    example: { semantic: 0.35 },
  });

export const EXPAND_MAX = 5;

const ExpandSideSchema = z
  .number()
  .int('must be a whole number of turns')
  .min(0, `must be 0 to ${EXPAND_MAX}`)
  .max(EXPAND_MAX, `must be 0 to ${EXPAND_MAX}`);

/** How many turns of a hit's conversation to return beside it (DESIGN §5, "Conversations"). */
export const ExpandSchema = z
  .strictObject({
    before: ExpandSideSchema.optional().openapi({ description: 'Turns just before each hit (0–5, default 0)' }),
    after: ExpandSideSchema.optional().openapi({ description: 'Turns just after each hit (0–5, default 0)' }),
  })
  .openapi({
    description:
      'Return each hit\'s neighbouring turns beside it: an episodic fact with a threadId or sessionId belongs to the sequence of episodic facts ' +
      'with exactly its scope, ordered by observedAt (else createdAt), then write order. Neighbours are visible, live and not held for review; ' +
      'the other filters choose hits, not neighbours. They never count as results, and a neighbour that is itself a hit is also its own result.',
    example: { before: 1, after: 1 },
  });

const retrievalFilters = {
  type: FactTypeSchema.optional(),
  types: z.array(FactTypeSchema).min(1).max(50, 'at most 50 types').optional(),
  scope: ScopeInputSchema.optional(),
  limit: z.number().int().min(1, 'must be at least 1').max(RETRIEVE_LIMIT_MAX, `must be at most ${RETRIEVE_LIMIT_MAX}`).optional(),
  validAt: TimestampSchema.optional(),
  trust: TrustSchema.optional(),
  memoryKind: MemoryKindSchema.optional(),
  subjectKind: SubjectKindSchema.optional(),
  subjectId: IdSchema.optional(),
  asOf: TimestampSchema.optional().openapi({
    description: 'Mode "list" only: the facts as they were at this time (the search indexes hold current text, so searches cannot look back)',
  }),
  minScore: MinScoreSchema.optional(),
  expand: ExpandSchema.optional(),
};

type FilterBody = {
  mode?: RetrievalMode | undefined;
  subjectKind?: string | undefined;
  subjectId?: string | undefined;
  asOf?: string | undefined;
  minScore?: number | { keyword?: number | undefined; semantic?: number | undefined } | undefined;
  expand?: { before?: number | undefined; after?: number | undefined } | undefined;
};

/** The rules the retrieval filters share, as refinements on the body that holds them. */
function refineFilters(body: FilterBody, ctx: z.RefinementCtx): void {
  const mode = body.mode ?? 'both';
  if ((body.subjectKind === undefined) !== (body.subjectId === undefined)) {
    ctx.addIssue({ code: 'custom', message: 'subjectKind and subjectId go together', path: ['subjectKind'] });
  }
  if (body.asOf !== undefined && mode !== 'list') {
    ctx.addIssue({ code: 'custom', message: 'asOf needs mode "list": the search indexes hold current text, so a search cannot look back', path: ['asOf'] });
  }
  if (body.minScore !== undefined && mode === 'list') {
    ctx.addIssue({ code: 'custom', message: 'mode "list" does not score facts; minScore needs "keyword", "semantic" or "both"', path: ['minScore'] });
  }
  if (body.expand !== undefined && body.asOf !== undefined) {
    ctx.addIssue({ code: 'custom', message: 'neighbours are the turns as they are now, so expand does not go with asOf', path: ['expand'] });
  }
  if (typeof body.minScore === 'number') {
    const floor = mode === 'keyword' ? KeywordFloorSchema : mode === 'semantic' ? SemanticFloorSchema : undefined;
    const message = floor ? floor.safeParse(body.minScore).error?.issues[0]?.message : mode === 'both' ? 'mode "both" fuses two searches with their own scores: give {keyword, semantic}' : undefined;
    if (message) ctx.addIssue({ code: 'custom', message, path: ['minScore'] });
  }
}

const QuerySchema = textSchema().trim().min(1, 'must not be empty').max(QUERY_MAX_CHARS, `must be at most ${QUERY_MAX_CHARS} characters`);

const needsQuery = (body: { mode?: RetrievalMode | undefined; query?: string | undefined }) =>
  body.mode === 'list' || body.query !== undefined;

export const RetrieveBodySchema = z
  .strictObject({
    mode: z.enum(retrievalModes).optional(),
    query: QuerySchema.optional(),
    ...retrievalFilters,
    weights: z
      .strictObject({ keyword: z.number().min(0).max(100).optional(), semantic: z.number().min(0).max(100).optional() })
      .optional(),
  })
  .refine(needsQuery, { message: 'is required unless mode is "list"', path: ['query'] })
  .superRefine(refineFilters)
  .openapi('RetrieveBody');

export const JournalSchema = z
  .object({
    mode: z.enum(retrievalModes),
    degraded: z.enum(['no-embeddings', 'embeddings-unavailable', 'embeddings-pending']).optional(),
    embeddingModel: z.string().optional(),
    weights: z
      .object({ keyword: z.number(), semantic: z.number() })
      .optional()
      .openapi({
        description:
          'Mode "both": the weights the two lists were fused with (the request\'s, else keyword 1 and the serving model\'s semantic weight); semantic 0 when the search degraded to keyword alone',
      }),
    tookMs: z.number(),
  })
  .openapi('Journal');

export const RetrieveResultSchema = z
  .object({
    results: z.array(
      z.object({
        fact: FactSchema,
        score: z.number().nullable(),
        before: z.array(FactSchema).optional().openapi({ description: 'With `expand`: the turns just before this hit, oldest first ([] when it is in no conversation)' }),
        after: z.array(FactSchema).optional().openapi({ description: 'With `expand`: the turns just after this hit, oldest first' }),
      }),
    ),
    journal: JournalSchema,
  })
  .openapi('RetrieveResult');

export const ContextBodySchema = z
  .strictObject({
    query: QuerySchema,
    mode: z.enum(retrievalModes).optional(),
    ...retrievalFilters,
    instructionTypes: z.array(FactTypeSchema).max(50, 'at most 50 types').optional(),
  })
  .superRefine(refineFilters)
  .openapi('ContextBody');

export const ContextResultSchema = z
  .object({
    system: z.string(),
    messages: z.array(z.object({ role: z.literal('user'), content: z.string() })),
    factIds: z.array(z.uuid()).openapi({
      description: 'The hits in order; with `expand`, then their neighbours not already listed, in the order the block shows them',
    }),
    journal: JournalSchema,
  })
  .openapi('ContextResult');

export type RetrieveBody = z.infer<typeof RetrieveBodySchema>;
export type RetrieveResult = z.infer<typeof RetrieveResultSchema>;
export type Journal = z.infer<typeof JournalSchema>;
export type ContextBody = z.infer<typeof ContextBodySchema>;
export type ContextResult = z.infer<typeof ContextResultSchema>;
