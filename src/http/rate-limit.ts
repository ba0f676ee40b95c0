/**
 * Rate limits (DESIGN §7): each route class (`writes`, `searches`, `reports`, `reads`; which
 * routes fall in which: `routeClass`) has two fixed one-minute windows, one per caller (tenant +
 * token `sub`) and one per tenant (all its callers together), counted in Redis so that every API
 * node shares them. docs/decisions/0082-rate-limit-classes.md says why these classes and defaults.
 *
 * Redis away never stops the API: each limit has a twin in this node's memory that takes over
 * (the `mnemo_rate_limit_fallback` gauge is 1 meanwhile), so each node then allows the whole
 * limit on its own. A request is counted in one place only, Redis or memory, so nothing is
 * charged twice when Redis is back. Without Redis at all (jobs in-process, one node), memory is
 * the only place.
 *
 * Every answer of a limited class carries `RateLimit-Limit`, `RateLimit-Remaining` and
 * `RateLimit-Reset` (draft-ietf-httpapi-ratelimit-headers: the limit closest to running out);
 * over a limit, 429 `rate-limited` with `Retry-After`. What is counted is work: a HEAD as its
 * GET (Hono runs the GET's handler for it), and a JSON-RPC batch to /mcp as each tool call in it.
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Principal } from '../auth/permissions.ts';
import { type RateLimit, type RateLimitClass, type RateLimits, rateLimitClasses } from '../foundation/rate-limits.ts';
import { AppError } from '../foundation/app-error.ts';
import type { Logger } from '../foundation/log.ts';
import { rateLimitFallback, rateLimitRejections } from '../foundation/metrics.ts';
import type { AppEnv } from './app-env.ts';
import { principalOf } from './auth.ts';
import { respondWithError } from './errors.ts';
import { phase } from '../foundation/request-timing.ts';

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
export type RateLimitVerdict = Count & {
  routeClass: RateLimitClass;
  /** What the request counted for (a batch: its calls of this class). */
  points: number;
  /** Gives back what an allowed request counted, when it is refused after all (another class of its batch was over). */
  refund(): Promise<void>;
};

export interface RateLimiter {
  /**
   * Counts a request of `routeClass` by `principal` as `points` requests (a batch: one for each
   * of its calls); undefined when the class is not limited. Refused, it counts for nothing.
   */
  take(routeClass: RateLimitClass, principal: Principal, points?: number): Promise<RateLimitVerdict | undefined>;
  /** The most one request can count in `routeClass` (the lower of its two limits); undefined when the class is not limited. */
  largest(routeClass: RateLimitClass): number | undefined;
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

