/**
 * Rate limits (DESIGN §7) over the real app and the test run's Redis: each app below has its own
 * limiter, as each API node has, and apps given the same key prefix are nodes of one deployment.
 * Limits are small so a few requests reach them. Redis going away is in test/faults/rate-limit.test.ts
 * (it kills a private redis-server).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import type { Redis } from 'ioredis';
import { createApp } from '../../src/app.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { type RateLimits, rateLimitClasses } from '../../src/foundation/rate-limits.ts';
import { createRateLimiter, mcpToolClasses, routeClass } from '../../src/http/rate-limit.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { rateLimitFallback, rateLimitRejections } from '../../src/foundation/metrics.ts';
import { TEST_SECRET, tokenFor } from '../helpers/api.ts';
import { isMemoryApiPath } from '../helpers/id-inputs.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { deleteKeysUnder } from '../../support/redis.ts';
import { sleep } from '../../support/wait.ts';
import { needs } from '../helpers/needs.ts';

const off: RateLimits = { writes: undefined, searches: undefined, reports: undefined, reads: undefined };
const logger = createLogger('error', {});

describe('rate limits', () => {
  let db: TestDatabase;
  /** Only when the run has a Redis; the tests that count in it say needs('redis'). */
  let redis: Redis | undefined;
  const prefixes: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    if (inject('redisUrl')) {
      redis = createRedis(inject('redisUrl'), 'rate-limit');
      // Ready before the first request: a limiter meeting a Redis still connecting counts in memory
      // (rejectIfRedisNotReady) and goes back to Redis later, so the first requests' points were
      // counted where the later ones could not see them (the report limit let a third GET through).
      const connecting = redis;
      if (connecting.status !== 'ready') await new Promise((resolve) => connecting.once('ready', resolve));
    }
  });
  afterAll(async () => {
    if (redis) for (const prefix of prefixes) await deleteKeysUnder(redis, prefix);
    await redis?.quit();
    await db.drop();
  });

  /** A key prefix of its own: the nodes of one deployment share it. */
  const deployment = () => {
    const prefix = `mnemo-test-rl-${randomBytes(4).toString('hex')}`;
    prefixes.push(prefix);
    return prefix;
  };

  /** One API node: the app with a limiter of its own over `redis` (none: in-process, memory only). */
  function node(limits: Partial<RateLimits>, options: { keyPrefix: string; shared?: boolean; windowSeconds?: number }) {
    const rateLimiter = createRateLimiter({
      limits: { ...off, ...limits },
      redis: options.shared === false ? undefined : redis,
      keyPrefix: `${options.keyPrefix}:rl`,
      logger,
      windowSeconds: options.windowSeconds ?? 60,
    });
    const app = createApp({
      logger,
      db: db.app.db,
      verifyToken: createTokenVerifier({ jwtSecret: TEST_SECRET, jwksUrl: undefined, issuer: undefined, audience: undefined }),
      readiness: { accepting: () => true, checks: {}, degradable: [] },
      rateLimiter,
    });
    return async (token: string, method: string, path: string, body?: unknown) => {
      const response = await app.request(path, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
    };
  }

  const note = (text: string) => ({ type: 'acme.note', content: { text } });
  const write = (text: string) => ['POST', '/v1/memory/facts', note(text)] as const;
  const search = ['POST', '/v1/memory/retrieve', { query: 'boiler', mode: 'keyword' }] as const;
  const limitHeaders = (headers: Headers) => ({
    limit: headers.get('ratelimit-limit'),
    remaining: headers.get('ratelimit-remaining'),
    reset: Number(headers.get('ratelimit-reset')),
  });
  const rejections = async (routeClassName: string) =>
    (await rateLimitRejections.get()).values.find((value) => value.labels.class === routeClassName)?.value ?? 0;

  it('gives every route of /openapi.json a class: writes, searches, reports or reads', async () => {
    const call = node({}, { keyPrefix: deployment() });
    const document = (await call('unused', 'GET', '/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    const classes: Record<string, string | undefined> = {};
    // MCP's tools have their classes (mcpToolClasses, below); the health probes are not limited.
    for (const [path, operations] of Object.entries(document.paths).filter(([path]) => isMemoryApiPath(path))) {
      for (const method of Object.keys(operations)) {
        const concrete = path.replace(/\{[^}]+\}/g, '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b');
        classes[`${method.toUpperCase()} ${path}`] = routeClass(method.toUpperCase(), concrete);
      }
    }
    expect(Object.entries(classes).filter(([, routeClassName]) => routeClassName === undefined)).toEqual([]);
    expect(classes).toMatchObject({
      'POST /v1/memory/facts': 'writes',
      'POST /v1/memory/facts:batch': 'writes',
      'POST /v1/memory/facts/{id}/supersede': 'writes',
      'POST /v1/memory/facts/{id}/verify': 'writes',
      'DELETE /v1/memory/facts/{id}': 'writes',
      'POST /v1/memory/erasures': 'writes',
      'POST /v1/memory/retrieve': 'searches',
      'POST /v1/memory/context': 'searches',
      'GET /v1/memory/report': 'reports',
      'GET /api/kiwi/memory/report': 'reports',
      'POST /v1/memory/reports': 'reports',
      'GET /v1/memory/reports/{id}': 'reads',
      'GET /v1/memory/facts': 'reads',
      'GET /v1/memory/facts/{id}': 'reads',
      'GET /v1/memory/erasures/{id}': 'reads',
    });
  });

  it("gives every HEAD its GET's class: Hono runs the GET's handler for it", async () => {
    const call = node({}, { keyPrefix: deployment() });
    const document = (await call('unused', 'GET', '/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    const gets = Object.entries(document.paths).filter(([path, operations]) => isMemoryApiPath(path) && 'get' in operations);
    expect(gets.length).toBeGreaterThan(5);
    const differing = gets
      .map(([path]) => path.replace(/\{[^}]+\}/g, '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b'))
      .filter((path) => routeClass('HEAD', path) !== routeClass('GET', path))
      .map((path) => `${path}: HEAD ${routeClass('HEAD', path)}, GET ${routeClass('GET', path)}`);
    expect(differing).toEqual([]);
  });

  it('a HEAD counts as its GET: the report it computes is a report, and refused once the reports are spent', async () => {
    const call = node({ reports: { perCaller: 2, perTenant: 10 }, reads: { perCaller: 1, perTenant: 10 } }, { keyPrefix: deployment() });
    const token = await tokenFor({ tid: uniqueTenant('rl-head'), sub: 'prober' });
    const before = await rejections('reports');

    const head = await call(token, 'HEAD', '/v1/memory/report');
    expect(head.status).toBe(200);
    expect(limitHeaders(head.headers)).toMatchObject({ limit: '2', remaining: '1' });
    expect((await call(token, 'GET', '/v1/memory/report')).status).toBe(200);
    // Spent: the GET is refused, and so is every HEAD, on both report paths, before any handler runs.
    expect((await call(token, 'GET', '/v1/memory/report')).status).toBe(429);
    for (const path of ['/v1/memory/report', '/api/kiwi/memory/report']) {
      const refused = await call(token, 'HEAD', path);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    expect(await rejections('reports')).toBe(before + 3);

    // A HEAD of a read is a read.
    expect((await call(token, 'HEAD', '/v1/memory/facts')).status).toBe(200);
    expect((await call(token, 'GET', '/v1/memory/facts')).status).toBe(429);
  });

  it('documents 429 rate-limited and 503 unavailable on every route it limits', async () => {
    const call = node({}, { keyPrefix: deployment() });
    const document = (await call('unused', 'GET', '/openapi.json')).body as {
      paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, unknown> }>>;
    };
    // The limits count callers, so every route that takes the bearer token (and only those).
    const undocumented = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.entries(operations)
        .filter(([, operation]) => operation.security !== undefined && (!operation.responses['429'] || !operation.responses['503']))
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(Object.keys(document.paths).length).toBeGreaterThan(10);
    expect(undocumented).toEqual([]);
  });

  it('over the limit: 429 rate-limited in the envelope, with Retry-After and RateLimit-* headers, and nothing written', async () => {
    const call = node({ writes: { perCaller: 2, perTenant: 10 } }, { keyPrefix: deployment() });
    const tenantId = uniqueTenant('rl-over');
    const token = await tokenFor({ tid: tenantId, sub: 'writer' });
    const before = await rejections('writes');

    const first = await call(token, ...write('one'));
    const second = await call(token, ...write('two'));
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(limitHeaders(first.headers)).toMatchObject({ limit: '2', remaining: '1' });
    expect(limitHeaders(second.headers)).toMatchObject({ limit: '2', remaining: '0' });
    expect(limitHeaders(first.headers).reset).toBeGreaterThanOrEqual(59);
    expect(limitHeaders(first.headers).reset).toBeLessThanOrEqual(60);

    const refused = await call(token, ...write('three'));
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: 'rate-limited', requestId: refused.headers.get('x-request-id') });
    expect(refused.body.error.message).toBe(`Rate limit of 2 writes a minute for this caller reached; retry in ${refused.headers.get('retry-after')} s`);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limitHeaders(refused.headers)).toEqual({ limit: '2', remaining: '0', reset: retryAfter });
    expect(await rejections('writes')).toBe(before + 1);

    // Reads are another class (off here): served, without headers.
    const list = await call(token, 'GET', '/v1/memory/facts');
    expect(list.status).toBe(200);
    expect(list.headers.get('ratelimit-limit')).toBeNull();
    expect(list.body.data.map((fact: { content: { text: string } }) => fact.content.text).sort()).toEqual(['one', 'two']);
  });

  it('per caller, then per tenant: a caller over its limit leaves the others theirs until the tenant is used up', needs('redis'), async () => {
    const call = node({ searches: { perCaller: 2, perTenant: 3 } }, { keyPrefix: deployment() });
    const tenantId = uniqueTenant('rl-scope');
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((sub) => tokenFor({ tid: tenantId, sub })));
    const other = await tokenFor({ tid: uniqueTenant('rl-other'), sub: 'a' });

    expect((await call(a!, ...search)).status).toBe(200);
    expect((await call(a!, ...search)).status).toBe(200);
    // A's refusals, however many, take nothing from the tenant.
    for (let i = 0; i < 3; i++) {
      const refused = await call(a!, ...search);
      expect(refused.status).toBe(429);
      expect(refused.body.error.message).toMatch(/^Rate limit of 2 searches a minute for this caller reached/);
    }
    const third = await call(b!, ...search);
    expect(third.status).toBe(200);
    // The tenant's is the tighter limit now (0 left of 3, against 1 of B's 2).
    expect(limitHeaders(third.headers)).toMatchObject({ limit: '3', remaining: '0' });

    const overTenant = await call(c!, ...search);
    expect(overTenant.status).toBe(429);
    expect(overTenant.body.error.message).toMatch(/^Rate limit of 3 searches a minute for this tenant \(all its callers together\) reached; retry in \d+ s$/);
    expect(limitHeaders(overTenant.headers)).toMatchObject({ limit: '3', remaining: '0' });
    // Refused by the tenant, C was not charged for it either.
    expect(await redis!.get(`${prefixes.at(-1)}:rl:searches:caller:${encodeURIComponent(tenantId)}:c`)).toBe('0');

    // Another tenant's callers are not touched.
    expect((await call(other, ...search)).status).toBe(200);
  });

  it('headers name the limit closest to running out', async () => {
    const call = node({ reads: { perCaller: 5, perTenant: 6 } }, { keyPrefix: deployment() });
    const tenantId = uniqueTenant('rl-headers');
    const [a, b] = await Promise.all(['a', 'b'].map((sub) => tokenFor({ tid: tenantId, sub })));
    const first = await call(a!, 'GET', '/v1/memory/facts');
    expect(limitHeaders(first.headers)).toMatchObject({ limit: '5', remaining: '4' });
    await call(a!, 'GET', '/v1/memory/facts');
    await call(a!, 'GET', '/v1/memory/facts');
    const fromB = await call(b!, 'GET', '/v1/memory/facts');
    expect(limitHeaders(fromB.headers)).toMatchObject({ limit: '6', remaining: '2' });
  });

  it('two nodes on one Redis share every limit: a caller and a tenant over it are refused on both', needs('redis'), async () => {
    const prefix = deployment();
    const nodeA = node({ writes: { perCaller: 3, perTenant: 4 } }, { keyPrefix: prefix });
    const nodeB = node({ writes: { perCaller: 3, perTenant: 4 } }, { keyPrefix: prefix });
    const tenantId = uniqueTenant('rl-nodes');
    const [x, y] = await Promise.all(['x', 'y'].map((sub) => tokenFor({ tid: tenantId, sub })));

    expect((await nodeA(x!, ...write('x1'))).status).toBe(201);
    expect((await nodeB(x!, ...write('x2'))).status).toBe(201);
    const third = await nodeA(x!, ...write('x3'));
    expect(third.status).toBe(201);
    expect(limitHeaders(third.headers)).toMatchObject({ limit: '3', remaining: '0' });
    for (const call of [nodeA, nodeB]) expect((await call(x!, ...write('x4'))).body.error.message).toMatch(/for this caller/);

    expect((await nodeB(y!, ...write('y1'))).status).toBe(201);
    for (const call of [nodeA, nodeB]) expect((await call(y!, ...write('y2'))).body.error.message).toMatch(/for this tenant/);
  });

  it('a deployment of its own counts apart: another key prefix, or another class, starts afresh', async () => {
    const limits = { writes: { perCaller: 1, perTenant: 1 }, reads: { perCaller: 1, perTenant: 1 } };
    const first = node(limits, { keyPrefix: deployment() });
    const second = node(limits, { keyPrefix: deployment() });
    const token = await tokenFor({ tid: uniqueTenant('rl-apart'), sub: 'a' });
    expect((await first(token, ...write('a'))).status).toBe(201);
    expect((await first(token, ...write('b'))).status).toBe(429);
    expect((await first(token, 'GET', '/v1/memory/facts')).status).toBe(200);
    expect((await second(token, ...write('c'))).status).toBe(201);
  });

  it('allows again once the window has passed (Retry-After is long enough)', async () => {
    const call = node({ reads: { perCaller: 1, perTenant: 1 } }, { keyPrefix: deployment(), windowSeconds: 1 });
    const token = await tokenFor({ tid: uniqueTenant('rl-window'), sub: 'a' });
    expect((await call(token, 'GET', '/v1/memory/facts')).status).toBe(200);
    const refused = await call(token, 'GET', '/v1/memory/facts');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    await sleep(1000);
    expect((await call(token, 'GET', '/v1/memory/facts')).status).toBe(200);
  });

  it('without Redis (jobs in-process, one node) the limits hold in memory, and nothing says fallback', async () => {
    const call = node({ writes: { perCaller: 1, perTenant: 5 } }, { keyPrefix: deployment(), shared: false });
    const token = await tokenFor({ tid: uniqueTenant('rl-memory'), sub: 'a' });
    expect((await call(token, ...write('one'))).status).toBe(201);
    const refused = await call(token, ...write('two'));
    expect(refused.status).toBe(429);
    expect(limitHeaders(refused.headers)).toMatchObject({ limit: '1', remaining: '0' });
    expect((await rateLimitFallback.get()).values[0]?.value).toBe(0);
  });

  describe('MCP', () => {
    const rpc = (id: number, method: string, params?: unknown) => ({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });

    it('a tool call counts in its tool class (kiwi_memory_report: reports); listing tools counts as a read, initialize and ping in none', async () => {
      const call = node({ reports: { perCaller: 1, perTenant: 5 }, reads: { perCaller: 2, perTenant: 5 } }, { keyPrefix: deployment() });
      const token = await tokenFor({ tid: uniqueTenant('rl-mcp'), sub: 'agent' });
      for (let id = 1; id <= 3; id++) expect((await call(token, 'POST', '/mcp', rpc(id, 'ping'))).status).toBe(200);
      for (let id = 1; id <= 2; id++) expect((await call(token, 'POST', '/mcp', rpc(id, 'tools/list'))).status).toBe(200);
      const listedTooOften = await call(token, 'POST', '/mcp', rpc(3, 'tools/list'));
      expect(listedTooOften.status).toBe(429);
      expect(listedTooOften.body.error.message).toMatch(/^Rate limit of 2 reads a minute for this caller/);

      const report = rpc(4, 'tools/call', { name: 'kiwi_memory_report', arguments: {} });
      const first = await call(token, 'POST', '/mcp', report);
      expect(first.status).toBe(200);
      expect(first.body.result.isError).toBeFalsy();
      expect(limitHeaders(first.headers)).toMatchObject({ limit: '1', remaining: '0' });
      const refused = await call(token, 'POST', '/mcp', report);
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({ code: 'rate-limited' });
      expect(refused.body.error.message).toMatch(/^Rate limit of 1 reports a minute for this caller/);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      // The same class as the route: /v1's report is now refused too.
      expect((await call(token, 'GET', '/v1/memory/report')).status).toBe(429);
    });

    const retrieveCall = (id: number) => rpc(id, 'tools/call', { name: 'memory_retrieve', arguments: { query: 'boiler', mode: 'keyword' } });
    const rememberCall = (id: number) => rpc(id, 'tools/call', { name: 'kindgi_remember', arguments: { type: 'note', text: `Remembered in call ${id}` } });
    const batchOf = (size: number, call: (id: number) => unknown, from = 1) => Array.from({ length: size }, (_, i) => call(from + i));
    const answered = (body: unknown) => (body as { id: number; result?: { isError?: boolean } }[]).filter((answer) => answer.result && !answer.result.isError).length;

    it('a JSON-RPC batch counts each of its tool calls: it runs whole when what is left covers them, else not at all (429)', async () => {
      const call = node({ searches: { perCaller: 5, perTenant: 50 } }, { keyPrefix: deployment() });
      const token = await tokenFor({ tid: uniqueTenant('rl-batch'), sub: 'agent' });

      const three = await call(token, 'POST', '/mcp', batchOf(3, retrieveCall));
      expect(three.status).toBe(200);
      expect(answered(three.body)).toBe(3);
      expect(limitHeaders(three.headers)).toMatchObject({ limit: '5', remaining: '2' });

      const tooMany = await call(token, 'POST', '/mcp', batchOf(3, retrieveCall, 10));
      expect(tooMany.status).toBe(429);
      expect(tooMany.body.error).toMatchObject({ code: 'rate-limited' });
      expect(tooMany.body.error.message).toMatch(/^Rate limit of 5 searches a minute for this caller has 2 left, and this batch needs 3; retry in \d+ s$/);
      expect(limitHeaders(tooMany.headers)).toMatchObject({ limit: '5', remaining: '2' });

      // The refused batch took nothing: two calls still fit, and then none.
      const two = await call(token, 'POST', '/mcp', batchOf(2, retrieveCall, 20));
      expect(two.status).toBe(200);
      expect(answered(two.body)).toBe(2);
      expect(limitHeaders(two.headers)).toMatchObject({ remaining: '0' });
      expect((await call(token, 'POST', '/mcp', retrieveCall(30))).status).toBe(429);
    });

    it('a batch with more calls of a class than its limit allows in a minute is refused (400), and counts for nothing', async () => {
      const call = node({ searches: { perCaller: 5, perTenant: 50 } }, { keyPrefix: deployment() });
      const token = await tokenFor({ tid: uniqueTenant('rl-batch-large'), sub: 'agent' });
      const fifty = await call(token, 'POST', '/mcp', batchOf(50, retrieveCall));
      expect(fifty.status).toBe(400);
      expect(fifty.body.error).toMatchObject({ code: 'bad-input' });
      expect(fifty.body.error.message).toBe('This batch makes 50 tool calls counted as searches, more than the rate limit allows in a minute (5): send at most 5 in one request');
      const one = await call(token, 'POST', '/mcp', retrieveCall(51));
      expect(one.status).toBe(200);
      expect(limitHeaders(one.headers)).toMatchObject({ limit: '5', remaining: '4' });
    });

    it('a batch refused by one of its classes runs none of its calls and takes nothing from the others', async () => {
      const call = node({ writes: { perCaller: 5, perTenant: 50 }, reports: { perCaller: 1, perTenant: 50 } }, { keyPrefix: deployment() });
      const tenantId = uniqueTenant('rl-batch-mixed');
      const token = await tokenFor({ tid: tenantId, sub: 'agent' });
      expect((await call(token, 'GET', '/v1/memory/report')).status).toBe(200);

      const mixed = await call(token, 'POST', '/mcp', [...batchOf(3, rememberCall), rpc(9, 'tools/call', { name: 'kiwi_memory_report', arguments: {} })]);
      expect(mixed.status).toBe(429);
      expect(mixed.body.error.message).toMatch(/^Rate limit of 1 reports a minute for this caller reached/);
      const facts = await call(token, 'GET', '/v1/memory/facts');
      expect(facts.body.data).toEqual([]);

      // The writes it would have made are all still there to make.
      const five = await call(token, 'POST', '/mcp', batchOf(5, rememberCall, 10));
      expect(five.status).toBe(200);
      expect(answered(five.body)).toBe(5);
      expect(limitHeaders(five.headers)).toMatchObject({ limit: '5', remaining: '0' });
    });

    it('every tool the MCP server offers has a class', async () => {
      const call = node({}, { keyPrefix: deployment() });
      const token = await tokenFor({ tid: uniqueTenant('rl-tools'), sub: 'agent' });
      const listed = await call(token, 'POST', '/mcp', rpc(1, 'tools/list'));
      const names = (listed.body.result.tools as { name: string }[]).map((tool) => tool.name);
      expect(names.length).toBeGreaterThan(0);
      expect(names.filter((name) => !(name in mcpToolClasses))).toEqual([]);
      expect(Object.values(mcpToolClasses).every((routeClassName) => rateLimitClasses.includes(routeClassName))).toBe(true);
    });
  });
});
