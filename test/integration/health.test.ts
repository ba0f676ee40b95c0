import { Redis } from 'ioredis';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createApp } from '../../src/app.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { freePort } from '../../support/ports.ts';
import { needs } from '../helpers/needs.ts';

describe('health and readiness', () => {
  let t: TestDatabase;
  let redis: Redis;
  let unreachableRedis: Redis;
  let unreachablePostgres: Sql;
  const logLines: string[] = [];
  const logger = createLogger('info', {}, (line) => logLines.push(line));

  beforeAll(async () => {
    t = await createTestDatabase();
    redis = createRedis(inject('redisUrl'), 'producer');
    // A real client pointed at a port nothing listens on: its ping genuinely fails.
    unreachableRedis = new Redis(await freePort(), '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    unreachableRedis.on('error', () => {});
    unreachablePostgres = postgres(`postgres://nobody@127.0.0.1:${await freePort()}/nothing`, { max: 1, connect_timeout: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await redis.quit();
    unreachableRedis.disconnect();
    await unreachablePostgres.end({ timeout: 0 });
    await t.drop();
  });

  // Wired as src/server.ts wires it: Postgres required, Redis degradable.
  const appWith = (redisClient: Redis, accepting = true, sql: Sql = t.app.sql) =>
    createApp({
      logger,
      db: t.app.db,
      verifyToken: createTokenVerifier({ jwtSecret: 'x'.repeat(32), jwksUrl: undefined, issuer: undefined, audience: undefined }),
      readiness: {
        accepting: () => accepting,
        checks: { postgres: () => sql`select 1`, redis: () => redisClient.ping() },
        degradable: ['redis'],
      },
    });

  it('is ready when Postgres and Redis answer', needs('redis'), async () => {
    const response = await appWith(redis).request('/readyz');
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' } });
  });

  it('stays ready when Redis does not answer, showing it degraded; promptly; still healthy', async () => {
    // Writes commit without Redis (the reconciler queues their work later): a load balancer must
    // keep routing here (DESIGN §7, revised).
    const app = appWith(unreachableRedis);
    const started = performance.now();
    const response = await app.request('/readyz');
    const ms = performance.now() - started;
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'degraded' } });
    // Under a load balancer's probe timeout (Kubernetes: 1 s by default).
    expect(ms).toBeLessThan(1000);
    expect((await app.request('/healthz')).status).toBe(200);
  });

  it('is not ready, with the error envelope, when Postgres does not answer; still healthy', needs('redis'), async () => {
    const app = appWith(redis, true, unreachablePostgres);
    const response = await app.request('/readyz', { headers: { 'X-Request-Id': 'rq-7' } });
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({
      error: {
        code: 'unavailable',
        message: 'Not ready: postgres unreachable',
        requestId: 'rq-7',
        checks: { postgres: 'down', redis: 'ok' },
      },
    });
    expect((await app.request('/healthz')).status).toBe(200);
  });

  it('is not ready when Postgres and Redis are both away, and says which is which', async () => {
    const response = await appWith(unreachableRedis, true, unreachablePostgres).request('/readyz');
    expect(response.status).toBe(503);
    const body = (await response.json()) as { error: { code: string; message: string; checks: unknown } };
    expect(body.error).toMatchObject({ code: 'unavailable', message: 'Not ready: postgres unreachable', checks: { postgres: 'down', redis: 'degraded' } });
  });

  it('is not ready once shutdown has begun', async () => {
    const response = await appWith(redis, false).request('/readyz');
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('unavailable');
  });

  it('keeps a well-formed inbound request id and replaces a malformed one', async () => {
    const app = appWith(redis);
    const kept = await app.request('/healthz', { headers: { 'X-Request-Id': 'abc_DEF-123' } });
    expect(kept.headers.get('x-request-id')).toBe('abc_DEF-123');
    const replaced = await app.request('/healthz', { headers: { 'X-Request-Id': 'bad id; <script>' } });
    expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const tooLong = await app.request('/healthz', { headers: { 'X-Request-Id': 'a'.repeat(129) } });
    expect(tooLong.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers unknown routes with the error envelope', async () => {
    const response = await appWith(redis).request('/nowhere', { headers: { 'X-Request-Id': 'nf-1' } });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({
      error: { code: 'not-found', message: 'No route for GET /nowhere', requestId: 'nf-1' },
    });
  });

  it('logs one JSON line per request', async () => {
    logLines.length = 0;
    await appWith(redis).request('/healthz', { headers: { 'X-Request-Id': 'log-1' } });
    expect(logLines).toHaveLength(1);
    expect(JSON.parse(logLines[0]!)).toMatchObject({ level: 'info', msg: 'request', method: 'GET', path: '/healthz', status: 200, requestId: 'log-1' });
  });
});
