import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Caller } from '../core/caller.ts';
import type { Db } from '../db/client.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import { parseProvenanceHeader } from '../kiwifs/provenance.ts';
import { writeFact, writeFacts } from '../memory/facts/insert.ts';
import { listFacts, listRevisions, readFact } from '../memory/facts/read.ts';
import { deleteFact, supersedeFact, verifyFact } from '../memory/facts/revise.ts';
import type { WriteOptions } from '../memory/facts/write-rules.ts';
import {
  DeleteQuerySchema,
  FactIdParamSchema,
  FactListSchema,
  FactSchema,
  ListQuerySchema,
  type ProvenanceRef,
  ReadQuerySchema,
  RevisionListSchema,
  SupersedeBodySchema,
  VerifyBodySchema,
  WriteFactBodySchema,
  WriteFactsBodySchema,
  WrittenFactsSchema,
} from '../memory/facts/schemas.ts';
import { principalOf } from './auth.ts';
import type { AppEnv } from './app-env.ts';
import { idempotent, sendOutcome as send } from './idempotency.ts';
import { phase } from '../foundation/request-timing.ts';
import { primaryReads, readFrom, type ReadOptions, type ReadRouting } from './read-routing.ts';
import { bearerAuth, because, errorResponses, idempotencyKeyHeader, json } from './openapi.ts';
import { itemsValidationHook, validationHook } from './validation.ts';

const tags = ['facts'];
const security = bearerAuth;
/** The errors of a write that honours Idempotency-Key, on top of the route's own. */
const idempotentWrite = { 409: because.idempotencyInFlight, 413: because.bodyOver1MiB, 422: because.idempotencyKeyReused } as const;
/** A change to an existing fact (supersede, verify, delete): the fact must be there, and yours to change. */
const changeOfFact = {
  403: 'permission-denied: you may read this fact but not change it',
  404: because.factNotFound,
  409: 'fact-changed: `expectVersion` is not the current version (`currentVersion` says which is)',
} as const;
const idempotencyHeader = idempotencyKeyHeader.extend({
  'x-provenance': z.string().optional().openapi({ description: '`type:id`, appended to derivedFrom' }),
  'x-actor': z.string().optional().openapi({ description: 'Who the provenance names as actor' }),
});

/** `X-Provenance: type:id` (+ `X-Actor`) → a derivedFrom entry; a malformed header is ignored. */
export function provenanceFrom(c: Context<AppEnv>, now = new Date()): ProvenanceRef | undefined {
  const parsed = parseProvenanceHeader(c.req.header('x-provenance'));
  if (!parsed) return undefined;
  const actor = c.req.header('x-actor')?.trim();
  return {
    ...parsed,
    date: now.toISOString(),
    ...(actor ? { actor: actor.slice(0, 256) } : {}),
  };
}


const writeRoute = createRoute({
  method: 'post',
  path: '/v1/memory/facts',
  operationId: 'writeFact',
  tags,
  security,
  summary: 'Write a fact',
  request: { headers: idempotencyHeader, body: { ...json(WriteFactBodySchema, 'The fact'), required: true } },
  responses: {
    201: json(FactSchema, 'The fact, version 1'),
    ...errorResponses({
      ...idempotentWrite,
      403: `permission-denied: your role or projects do not let you write in this scope, or a legal hold is for tenant admins; ${because.scopeMismatch}`,
      409: `${because.idempotencyInFlight}; ${because.erasureInProgress}`,
    }),
  },
});

/** The batch write's path: a custom method on the collection, so it never reads as a fact id. */
export const BATCH_WRITE_PATH = '/v1/memory/facts:batch';

