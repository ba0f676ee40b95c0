/**
 * The wire shapes of erasure (DESIGN §10): routes validate with them, OpenAPI is generated from
 * them, and the domain and the client take their types from them.
 */
import { z } from '@hono/zod-openapi';
import { jobStatuses } from '../db/schema/lifecycle.ts';
import { IdSchema } from '../memory/schemas.ts';
import { textSchema } from '../foundation/storable.ts';

/** Exactly one of a fact, a person (subject) or a conversation. */
export const ErasureRequestSchema = z
  .strictObject({
    factId: z.uuid({ message: 'must be a fact id (a UUID)' }).optional(),
    subject: z.strictObject({ kind: z.enum(['participant', 'external']), id: IdSchema }).optional(),
    conversationId: IdSchema.optional().openapi({ description: 'A thread id: every fact of that conversation' }),
  })
  .refine((body) => [body.factId, body.subject, body.conversationId].filter((v) => v !== undefined).length === 1, {
    message: 'give exactly one of factId, subject, conversationId',
    path: ['factId'],
  })
  .openapi('ErasureRequest');

export const ErasureSchema = z
  .object({
    id: z.uuid(),
    status: z.enum(jobStatuses),
    target: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('fact'), factId: z.string() }),
      z.object({ kind: z.literal('subject'), subjectKind: z.string() }),
      z.object({ kind: z.literal('conversation') }),
    ]),
    requestedBy: z.string(),
    factsErased: z.number().int(),
    revisionsErased: z.number().int(),
    embeddingsDeleted: z.number().int(),
    error: z.object({ code: z.string(), factIds: z.array(z.string()).optional() }).nullable(),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
  })
  .openapi('Erasure');

export const ErasureListSchema = z
  .object({ data: z.array(ErasureSchema), hasMore: z.boolean(), nextCursor: z.string().nullable() })
  .openapi('ErasureList');

export const ErasureListQuerySchema = z.strictObject({
  limit: z.string().regex(/^[1-9][0-9]?$|^100$/, 'limit must be a whole number from 1 to 100').transform(Number).optional(),
  cursor: textSchema().max(512).optional(),
});

export const ErasureIdParamSchema = z.object({
  id: z.uuid({ message: 'must be an erasure id (a UUID)' }).openapi({ param: { name: 'id', in: 'path' } }),
});

export type ErasureStatus = z.infer<typeof ErasureSchema>;
export type ErasureRequest = z.infer<typeof ErasureRequestSchema>;
