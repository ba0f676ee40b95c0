/**
 * Rate limits (DESIGN §7): each route class (`writes`, `searches`, `reports`, `reads`; which
 * routes fall in which: `routeClass`) has two fixed one-minute windows, one per caller (tenant +
 * token `sub`) and one per tenant (all its callers together), counted in Redis so that every API
 * node shares them. docs/decisions.md, "Rate limits", says why these classes and defaults.
 *
 * Redis away never stops the API: each limit has a twin in this node's memory that takes over
 * (the `mnemo_rate_limit_fallback` gauge is 1 meanwhile), so each node then allows the whole
 * limit on its own. A request is counted in one place only, Redis or memory, so nothing is
 * charged twice when Redis is back. Without Redis at all (jobs in-process, one node), memory is
 * the only place.
 *
 * Every answer of a limited class carries `RateLimit-Limit`, `RateLimit-Remaining` and
 * `RateLimit-Reset` (draft-ietf-httpapi-ratelimit-headers: the limit closest to running out);
 * over a limit, 429 `rate-limited` with `Retry-After`.
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Principal } from '../auth/permissions.ts';
import { type RateLimit, type RateLimitClass, type RateLimits, rateLimitClasses } from '../config.ts';
import { AppError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { rateLimitFallback, rateLimitRejections } from '../metrics.ts';
import type { AppEnv } from './app-env.ts';
import { principalOf } from './auth.ts';
import { respondWithError } from './errors.ts';

type Scope = 'caller' | 'tenant';

/** Where a request was counted, and what is left of that limit. */
interface Count {
  scope: Scope;
  limit: number;
  allowed: boolean;
  remaining: number;
  msBeforeReset: number;
}

/** The answer for one request: allowed or not, and the limit its headers describe. */
export type RateLimitVerdict = Count & { routeClass: RateLimitClass };

export interface RateLimiter {
  /** Counts one request of `routeClass` by `principal`; undefined when the class is not limited. */
  take(routeClass: RateLimitClass, principal: Principal): Promise<RateLimitVerdict | undefined>;
}

export interface RateLimiterOptions {
  limits: RateLimits;
  /** Shared by every API node; without it (jobs in-process, one node) the limits live in this process. */
  redis?: Redis | undefined;
  /** Key prefix in Redis, e.g. `<MNEMO_QUEUE_PREFIX>:rl`. */
  keyPrefix: string;
  logger: Logger;
  /** The window of every limit; a minute, as MNEMO_RATE_LIMIT_* are counted (tests shorten it). */
  windowSeconds?: number;
}

/** After Redis fails, this node limits alone for this long before asking Redis again. */
const REDIS_RETRY_MS = 1000;

/** One limit (one class, one scope): counted in Redis while it answers, else in this node's memory. */
interface Limit {
  scope: Scope;
  points: number;
  shared: RateLimiterRedis | undefined;
  local: RateLimiterMemory;
}