const writeBatchRoute = createRoute({
  method: 'post',
  path: BATCH_WRITE_PATH,
  operationId: 'writeFacts',
  tags,
  security,
  summary: 'Write up to 1,000 facts, all or nothing',
  description:
    'One transaction: every fact is written, or none. A refused item refuses the batch, and the error names it ' +
    '(`item`, and `facts.N.field` in the message and `details`). One `Idempotency-Key` covers the batch. ' +
    'Bodies up to 16 MiB.',
  request: { headers: idempotencyHeader, body: { ...json(WriteFactsBodySchema, 'The facts'), required: true } },
  responses: {
    201: json(WrittenFactsSchema, 'The facts, version 1, in the order given'),
    ...errorResponses({
      ...idempotentWrite,
      400: 'bad-input: an item breaks a rule (`item` says which), or the batch does (no facts, over 1,000, an unknown field)',
      403: `permission-denied: an item is in a scope you may not write in (\`item\` says which), or sets a legal hold; ${because.scopeMismatch}`,
      409: `${because.idempotencyInFlight}; ${because.erasureInProgress} (\`item\` says which)`,
      413: 'payload-too-large: the body is over 16 MiB',
    }),
  },
});

const listRoute = createRoute({
  method: 'get',
  path: '/v1/memory/facts',
  operationId: 'listFacts',
  tags,
  security,
  summary: 'List visible facts, newest first',
  request: { query: ListQuerySchema },
  responses: { 200: json(FactListSchema, 'A page of facts'), ...errorResponses() },
});

const readRoute = createRoute({
  method: 'get',
  path: '/v1/memory/facts/{id}',
  operationId: 'readFact',
  tags,
  security,
  summary: 'Read a fact (current, ?version=N or ?asOf=time)',
  request: { params: FactIdParamSchema, query: ReadQuerySchema },
  responses: { 200: json(FactSchema, 'The fact'), ...errorResponses({ 404: `${because.factNotFound}; or no such version, or none at that time` }) },
});

const supersedeRoute = createRoute({
  method: 'post',
  path: '/v1/memory/facts/{id}/supersede',
  operationId: 'supersedeFact',
  tags,
  security,
  summary: 'Write the next revision (same id, type and scope)',
  request: {
    params: FactIdParamSchema,
    headers: idempotencyHeader,
    body: { ...json(SupersedeBodySchema, 'The new revision'), required: true },
  },
  responses: {
    200: json(FactSchema, 'The new revision'),
    ...errorResponses({
      ...idempotentWrite,
      ...changeOfFact,
      403: `${changeOfFact[403]}; or a legal hold is for tenant admins`,
      409: `${changeOfFact[409]}; ${because.erasureInProgress}; ${because.idempotencyInFlight}`,
    }),
  },
});

const verifyRoute = createRoute({
  method: 'post',
  path: '/v1/memory/facts/{id}/verify',
  operationId: 'verifyFact',
  tags,
  security,
  summary: 'Mark a fact verified by a person (admin or member)',
  request: {
    params: FactIdParamSchema,
    headers: idempotencyHeader,
    body: { ...json(VerifyBodySchema, 'Optional expectVersion'), required: false },
  },
  responses: {
    200: json(FactSchema, 'The verified revision'),
    ...errorResponses({
      ...idempotentWrite,
      ...changeOfFact,
      403: `${changeOfFact[403]}; or you are a service: only a person (admin or member) verifies; or the fact is held for review and you asserted its text: another person releases it`,
      409: `${changeOfFact[409]}; ${because.idempotencyInFlight}`,
    }),
  },
});

const deleteRoute = createRoute({
  method: 'delete',
  path: '/v1/memory/facts/{id}',
  operationId: 'deleteFact',
  tags,
  security,
  summary: 'Delete a fact (tombstone revision)',
  request: { params: FactIdParamSchema, query: DeleteQuerySchema },
  responses: {
    200: json(FactSchema, 'The tombstone revision'),
    ...errorResponses({ ...changeOfFact, 409: `${changeOfFact[409]}; legal-hold: the fact is under legal hold` }),
  },
});

const revisionsRoute = createRoute({
  method: 'get',
  path: '/v1/memory/facts/{id}/revisions',
  operationId: 'listFactRevisions',
  tags,
  security,
  summary: 'Every revision of a fact, newest first',
  request: { params: FactIdParamSchema },
  responses: { 200: json(RevisionListSchema, 'The revisions'), ...errorResponses({ 404: because.factNotFound }) },
});

