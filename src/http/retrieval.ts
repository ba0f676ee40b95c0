import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Db } from '../db/client.ts';
import { embeddingStatus } from '../memory/facts/vectors.ts';
import { buildContext } from '../memory/retrieval/prompt.ts';
import { type QueryEmbedder, retrieve } from '../memory/retrieval/retrieve.ts';
import { ContextBodySchema, ContextResultSchema, RetrieveBodySchema, RetrieveResultSchema } from '../memory/retrieval/schemas.ts';
import { redactUrl } from '../foundation/redact.ts';
import { addToPhase } from '../foundation/request-timing.ts';
import { principalOf } from './auth.ts';
import type { AppEnv } from './app-env.ts';
import { primaryReads, readFrom, type ReadRouting } from './read-routing.ts';
import { bearerAuth, because, errorResponses, json } from './openapi.ts';
import { validationHook } from './validation.ts';

const tags = ['retrieval'];
const security = bearerAuth;

const searchErrors = errorResponses({
  403: because.scopeMismatch,
  413: because.bodyOver1MiB,
  422: 'semantic-unavailable: `mode: semantic` on a deployment without embeddings',
  503: 'the embeddings endpoint is down for a search by meaning',
});

const retrieveRoute = createRoute({
  method: 'post',
  path: '/v1/memory/retrieve',
  operationId: 'retrieve',
  tags,
  security,
  summary: 'Find facts by keyword, by meaning, or both',
  request: { body: { ...json(RetrieveBodySchema, 'What to find'), required: true } },
  responses: { 200: json(RetrieveResultSchema, 'Facts with scores, and what the search did'), ...searchErrors },
});

const contextRoute = createRoute({
  method: 'post',
  path: '/v1/memory/context',
  operationId: 'buildContext',
  tags,
  security,
  summary: 'What a runtime puts in front of a model: the <memory> block and the system line',
  request: { body: { ...json(ContextBodySchema, 'What the model is about to be asked'), required: true } },
  responses: { 200: json(ContextResultSchema, 'System text, one user message, fact ids'), ...searchErrors },
});

const EmbeddingStatusSchema = z
  .object({
    configured: z
      .object({
        model: z.string(),
        endpoint: z.string().openapi({ description: 'Scheme, host and path only: credentials and query string are not shown' }),
      })
      .nullable(),
    models: z.array(
      z.object({
        model: z.string(),
        dims: z.number().int(),
        state: z.enum(['backfilling', 'active']),
        live: z.number().int(),
        embedded: z.number().int(),
        backlog: z.number().int(),
      }),
    ),
  })
  .openapi('EmbeddingStatus');

const embeddingsRoute = createRoute({
  method: 'get',
  path: '/v1/memory/embeddings',
  operationId: 'getEmbeddingStatus',
  tags,
  security,
  summary: "The tenant's embedding coverage: active model, backfill progress, backlog (admin)",
  responses: { 200: json(EmbeddingStatusSchema, 'Per model in use: live facts, embedded, backlog'), ...errorResponses({ 403: because.tenantAdminsOnly }) },
});

/** An answer made by `respond` (c.json's JSON.stringify), its time counted as the request's `serialise` phase. */
function serialised<T>(respond: () => T): T {
  const started = performance.now();
  const response = respond();
  addToPhase('serialise', performance.now() - started);
  return response;
}

export interface RetrievalDeps {
  db: Db;
  embedder: QueryEmbedder | undefined;
  configured: { model: string; endpoint: string } | undefined;
  /** Where searches go (a replica, with read-your-writes); default the primary. */
  reads?: ReadRouting | undefined;
}

export function retrievalRoutes({ db, embedder, configured, reads = primaryReads(db) }: RetrievalDeps) {
  const callerOf = (c: Context<AppEnv>) => ({ db, principal: principalOf(c), embedder });
  /** A search's caller: its database is the one this caller's reads go to (http/read-routing.ts). */
  const searchAs = <T>(c: Context<AppEnv>, verb: (caller: ReturnType<typeof callerOf>) => Promise<T>) =>
    readFrom(c, reads, (readDb) => verb({ ...callerOf(c), db: readDb }));
  const shown = configured ? { model: configured.model, endpoint: redactUrl(configured.endpoint) } : null;
  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook })
    .openapi(retrieveRoute, async (c) => {
      const result = await searchAs(c, (caller) => retrieve(caller, c.req.valid('json')));
      return serialised(() => c.json(result, 200));
    })
    .openapi(contextRoute, async (c) => {
      const result = await searchAs(c, (caller) => buildContext(caller, c.req.valid('json')));
      return serialised(() => c.json(result, 200));
    })
    .openapi(embeddingsRoute, async (c) => c.json({ configured: shown, models: await embeddingStatus(callerOf(c)) }, 200));
}
