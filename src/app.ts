import { OpenAPIHono } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import type { TokenVerifier } from './auth/verify.ts';
import type { Db } from './db/client.ts';
import { databaseUnavailable } from './db/errors.ts';
import { AppError } from './foundation/app-error.ts';
import { authenticate } from './http/auth.ts';
import type { AppEnv } from './http/app-env.ts';
import { errorBody, respondWithError } from './http/errors.ts';
import { episodeRoutes } from './http/episodes.ts';
import { erasureRoutes } from './http/erasures.ts';
import { BATCH_WRITE_PATH, factRoutes } from './http/facts.ts';
import { type ReadRouting, rememberWrites } from './http/read-routing.ts';
import { retrievalRoutes } from './http/retrieval.ts';
import { healthRoutes, type ReadinessProbe } from './http/health.ts';
import { metricsRoutes, recordRequests } from './http/metrics.ts';
import { closeAfterRefusedBody, emptyJsonBodyIsNoBody, requestId, requestLog, serverTiming } from './http/middleware.ts';
import { limitMcpToolCalls, limitRequests, type RateLimiter } from './http/rate-limit.ts';
import { describeMcp, openApiInfo } from './http/openapi.ts';
import { consoleRoutes } from './http/console.ts';
import { docsRoutes } from './http/docs.ts';
import { createDispatcher, type Dispatcher } from './jobs/dispatcher.ts';
import type { Logger } from './foundation/log.ts';
import { MCP_PATH, mcpRoutes } from './mcp/server.ts';
import { DEFAULT_REMEMBER_SETTINGS, type RememberSettings } from './foundation/remember-settings.ts';
import type { QueryEmbedder } from './memory/retrieval/retrieve.ts';

export const BODY_LIMIT_BYTES = 1024 * 1024;
/**
 * The batch write's limit: 1,000 facts of 16 KiB serialized on average (a fact's content may
 * reach 64 KiB, but a batch of those is better sent as several). docs/decisions/0039-batch-writes.md.
 */
export const BATCH_BODY_LIMIT_BYTES = 16 * 1024 * 1024;

/** The body limit of a request path: the batch write's, or everyone else's. */
export const bodyLimitFor = (path: string): number => (path === BATCH_WRITE_PATH ? BATCH_BODY_LIMIT_BYTES : BODY_LIMIT_BYTES);

/**
 * Hono's bodyLimit, decided from the headers where it decides from them. bodyLimit first reads
 * `c.req.raw.body`, which makes @hono/node-server build a full WHATWG Request with a web stream
 * over the socket, and the route's body is then read through that stream rather than straight
 * from the socket: ~0.1 ms of a single write's CPU. The same decisions without it: a method
 * without a body (GET, HEAD, TRACE: `body` is null there) passes; a Content-Length without
 * Transfer-Encoding answers `onError` when it is over the limit and passes otherwise; anything
 * else (a chunked body) is counted as it arrives, by bodyLimit itself.
 */
function limitBody(maxSize: number, onError: (c: Context<AppEnv>) => Response | Promise<Response>): MiddlewareHandler<AppEnv> {
  const counting = bodyLimit({ maxSize, onError });
  return async (c, next) => {
    const method = c.req.method;
    if (method === 'GET' || method === 'HEAD' || method === 'TRACE') return next();
    const length = c.req.header('content-length');
    if (length !== undefined && c.req.header('transfer-encoding') === undefined) {
      return Number.parseInt(length || '0', 10) > maxSize ? onError(c) : next();
    }
    return counting(c, next);
  };
}

/** Search by meaning, when this runtime has embeddings (the dispatcher queues the new facts' vectors). */
export interface EmbeddingServices {
  embedder: QueryEmbedder;
  configured: { model: string; endpoint: string };
}

export interface AppDependencies {
  logger: Logger;
  readiness: ReadinessProbe;
  db: Db;
  verifyToken: TokenVerifier;
  embeddings?: EmbeddingServices | undefined;
  /**
   * Hands work to the queues after a request's commit (vectors, reports, erasures, schedulers);
   * absent, nothing is queued and the reconciler queues it all.
   */
  dispatcher?: Dispatcher | undefined;
  /** The erasure HMAC key (MNEMO_ERASURE_KEY); without it erasure requests answer 503. */
  erasureKey?: string | undefined;
  /** Where lists, searches and reports read (a replica, with read-your-writes); absent, the primary. */
  reads?: ReadRouting | undefined;
  /** Rate limits per route class (src/http/rate-limit.ts); absent, nothing is limited. */
  rateLimiter?: RateLimiter | undefined;
  /** What the MCP tool `kindgi_remember` writes, and where (MNEMO_MCP_*); absent, the defaults. */
  mcp?: Omit<RememberSettings, 'erasureKey'> | undefined;
  /** Answer each request's phases in `Server-Timing` (MNEMO_SERVER_TIMING). */
  serverTiming?: boolean | undefined;
}

