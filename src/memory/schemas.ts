/**
 * The building blocks of memory's wire schemas (DESIGN §4, §5) that more than one concept uses:
 * ids, fact types, scopes as written, and the enums a fact and its filters share. The facts'
 * shapes are in facts/schemas.ts, the searches' in retrieval/schemas.ts; episodes/ and lifecycle/
 * build theirs from these too.
 */
import { z } from '@hono/zod-openapi';
import { memoryKinds, trustLevels } from '../db/schema/facts.ts';
import { TIMESTAMP_MAX, TIMESTAMP_MIN, textSchema, timestampSchema } from '../foundation/storable.ts';

export const TimestampSchema = timestampSchema().openapi({
  example: '2026-01-31T12:00:00Z',
  description: `An ISO 8601 date-time with offset, from ${TIMESTAMP_MIN} to ${TIMESTAMP_MAX} in UTC`,
});

const TYPE_PATTERN = /^[a-z0-9][a-z0-9._-]*$/;

export const IdSchema = textSchema().min(1, 'must not be empty').max(128, 'must be at most 128 characters');

export const FactTypeSchema = IdSchema.regex(TYPE_PATTERN, 'must match ^[a-z0-9][a-z0-9._-]*$ (e.g. acme.preference)').openapi({
  example: 'acme.note',
});

/** The scope keys, each optional: for scopes as written and scope filters in queries. */
export const scopeKeys = {
  orgId: IdSchema.optional(),
  projectId: IdSchema.optional(),
  userId: IdSchema.optional(),
  participantId: IdSchema.optional(),
  threadId: IdSchema.optional(),
  sessionId: IdSchema.optional(),
};

/** A scope as written: `tenantId` may be given but must be the caller's (else 403). */
export const ScopeInputSchema = z.strictObject({ tenantId: IdSchema.optional(), ...scopeKeys }).openapi('ScopeInput');

export const MemoryKindSchema = z.enum(memoryKinds);
export const TrustSchema = z.enum(trustLevels);
/** Who a fact is about (a `subjects` entry's kind). */
export const SubjectKindSchema = z.enum(['participant', 'user', 'external']);

export type ScopeInput = z.infer<typeof ScopeInputSchema>;