  /** Counts `points` against `limit`; `refund` takes them back (in the same place they were counted). */
  const count = async (limit: Limit, key: string, points: number): Promise<Count & { refund(): Promise<unknown> }> => {
    const answer = (result: RateLimiterRes, allowed: boolean, counter: RateLimiterRedis | RateLimiterMemory) => ({
      scope: limit.scope,
      limit: limit.points,
      allowed,
      // Refused, it is refunded: what is left is what was left before it.
      remaining: allowed ? result.remainingPoints : Math.max(0, limit.points - (result.consumedPoints - points)),
      msBeforeReset: result.msBeforeNext,
      // Best effort: a refund lost to Redis failing just now only makes the limit a little stricter.
      refund: () => counter.reward(key, points).catch(() => {}),
    });
    if (limit.shared && Date.now() >= redisAwayUntil) {
      try {
        const result = await limit.shared.consume(key, points);
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
      return answer(await limit.local.consume(key, points), true, limit.local);
    } catch (error) {
      if (error instanceof RateLimiterRes) return answer(error, false, limit.local);
      throw error;
    }
  };

  return {
    async take(routeClass, principal, points = 1) {
      const limit = classes.get(routeClass);
      if (!limit) return undefined;
      const tenantKey = encodeURIComponent(principal.tenantId);
      // Both at once: one round trip to Redis rather than two.
      const counts = await Promise.all([count(limit.caller, `${tenantKey}:${encodeURIComponent(principal.sub)}`, points), count(limit.tenant, tenantKey, points)]);
      const refund = async () => {
        await Promise.all(counts.map((counted) => counted.refund()));
      };
      const refused = counts.filter((counted) => !counted.allowed);
      if (refused.length === 0) {
        const [caller, tenant] = counts;
        const closest = tenant.remaining < caller.remaining || (tenant.remaining === caller.remaining && tenant.msBeforeReset > caller.msBeforeReset) ? tenant : caller;
        return { routeClass, points, ...closest, refund };
      }
      // A refused request takes nothing from either limit: a caller past its own limit leaves its
      // tenant's to the other callers, a caller refused by its tenant's keeps its own, and a batch
      // larger than what is left leaves what is left.
      await refund();
      // The one that allows again last says when to retry.
      const last = refused.reduce((latest, counted) => (counted.msBeforeReset > latest.msBeforeReset ? counted : latest));
      return { routeClass, points, ...last, refund: async () => {} };
    },
    largest(routeClass) {
      const limit = classes.get(routeClass);
      return limit && Math.min(limit.caller.points, limit.tenant.points);
    },
  };
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

const writeMethods = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The class of a /v1 or /api/kiwi request. Searches and reports are told apart by path (both
 * computed on demand, and much dearer than a read); every other change is a write, every other
 * GET a read (a stored report or an erasure's status polled, a fact, a list). A HEAD is its GET:
 * Hono answers it by running the GET's handler and dropping the body, so it costs the same.
 */
export function routeClass(method: string, path: string): RateLimitClass | undefined {
  const work = method === 'HEAD' ? 'GET' : method;
  if (work === 'POST' && (path === '/v1/memory/retrieve' || path === '/v1/memory/context')) return 'searches';
  if (work === 'GET' && (path === '/v1/memory/report' || path === '/api/kiwi/memory/report')) return 'reports';
  if (work === 'POST' && path === '/v1/memory/reports') return 'reports';
  if (writeMethods.has(work)) return 'writes';
  if (work === 'GET') return 'reads';
  return undefined;
}

/** The class of each MCP tool: what the tool does over /v1. test/e2e/rate-limit.test.ts checks every tool has one. */
export const mcpToolClasses: Readonly<Record<string, RateLimitClass>> = {
  kindgi_remember: 'writes',
  memory_retrieve: 'searches',
  kiwi_memory_report: 'reports',
};

/**
 * How many calls of each class an MCP request makes (JSON-RPC, alone or in a batch): a `tools/call`
 * in its tool's class, a `tools/list` as a read. Listing is not free: the SDK converts every tool's
 * schema to JSON Schema each time (~5 ms of CPU, 6 KB), and a batch of 100 cost 269 ms.
 * `initialize` and `ping` count in none.
 */
export function mcpCallCounts(message: unknown): Map<RateLimitClass, number> {
  const counts = new Map<RateLimitClass, number>();
  for (const item of Array.isArray(message) ? message : [message]) {
    const request = item as { method?: unknown; params?: { name?: unknown } } | null;
    if (typeof request !== 'object' || request === null) continue;
    const name = request.params?.name;
    const callClass =
      request.method === 'tools/list' ? 'reads' : request.method === 'tools/call' && typeof name === 'string' ? mcpToolClasses[name] : undefined;
    if (callClass) counts.set(callClass, (counts.get(callClass) ?? 0) + 1);
  }
  return counts;
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
  const reached = verdict.points === 1 ? 'reached' : `has ${verdict.remaining} left, and this batch needs ${verdict.points}`;
  return respondWithError(
    c,
    new AppError('rate-limited', `Rate limit of ${verdict.limit} ${verdict.routeClass} a minute ${whose} ${reached}; retry in ${retryAfter} s`),
  );
}

/** /v1 and /api/kiwi: after `authenticate`, which gives the principal. */
export const limitRequests =
  (limiter: RateLimiter): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const routeClassOf = routeClass(c.req.method, c.req.path);
    const verdict = routeClassOf ? await phase('rate-limit', () => limiter.take(routeClassOf, principalOf(c))) : undefined;
    const refused = verdict && enforce(c, verdict);
    if (refused) return refused;
    await next();
  };

/**
 * POST /mcp, after its `authenticate`: each tool call counts in its tool's class, the calls of a
 * JSON-RPC batch each as one. A batch runs whole or not at all: when what is left of any of its
 * classes cannot cover its calls, it is refused with 429 and counts for nothing; a batch with
 * more calls of a class than that class allows a minute could never run, and is refused with 400.
 * The body is read from a copy, since the MCP transport reads the request itself; one it cannot
 * parse is left to the transport's own error.
 */
export const limitMcpToolCalls =
  (limiter: RateLimiter): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const message = await c.req.raw
      .clone()
      .json()
      .catch(() => undefined);
    const counts = [...mcpCallCounts(message)];
    for (const [toolClass, calls] of counts) {
      const largest = limiter.largest(toolClass);
      if (largest !== undefined && calls > largest) {
        return respondWithError(
          c,
          new AppError('bad-input', `This batch makes ${calls} tool calls counted as ${toolClass}, more than the rate limit allows in a minute (${largest}): send at most ${largest} in one request`),
        );
      }
    }
    const principal = principalOf(c);
    const verdicts = (await Promise.all(counts.map(([toolClass, calls]) => limiter.take(toolClass, principal, calls)))).filter((verdict) => verdict !== undefined);
    const refused = verdicts.find((verdict) => !verdict.allowed);
    if (refused) {
      await Promise.all(verdicts.map((verdict) => verdict.refund()));
      return enforce(c, refused);
    }
    // The headers describe the limit closest to running out, as for one call.
    const closest = verdicts.reduce<RateLimitVerdict | undefined>((least, verdict) => (least && least.remaining <= verdict.remaining ? least : verdict), undefined);
    if (closest) enforce(c, closest);
    await next();
  };