/** The facts routes: each parses, authorises via the principal, calls one domain verb. */
export interface FactRouteDeps {
  db: Db;
  /** Hands the new facts' vectors to the queues after the commit (once per request; nothing without embeddings). */
  dispatch: Dispatcher;
  /** When erasure is on: writes naming someone being erased answer 409. */
  erasureKey?: string | undefined;
  /** Where lists and reads by id go (a replica, with read-your-writes); default the primary. */
  reads?: ReadRouting | undefined;
}

export function factRoutes({ db, dispatch, erasureKey, reads = primaryReads(db) }: FactRouteDeps) {
  const callerOf = (c: Context<AppEnv>) => ({ db, principal: principalOf(c) });
  /** A read's caller: its database is the one this caller's reads go to (http/read-routing.ts). */
  const readAs = <T>(c: Context<AppEnv>, verb: (caller: Caller) => Promise<T>, options?: ReadOptions) =>
    readFrom(c, reads, (readDb) => verb({ db: readDb, principal: principalOf(c) }), options);
  // A fact asked for by id exists somewhere: missing on the replica, it may not have arrived yet.
  const byId = { notFoundAsksPrimary: true };
  /**
   * Every write of facts: `verb` runs once per Idempotency-Key (http/idempotency.ts), in the key's
   * transaction, with the request's provenance; its answer is stored for a replay, and sent.
   * New content wants a vector: queued once the write has committed, one request for the tenant
   * however many facts it wrote (the job reads them from Postgres). A replay or a refused write
   * has no result, and queues nothing; nor does a write that never changes content (`keepsContent`).
   */
  const write = async (
    c: Context<AppEnv>,
    body: unknown,
    status: 200 | 201,
    verb: (caller: Caller, options: WriteOptions) => Promise<unknown>,
    { keepsContent = false } = {},
  ) => {
    const options = { provenance: provenanceFrom(c), erasureKey };
    const outcome = await idempotent(c, db, principalOf(c), body, async (tx) => ({ status, body: await verb({ ...callerOf(c), tx }, options) }));
    if (!keepsContent && outcome.result !== undefined) await phase('queue-embedding', () => dispatch.embedding(principalOf(c).tenantId));
    return send(c, outcome);
  };

  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook })
    .openapi(writeRoute, async (c) => {
      const body = c.req.valid('json');
      return write(c, body, 201, (caller, options) => writeFact(caller, body, options));
    })
    .openapi(writeBatchRoute, async (c) => {
      const body = c.req.valid('json');
      return write(c, body, 201, async (caller, options) => ({ data: await writeFacts(caller, body.facts, options) }));
    }, itemsValidationHook('facts'))
    .openapi(listRoute, async (c) => c.json(await readAs(c, (caller) => listFacts(caller, c.req.valid('query'))), 200))
    .openapi(readRoute, async (c) => {
      const { id } = c.req.valid('param');
      return c.json(await readAs(c, (caller) => readFact(caller, id, c.req.valid('query')), byId), 200);
    })
    .openapi(supersedeRoute, async (c) => {
      const { id } = c.req.valid('param');
      const body = c.req.valid('json');
      return write(c, body, 200, (caller, options) => supersedeFact(caller, id, body, options));
    })
    .openapi(verifyRoute, async (c) => {
      const { id } = c.req.valid('param');
      const body = c.req.valid('json') ?? {};
      // Verifying changes trust, never content: the vectors are carried to the new version.
      return write(c, body, 200, (caller) => verifyFact(caller, id, body), { keepsContent: true });
    })
    .openapi(deleteRoute, async (c) => {
      const { id } = c.req.valid('param');
      return c.json(await deleteFact(callerOf(c), id, c.req.valid('query')), 200);
    })
    .openapi(revisionsRoute, async (c) => {
      const { id } = c.req.valid('param');
      return c.json(await readAs(c, (caller) => listRevisions(caller, id), byId), 200);
    });
}
