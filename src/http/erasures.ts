import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Db } from '../db/client.ts';
import type { Caller } from '../core/caller.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { OutboxRow } from '../jobs/outbox.ts';
import { erasureTargetOf, getErasure, keyedTarget, listErasures, requestErasure, resumeErasure } from '../lifecycle/erasure.ts';
import {
  ErasureIdParamSchema,
  ErasureListQuerySchema,
  ErasureListSchema,
  ErasureRequestSchema,
  ErasureSchema,
} from '../lifecycle/schemas.ts';
import { principalOf } from './auth.ts';
import type { AppEnv } from './app-env.ts';
import { queueIdempotently } from './idempotency.ts';
import { bearerAuth, because, errorResponses, idempotencyKeyHeader, json } from './openapi.ts';
import { validationHook } from './validation.ts';

const tags = ['lifecycle'];
const security = bearerAuth;
const noErasure = 'not-found: no such erasure in this tenant';

const requestRoute = createRoute({
  method: 'post',
  path: '/v1/memory/erasures',
  operationId: 'startErasure',
  tags,
  security,
  summary: "Erase a fact, a person's data or a conversation (tenant admin)",
  request: { headers: idempotencyKeyHeader, body: { ...json(ErasureRequestSchema, 'What to erase'), required: true } },
  responses: {
    202: json(ErasureSchema.pick({ id: true, status: true }), 'Queued'),
    ...errorResponses({
      403: because.tenantAdminsOnly,
      404: `${because.factNotFound} (a fact's erasure)`,
      409: `legal-hold: the fact is under legal hold; ${because.idempotencyInFlight}`,
      413: because.bodyOver1MiB,
      422: because.idempotencyKeyReused,
      501: 'memory-operation-unsupported: erasure is off on this deployment (no MNEMO_ERASURE_KEY)',
    }),
  },
});

const getRoute = createRoute({
  method: 'get',
  path: '/v1/memory/erasures/{id}',
  operationId: 'getErasure',
  tags,
  security,
  summary: 'An erasure: status and counts (tenant admin)',
  request: { params: ErasureIdParamSchema },
  responses: { 200: json(ErasureSchema, 'The erasure'), ...errorResponses({ 403: because.tenantAdminsOnly, 404: noErasure }) },
});

const listRoute = createRoute({
  method: 'get',
  path: '/v1/memory/erasures',
  operationId: 'listErasures',
  tags,
  security,
  summary: 'Erasures, newest first (tenant admin)',
  request: { query: ErasureListQuerySchema },
  responses: { 200: json(ErasureListSchema, 'A page of erasures'), ...errorResponses({ 403: because.tenantAdminsOnly }) },
});

const resumeRoute = createRoute({
  method: 'post',
  path: '/v1/memory/erasures/{id}/resume',
  operationId: 'resumeErasure',
  tags,
  security,
  summary: 'Run a failed erasure again, e.g. after a legal hold was lifted (tenant admin)',
  request: { headers: idempotencyKeyHeader, params: ErasureIdParamSchema },
  responses: {
    202: json(ErasureSchema.pick({ id: true, status: true }), 'Queued again'),
    ...errorResponses({
      400: 'the erasure has not failed: only a failed one is resumed',
      403: because.tenantAdminsOnly,
      404: noErasure,
      409: because.idempotencyInFlight,
      422: because.idempotencyKeyReused,
    }),
  },
});

export interface ErasureRouteDeps {
  db: Db;
  /** Hands erasures to the queues after the commit (without queues, the reconciler does). */
  dispatch: Dispatcher;
  /** Without it erasure is off (501 memory-operation-unsupported). */
  erasureKey?: string | undefined;
}

export function erasureRoutes({ db, dispatch, erasureKey }: ErasureRouteDeps) {
  /** An erasure requested or resumed: recorded under the Idempotency-Key, then queued. */
  const queued = (
    c: Context<AppEnv>,
    body: unknown,
    record: (caller: Caller) => Promise<{ erasure: { id: string; status: string }; outbox: OutboxRow }>,
  ) =>
    queueIdempotently(c, { db, dispatch, what: 'queue the erasure' }, principalOf(c), body, async (tx) => {
      const { erasure, outbox } = await record({ ...callerOf(c), tx });
      return { job: erasure, outbox };
    });

  const callerOf = (c: Context<AppEnv>) => ({ db, principal: principalOf(c) });
  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook })
    .openapi(requestRoute, async (c) => {
      const target = erasureTargetOf(c.req.valid('json'));
      // The idempotency record keeps a hash of the request for 24 h: of the target only what may be kept.
      return queued(c, keyedTarget(target, erasureKey), (caller) => requestErasure(caller, target, erasureKey));
    })
    .openapi(listRoute, async (c) => c.json(await listErasures(callerOf(c), c.req.valid('query')), 200))
    .openapi(getRoute, async (c) => c.json(await getErasure(callerOf(c), c.req.valid('param').id), 200))
    .openapi(resumeRoute, async (c) => {
      const { id } = c.req.valid('param');
      return queued(c, {}, (caller) => resumeErasure(caller, id));
    });
}