/** Builds the HTTP app: middleware and routes, nothing that listens or touches process state. */
export function createApp({
  logger,
  readiness,
  db,
  verifyToken,
  embeddings,
  dispatcher,
  erasureKey,
  reads,
  rateLimiter,
  mcp = DEFAULT_REMEMBER_SETTINGS,
  serverTiming: timing = false,
}: AppDependencies) {
  const app = new OpenAPIHono<AppEnv>();
  const dispatch = dispatcher ?? createDispatcher({ logger });

  // First, so the time counted is the whole chain's.
  app.use('*', recordRequests());
  app.use('*', requestId());
  app.use('*', requestLog(logger));
  app.use('*', closeAfterRefusedBody());
  if (timing) app.use('*', serverTiming());

  app.route('/', healthRoutes(readiness));
  app.route('/', metricsRoutes());

  // KiwiFS's report path, for KiwiFS clients: the same limit and token as /v1.
  const limitTo = (maxSize: number, words: string) =>
    limitBody(maxSize, (c) => respondWithError(c, new AppError('payload-too-large', `Request body is larger than ${words}`)));
  const bodyLimitOf = { batch: limitTo(BATCH_BODY_LIMIT_BYTES, '16 MiB'), other: limitTo(BODY_LIMIT_BYTES, '1 MiB') };
  // bodyLimitFor (the 100-continue check) and this choice must agree.
  for (const path of ['/v1/*', '/api/kiwi/*']) {
    app.use(path, (c, next) => (bodyLimitFor(c.req.path) === BATCH_BODY_LIMIT_BYTES ? bodyLimitOf.batch : bodyLimitOf.other)(c, next));
    app.use(path, authenticate(verifyToken));
    // Limits are per caller, so after authentication; before the body is read, which a refused request spares.
    if (rateLimiter) app.use(path, limitRequests(rateLimiter));
    // After authentication: an unauthenticated request never makes the server read its body.
    app.use(path, emptyJsonBodyIsNoBody());
  }
  // Before the routes: once a caller's write has answered, its reads wait for the replica to have it.
  if (reads) app.use('*', rememberWrites(reads));
  app.route('/', factRoutes({ db, dispatch, erasureKey, reads }));
  app.route('/', retrievalRoutes({ db, embedder: embeddings?.embedder, configured: embeddings?.configured, reads }));
  app.route('/', episodeRoutes({ db, dispatch, reads }));
  app.route('/', erasureRoutes({ db, dispatch, erasureKey }));
  // MCP over streamable HTTP: its own body limit and bearer check (401 with WWW-Authenticate).
  app.route(
    '/',
    mcpRoutes({
      db,
      reads,
      verifyToken,
      logger,
      maxBodyBytes: BODY_LIMIT_BYTES,
      rateLimit: rateLimiter && limitMcpToolCalls(rateLimiter),
      embedder: embeddings?.embedder,
      remember: { ...mcp, erasureKey },
      dispatch,
    }),
  );

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
  describeMcp(app.openAPIRegistry, MCP_PATH);
  app.doc31('/openapi.json', openApiInfo);
  app.route('/', docsRoutes('/openapi.json'));
  app.route('/', consoleRoutes());

  app.notFound((c) => c.json(errorBody('not-found', `No route for ${c.req.method} ${c.req.path}`, c.get('requestId')), 404));

  app.onError((error, c) => {
    // The database restarting, unreachable or past the statement timeout: 503 with Retry-After,
    // never 500. Nothing was committed, so the client may retry (with its Idempotency-Key).
    const unavailable = databaseUnavailable(error);
    if (unavailable) {
      logger.warn('database unavailable', { requestId: c.get('requestId'), method: c.req.method, path: c.req.path, reason: unavailable.reason, error });
      c.header('Retry-After', String(unavailable.retryAfterSeconds));
      return respondWithError(c, unavailable);
    }
    if (error instanceof AppError) return respondWithError(c, error);
    if (error instanceof HTTPException && error.status < 500) {
      // Hono's own 4xx (e.g. malformed JSON) keeps its meaning under our envelope.
      const code = error.status === 413 ? 'payload-too-large' : error.status === 401 ? 'unauthenticated' : 'bad-input';
      return respondWithError(c, new AppError(code, error.message || 'Bad request'));
    }
    // The logger writes only the error's safe fields (name, message, code, frames): never the
    // SQL parameters a driver error carries (src/foundation/log.ts).
    logger.error('unhandled error', { requestId: c.get('requestId'), method: c.req.method, path: c.req.path, error });
    return respondWithError(c, new AppError('internal', `Internal error; quote request id ${c.get('requestId')}`));
  });

  return app;
}

export type App = ReturnType<typeof createApp>;
