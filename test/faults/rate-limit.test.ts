/**
 * Fault rows of the rate limits (issue 15): two API nodes (two apps, each with its own limiter
 * and its own Redis connection, as two processes have) over a private redis-server that is
 * killed, restarted empty, and frozen (SIGSTOP). What must hold: requests keep being served,
 * each node goes on limiting on its own (mnemo_rate_limit_fallback = 1), a dead Redis costs a
 * request nothing and a frozen one at most the limiter's command timeout once a second, and once
 * Redis is back the nodes share the limits again, with nothing counted twice. Each row prints one
 * `[faults]` line with its figures.
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { createRateLimiter, type RateLimiter } from '../../src/http/rate-limit.ts';
import { createRedis, RATE_LIMIT_COMMAND_TIMEOUT_MS } from '../../src/jobs/redis.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { rateLimitFallback } from '../../src/foundation/metrics.ts';
import type { Principal } from '../../src/auth/permissions.ts';
import { TEST_SECRET, tokenFor } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { eventually } from '../../support/wait.ts';
import { type PrivateRedis, startPrivateRedis } from './helpers/redis-server.ts';

const PER_CALLER = 3;
const limits = { writes: undefined, searches: undefined, reports: undefined, reads: { perCaller: PER_CALLER, perTenant: 100 } };

const fallback = async () => (await rateLimitFallback.get()).values[0]?.value;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const round = (ms: number) => Math.round(ms * 100) / 100;

describe('faults: rate limits when Redis goes away', () => {
  let redisServer: PrivateRedis;
  let db: TestDatabase;
  const connections: Redis[] = [];
  const logs: string[] = [];
  const logger = createLogger('info', {}, (line) => logs.push(line));

  beforeAll(async () => {
    redisServer = await startPrivateRedis();
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const connection of connections) connection.disconnect();
    await db?.drop();
    await redisServer?.close();
  });

  /** One API node: its own Redis connection and limiter, as src/server.ts builds them; once connected. */
  async function node(): Promise<{ limiter: RateLimiter; get(token: string): Promise<{ status: number; remaining: string | null }> }> {
    const redis = createRedis(redisServer.url, 'rate-limit');
    redis.on('error', () => {});
    connections.push(redis);
    await new Promise((resolve) => redis.once('ready', resolve));
    const limiter = createRateLimiter({ limits, redis, keyPrefix: 'faults:rl', logger });
    const app = createApp({
      logger,
      db: db.app.db,
      verifyToken: createTokenVerifier({ jwtSecret: TEST_SECRET, jwksUrl: undefined, issuer: undefined, audience: undefined }),
      readiness: { accepting: () => true, checks: {}, degradable: [] },
      rateLimiter: limiter,
    });
    return {
      limiter,
      async get(token) {
        const response = await app.request('/v1/memory/facts', { headers: { authorization: `Bearer ${token}` } });
        await response.arrayBuffer();
        return { status: response.status, remaining: response.headers.get('ratelimit-remaining') };
      },
    };
  }

  const principalOf = (tenantId: string, sub: string): Principal => ({ tenantId, sub, role: 'member', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

  /**
   * Waits until the nodes count in Redis again: a fresh probe caller taken on each node in turn
   * sees the other node's count (memory would give each node its own).
   */
  const sharedAgain = (...limiters: RateLimiter[]) =>
    eventually(
      async () => {
        const probe = principalOf(uniqueTenant('rl-probe'), 'probe');
        const remaining: number[] = [];
        for (const limiter of limiters) remaining.push((await limiter.take('reads', probe))!.remaining);
        return remaining.every((left, i) => left === PER_CALLER - 1 - i) && (await fallback()) === 0;
      },
      15_000,
      () => `still limiting alone; redis-server log: ${redisServer.log().slice(-1000)}`,
      100,
    );

  it('Redis killed: both nodes keep serving and limit on their own; restarted: shared again, nothing counted twice', async () => {
    const [a, b] = await Promise.all([node(), node()]);
    const tenantId = uniqueTenant('rl-faults');
    const token = await tokenFor({ tid: tenantId, sub: 'caller' });

    // Shared: one request on each node takes two of the caller's three.
    expect(await a.get(token)).toEqual({ status: 200, remaining: '2' });
    expect(await b.get(token)).toEqual({ status: 200, remaining: '1' });
    expect(await fallback()).toBe(0);

    await redisServer.stop('kill');
    // Each node on its own: the whole limit again (the shared requests were counted in Redis
    // only, not in memory too), and still refused past it.
    const outage: { status: number; remaining: string | null }[] = [];
    const outageMs: number[] = [];
    for (let i = 0; i <= PER_CALLER; i++) {
      const started = performance.now();
      outage.push(await a.get(token));
      outageMs.push(performance.now() - started);
    }
    expect(outage).toEqual([
      { status: 200, remaining: '2' },
      { status: 200, remaining: '1' },
      { status: 200, remaining: '0' },
      { status: 429, remaining: '0' },
    ]);
    expect(await fallback()).toBe(1);
    expect((await b.get(token)).status).toBe(200);
    // What a dead Redis costs the limiter itself: no wait for a connection that is not there.
    const takeMs: number[] = [];
    for (let i = 0; i < 50; i++) {
      const started = performance.now();
      await a.limiter.take('reads', principalOf(tenantId, `timing-${i}`));
      takeMs.push(performance.now() - started);
    }
    expect(median(takeMs)).toBeLessThan(2);
    expect(Math.max(...takeMs)).toBeLessThan(100);

    await redisServer.restart();
    const downFor = performance.now();
    await sharedAgain(a.limiter, b.limiter);
    const backAfterMs = performance.now() - downFor;
    // Redis came back empty (no persistence) and holds only what was counted since: the outage's
    // requests were counted in memory alone, so none of them is charged again here.
    expect(await a.get(token)).toEqual({ status: 200, remaining: '2' });
    expect(await b.get(token)).toEqual({ status: 200, remaining: '1' });
    expect(await a.get(token)).toEqual({ status: 200, remaining: '0' });
    expect(await b.get(token)).toEqual({ status: 429, remaining: '0' });
    expect(await fallback()).toBe(0);

    const warned = logs.filter((line) => line.includes('Redis unavailable, each node limits on its own'));
    const recovered = logs.filter((line) => line.includes('rate limits shared through Redis again'));
    // Once per node each way, not once per request.
    expect([warned.length, recovered.length]).toEqual([2, 2]);

    console.log(
      `[faults] rate limits, Redis killed: ${outage.filter((r) => r.status === 200).length} served then 429 per node while down ` +
        `(request median ${round(median(outageMs))} ms; limiter take median ${round(median(takeMs))} ms, max ${round(Math.max(...takeMs))} ms); ` +
        `shared again ${Math.round(backAfterMs)} ms after the restart`,
    );
  });

  it('Redis frozen (SIGSTOP): one request waits the command timeout, the next ones none, until it thaws', async () => {
    const a = await node();
    const principal = principalOf(uniqueTenant('rl-frozen'), 'caller');
    await sharedAgain(a.limiter);
    const pid = redisServer.pid()!;
    process.kill(pid, 'SIGSTOP');
    try {
      let started = performance.now();
      const first = await a.limiter.take('reads', { ...principal, sub: 'first' });
      const firstMs = performance.now() - started;
      started = performance.now();
      const next = await a.limiter.take('reads', { ...principal, sub: 'next' });
      const nextMs = performance.now() - started;
      expect([first?.allowed, next?.allowed]).toEqual([true, true]);
      expect(firstMs).toBeGreaterThanOrEqual(RATE_LIMIT_COMMAND_TIMEOUT_MS - 5);
      expect(firstMs).toBeLessThan(RATE_LIMIT_COMMAND_TIMEOUT_MS + 250);
      expect(nextMs).toBeLessThan(100);
      expect(await fallback()).toBe(1);
      console.log(`[faults] rate limits, Redis frozen: first request waited ${Math.round(firstMs)} ms (command timeout ${RATE_LIMIT_COMMAND_TIMEOUT_MS} ms), the next ${round(nextMs)} ms`);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await sharedAgain(a.limiter);
  });
});
