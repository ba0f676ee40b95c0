import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Db } from '../db/client.ts';
import { dispatchOutbox } from '../jobs/outbox.ts';
import type { Queues } from '../jobs/queues.ts';
import { promptly } from '../jobs/redis.ts';
import { type ErasureTarget, getErasure, listErasures, requestErasure, resumeErasure } from '../lifecycle/erasure.ts';
import type { Logger } from '../log.ts';
import { IdSchema } from '../memory/schemas.ts';
import { principalOf } from './auth.ts';
import type { AppEnv } from './context.ts';
import { bearerAuth, errorResponses, json } from './openapi.ts';
import { validationHook } from './validation.ts';

const tags = ['lifecycle'];
const security = bearerAuth;

/** Exactly one of a fact, a person (subject) or a conversation (DESIGN §10). */
const ErasureRequestSchema = z
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

const ErasureSchema = z
  .object({
    id: z.uuid(),
    status: z.enum(['pending', 'running', 'completed', 'failed']),
    target: z.object({ kind: z.enum(['fact', 'subject', 'conversation']), factId: z.string().optional(), subjectKind: z.string().optional() }),
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

const IdParamSchema = z.object({ id: z.uuid({ message: 'must be an erasure id (a UUID)' }).openapi({ param: { name: 'id', in: 'path' } }) });

const requestRoute = createRoute({
  method: 'post',
  path: '/v1/memory/erasures',
  tags,
  security,
  summary: "Erase a fact, a person's data or a conversation (tenant admin)",
  request: { body: { ...json(ErasureRequestSchema, 'What to erase'), required: true } },
  responses: { 202: json(ErasureSchema.pick({ id: true, status: true }), 'Queued'), ...errorResponses },
});

const getRoute = createRoute({
  method: 'get',
  path: '/v1/memory/erasures/{id}',
  tags,
  security,
  summary: 'An erasure: status and counts (tenant admin)',
  request: { params: IdParamSchema },
  responses: { 200: json(ErasureSchema, 'The erasure'), ...errorResponses },
});

const listRoute = createRoute({
  method: 'get',
  path: '/v1/memory/erasures',
  tags,
  security,
  summary: 'Erasures, newest first (tenant admin)',
  request: {
    query: z.strictObject({
      limit: z.string().regex(/^[1-9][0-9]?$|^100$/, 'limit must be a whole number from 1 to 100').transform(Number).optional(),
      cursor: z.string().max(512).optional(),
    }),
  },
  responses: {
    200: json(z.object({ data: z.array(ErasureSchema), hasMore: z.boolean(), nextCursor: z.string().nullable() }), 'A page of erasures'),
    ...errorResponses,
  },
});

const resumeRoute = createRoute({
  method: 'post',
  path: '/v1/memory/erasures/{id}/resume',
  tags,
  security,
  summary: 'Run a failed erasure again, e.g. after a legal hold was lifted (tenant admin)',
  request: { params: IdParamSchema },
  responses: { 202: json(ErasureSchema.pick({ id: true, status: true }), 'Queued again'), ...errorResponses },
});

export interface ErasureRouteDeps {
  db: Db;
  logger: Logger;
  queues?: Queues | undefined;
  /** Without it erasure is off (503). */
  erasureKey?: string | undefined;
}

export function erasureRoutes({ db, logger, queues, erasureKey }: ErasureRouteDeps) {
  const ctx = (c: Context<AppEnv>) => ({ db, principal: principalOf(c) });
  const dispatch = async (outbox: Parameters<typeof dispatchOutbox>[1][number]) => {
    if (queues) await promptly(dispatchOutbox(queues, [outbox]), logger, 'queue the erasure');
  };
  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook })
    .openapi(requestRoute, async (c) => {
      const body = c.req.valid('json');
      const target: ErasureTarget = body.factId
        ? { kind: 'fact', id: body.factId }
        : body.subject
          ? { kind: body.subject.kind, id: body.subject.id }
          : { kind: 'conversation', id: body.conversationId! };
      const { erasure, outbox } = await requestErasure(ctx(c), target, erasureKey);
      await dispatch(outbox);
      return c.json({ id: erasure.id, status: erasure.status }, 202);
    })
    .openapi(listRoute, async (c) => c.json(await listErasures(ctx(c), c.req.valid('query')), 200))
    .openapi(getRoute, async (c) => c.json(await getErasure(ctx(c), c.req.valid('param').id), 200))
    .openapi(resumeRoute, async (c) => {
      const { erasure, outbox } = await resumeErasure(ctx(c), c.req.valid('param').id);
      await dispatch(outbox);
      return c.json({ id: erasure.id, status: erasure.status }, 202);
    });
}