export function createRateLimiter({ limits, redis, keyPrefix, logger, windowSeconds = 60 }: RateLimiterOptions): RateLimiter {
  const limitOf = (routeClass: RateLimitClass, scope: Scope, points: number): Limit => {
    const options = { points, duration: windowSeconds, keyPrefix: `${keyPrefix}:${routeClass}:${scope}` };
    return {
      scope,
      points,
      // Not ready (connecting, reconnecting): straight to memory rather than waiting for it.
      shared: redis ? new RateLimiterRedis({ ...options, storeClient: redis, rejectIfRedisNotReady: true }) : undefined,
      local: new RateLimiterMemory(options),
    };
  };
  const classes = new Map<RateLimitClass, { caller: Limit; tenant: Limit }>();
  for (const routeClass of rateLimitClasses) {
    const limit: RateLimit | undefined = limits[routeClass];
    if (limit) classes.set(routeClass, { caller: limitOf(routeClass, 'caller', limit.perCaller), tenant: limitOf(routeClass, 'tenant', limit.perTenant) });
  }

  rateLimitFallback.set(0);
  let redisAwayUntil = 0;
  const redisAnswered = () => {
    if (redisAwayUntil === 0) return;
    redisAwayUntil = 0;
    rateLimitFallback.set(0);
    logger.info('rate limits shared through Redis again');
  };
  const redisFailed = (error: unknown) => {
    if (redisAwayUntil === 0) logger.warn('rate limits: Redis unavailable, each node limits on its own until it is back', { error: String(error) });
    redisAwayUntil = Date.now() + REDIS_RETRY_MS;
    rateLimitFallback.set(1);
  };

  /** Counts one request against `limit`; `refund` takes it back (in the same place it was counted). */
  const count = async (limit: Limit, key: string): Promise<Count & { refund(): Promise<unknown> }> => {
    const answer = (result: RateLimiterRes, allowed: boolean, counter: RateLimiterRedis | RateLimiterMemory) => ({
      scope: limit.scope,
      limit: limit.points,
      allowed,
      remaining: result.remainingPoints,
      msBeforeReset: result.msBeforeNext,
      // Best effort: a refund lost to Redis failing just now only makes the limit a little stricter.
      refund: () => counter.reward(key).catch(() => {}),
    });
    if (limit.shared && Date.now() >= redisAwayUntil) {
      try {
        const result = await limit.shared.consume(key);
        redisAnswered();
        return answer(result, true, limit.shared);
      } catch (error) {
        if (error instanceof RateLimiterRes) {
          redisAnswered();
          return answer(error, false, limit.shared);
        }
        redisFailed(error);
      }
    }
    try {
      return answer(await limit.local.consume(key), true, limit.local);
    } catch (error) {
      if (error instanceof RateLimiterRes) return answer(error, false, limit.local);
      throw error;
    }
  };

  return {
    async take(routeClass, principal) {
      const limit = classes.get(routeClass);
      if (!limit) return undefined;
      const tenantKey = encodeURIComponent(principal.tenantId);
      // Both at once: one round trip to Redis rather than two.
      const counts = await Promise.all([count(limit.caller, `${tenantKey}:${encodeURIComponent(principal.sub)}`), count(limit.tenant, tenantKey)]);
      const refused = counts.filter((counted) => !counted.allowed);
      if (refused.length === 0) {
        const [caller, tenant] = counts;
        return { routeClass, ...(tenant.remaining < caller.remaining || (tenant.remaining === caller.remaining && tenant.msBeforeReset > caller.msBeforeReset) ? tenant : caller) };
      }
      // A refused request takes nothing from the limit that allowed it: a caller past its own
      // limit leaves its tenant's to the other callers, and a caller refused by its tenant's keeps its own.
      await Promise.all(counts.filter((counted) => counted.allowed).map((counted) => counted.refund()));
      // The one that allows again last says when to retry.
      return { routeClass, ...refused.reduce((last, counted) => (counted.msBeforeReset > last.msBeforeReset ? counted : last)) };
    },
  };
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

const writeMethods = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The class of a /v1 or /api/kiwi request. Searches and reports are told apart by path (both
 * computed on demand, and much dearer than a read); every other change is a write, every other
 * GET a read (a stored report or an erasure's status polled, a fact, a list).
 */
export function routeClass(method: string, path: string): RateLimitClass | undefined {
  if (method === 'POST' && (path === '/v1/memory/retrieve' || path === '/v1/memory/context')) return 'searches';
  if (method === 'GET' && (path === '/v1/memory/report' || path === '/api/kiwi/memory/report')) return 'reports';
  if (method === 'POST' && path === '/v1/memory/reports') return 'reports';
  if (writeMethods.has(method)) return 'writes';
  if (method === 'GET' || method === 'HEAD') return 'reads';
  return undefined;
}

/** The class of each MCP tool: what the tool does over /v1. test/e2e/rate-limit.test.ts checks every tool has one. */
export const mcpToolClasses: Readonly<Record<string, RateLimitClass>> = {
  kindgi_remember: 'writes',
  memory_retrieve: 'searches',
  kiwi_memory_report: 'reports',
};

/** The classes of the tools an MCP request calls (JSON-RPC `tools/call`, alone or in a batch). */
export function mcpCallClasses(message: unknown): Set<RateLimitClass> {
  const classes = new Set<RateLimitClass>();
  for (const item of Array.isArray(message) ? message : [message]) {
    const request = item as { method?: unknown; params?: { name?: unknown } } | null;
    if (typeof request !== 'object' || request === null || request.method !== 'tools/call') continue;
    const name = request.params?.name;
    const toolClass = typeof name === 'string' ? mcpToolClasses[name] : undefined;
    if (toolClass) classes.add(toolClass);
  }
  return classes;
}

/** Headers of the limit a verdict names; 429 in the envelope when it refused. */
function enforce(c: Context<AppEnv>, verdict: RateLimitVerdict): Response | undefined {
  c.header('RateLimit-Limit', String(verdict.limit));
  c.header('RateLimit-Remaining', String(verdict.remaining));
  c.header('RateLimit-Reset', String(seconds(verdict.msBeforeReset)));
  if (verdict.allowed) return undefined;
  rateLimitRejections.inc({ class: verdict.routeClass });
  const retryAfter = seconds(verdict.msBeforeReset);
  c.header('Retry-After', String(retryAfter));
  const whose = verdict.scope === 'caller' ? 'for this caller' : "for this tenant (all its callers together)";
  return respondWithError(
    c,
    new AppError('rate-limited', `Rate limit of ${verdict.limit} ${verdict.routeClass} a minute ${whose} reached; retry in ${retryAfter} s`),
  );
}

/** /v1 and /api/kiwi: after `authenticate`, which gives the principal. */
export const limitRequests =
  (limiter: RateLimiter): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const routeClassOf = routeClass(c.req.method, c.req.path);
    const verdict = routeClassOf ? await limiter.take(routeClassOf, principalOf(c)) : undefined;
    const refused = verdict && enforce(c, verdict);
    if (refused) return refused;
    await next();
  };

/**
 * POST /mcp, after its `authenticate`: a tool call counts in its tool's class. The body is read
 * from a copy, since the MCP transport reads the request itself; one it cannot parse is left to
 * the transport's own error.
 */
export const limitMcpToolCalls =
  (limiter: RateLimiter): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const message = await c.req.raw
      .clone()
      .json()
      .catch(() => undefined);
    for (const toolClass of mcpCallClasses(message)) {
      const verdict = await limiter.take(toolClass, principalOf(c));
      const refused = verdict && enforce(c, verdict);
      if (refused) return refused;
    }
    await next();
  };
