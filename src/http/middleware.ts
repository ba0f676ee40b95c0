import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../foundation/log.ts';
import { measuringPhases, type Phases, serverTimingHeader } from '../foundation/request-timing.ts';
import type { AppEnv } from './app-env.ts';

const inboundRequestId = /^[A-Za-z0-9_-]{1,128}$/;

/** Keeps a well-formed inbound `X-Request-Id` (DESIGN §7), otherwise makes one. */
export const requestId = (): MiddlewareHandler<AppEnv> => async (c, next) => {
  const inbound = c.req.header('x-request-id');
  const id = inbound && inboundRequestId.test(inbound) ? inbound : randomUUID();
  c.set('requestId', id);
  c.header('X-Request-Id', id);
  await next();
};

/**
 * MNEMO_SERVER_TIMING: measures the phases of the rest of the chain (src/foundation/request-timing.ts)
 * and answers them in `Server-Timing`, with the total from here on.
 */
export const serverTiming = (): MiddlewareHandler<AppEnv> => async (c, next) => {
  const phases: Phases = new Map();
  const started = performance.now();
  await measuringPhases(phases, next);
  c.header('Server-Timing', serverTimingHeader(phases, performance.now() - started));
};

/** One JSON line per request: method, path, status, ms, tenant, requestId. */
export const requestLog =
  (logger: Logger): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const started = performance.now();
    await next();
    const fields: Record<string, unknown> = {
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      ms: Math.round((performance.now() - started) * 10) / 10,
      requestId: c.get('requestId'),
    };
    const tenant = c.get('tenantId');
    if (tenant) fields.tenant = tenant;
    logger.info('request', fields);
  };

/**
 * A request refused before its body was read (413, 401, …) leaves that body on the socket;
 * @hono/node-server drains it for a while and then destroys the connection, which a client
 * reusing the keep-alive connection sees as a hang-up on its next request. Saying
 * `Connection: close` on error answers to requests with a body makes clients open a fresh one;
 * the API process then lets that connection linger until the client has sent the rest, so it can
 * read the answer (src/http/connections.ts).
 */
export const closeAfterRefusedBody = (): MiddlewareHandler<AppEnv> => async (c, next) => {
  await next();
  const length = c.req.header('content-length');
  const hasBody = length !== undefined ? length !== '0' : c.req.header('transfer-encoding') !== undefined;
  if (c.res.status >= 400 && hasBody) c.header('Connection', 'close');
};

const jsonMediaType = /^application\/([\w.-]+\+)?json\s*(;|$)/i;

/**
 * An empty body sent as JSON is no body. Clients send `Content-Type: application/json` with no
 * bytes after it (curl with the header and no `-d`, HTTP libraries that set it on every request);
 * parsing nothing as JSON would answer "Malformed JSON". Dropping the header makes such a request
 * what it is, bodiless: a route whose body is optional takes none, and a route whose body is
 * required says that it is (validationHook). A body of whitespace only holds no JSON value either.
 */
export const emptyJsonBodyIsNoBody = (): MiddlewareHandler<AppEnv> => async (c, next) => {
  const type = c.req.header('content-type');
  // The text is cached on the request: the route's validator parses it without reading again.
  if (type !== undefined && jsonMediaType.test(type) && (await c.req.text()).trim() === '') {
    const headers = new Headers(c.req.raw.headers);
    headers.delete('content-type');
    c.req.raw = new Request(c.req.raw.url, { method: c.req.raw.method, headers, signal: c.req.raw.signal });
  }
  await next();
};
