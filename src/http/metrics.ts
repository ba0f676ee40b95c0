import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import { httpRequestDuration, httpRequests, registry } from '../foundation/metrics.ts';
import type { AppEnv } from './app-env.ts';

/** Methods a route of ours answers; any other a client invents is counted as `other`, so the label stays bounded. */
const knownMethods = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The pattern of the route a request matched (`/v1/memory/facts/:id`), never its path: ids would
 * make a series per fact. Hono matches every handler up front, middleware first in the order they
 * were added, so the last match is the route's own handler, whichever middleware answered (a 401
 * from `authenticate` still counts under its route). When only the wildcard middleware matched, no
 * route did.
 */
export function routeLabel(c: Context): string {
  const last = matchedRoutes(c).at(-1);
  return last && !last.path.endsWith('*') ? last.path : 'unmatched';
}

/** Counts and times every request by method, route pattern and status (mnemo_http_*). */
export const recordRequests = (): MiddlewareHandler<AppEnv> => async (c, next) => {
  const started = performance.now();
  await next();
  const labels = { method: knownMethods.has(c.req.method) ? c.req.method : 'other', route: routeLabel(c), status: String(c.res.status) };
  httpRequests.inc(labels);
  httpRequestDuration.observe(labels, (performance.now() - started) / 1000);
};

/**
 * `GET /metrics` (DESIGN §7): this process's registry in Prometheus's text format. Unauthenticated,
 * like /healthz, and outside /v1: a load balancer must not expose it publicly (deploy/nginx.conf
 * refuses it), Prometheus scrapes each node directly. Left out of /openapi.json: it is not JSON
 * and not for API clients.
 */
export function metricsRoutes() {
  return new Hono<AppEnv>().get('/metrics', async (c) => c.body(await registry.metrics(), 200, { 'Content-Type': registry.contentType }));
}
