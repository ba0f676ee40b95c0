/**
 * `GET /metrics` (issue 15): the API's own families after real requests over HTTP, with route
 * patterns for labels and no tenant or id anywhere in the text; the database pool figures while
 * transactions really hold its connections; and the worker process's own metrics port, with queue
 * depths and job figures from real jobs in a real Redis.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../../src/db/client.ts';
import { type TestApi, startTestApi, tokenFor } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type Deployment, startDeployment } from '../helpers/deployment.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { scrape, samplesOf, valueOf } from '../helpers/metrics.ts';
import { needs } from '../helpers/needs.ts';
import { freePort } from '../../support/ports.ts';
import { eventually, sleep } from '../../support/wait.ts';

const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

describe('GET /metrics on the API', () => {
  let api: TestApi;
  let a: { tenantId: string; admin: string };
  let b: { tenantId: string; admin: string };

  beforeAll(async () => {
    api = await startTestApi();
    a = await api.newTenant('metrics-a');
    b = await api.newTenant('metrics-b');
  });
  afterAll(async () => {
    await api?.close();
  });

  const metrics = () => scrape(`${api.baseUrl}/metrics`);
  const requests = (samples: Parameters<typeof valueOf>[0], method: string, route: string, status: number) =>
    valueOf(samples, 'mnemo_http_requests_total', { method, route, status: String(status) }) ?? 0;

  it('counts and times requests by method, route pattern and status, and names no tenant, id or raw path', async () => {
    const before = (await metrics()).samples;
    const written = await api.request('POST', '/v1/memory/facts', { token: a.admin, body: { type: 'acme.note', content: { text: 'metrics' } } });
    expect(written.status).toBe(201);
    const id: string = written.body.id;
    for (let i = 0; i < 2; i++) expect((await api.request('GET', `/v1/memory/facts/${id}`, { token: a.admin })).status).toBe(200);
    // Another tenant asking for A's fact, no token at all, and a path no route has (naming B).
    expect((await api.request('GET', `/v1/memory/facts/${id}`, { token: b.admin })).status).toBe(404);
    expect((await api.request('GET', `/v1/memory/facts/${id}`)).status).toBe(401);
    expect((await api.request('GET', `/nowhere/${b.tenantId}/${id}`)).status).toBe(404);

    const after = await metrics();
    expect(after.status).toBe(200);
    expect(after.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const moved = (method: string, route: string, status: number) => requests(after.samples, method, route, status) - requests(before, method, route, status);
    expect(moved('POST', '/v1/memory/facts', 201)).toBe(1);
    expect(moved('GET', '/v1/memory/facts/:id', 200)).toBe(2);
    expect(moved('GET', '/v1/memory/facts/:id', 404)).toBe(1);
    expect(moved('GET', '/v1/memory/facts/:id', 401)).toBe(1);
    expect(moved('GET', 'unmatched', 404)).toBe(1);
    const timed = (s: typeof before) => valueOf(s, 'mnemo_http_request_duration_seconds_count', { method: 'GET', route: '/v1/memory/facts/:id', status: '200' }) ?? 0;
    expect(timed(after.samples) - timed(before)).toBe(2);
    const fastest = valueOf(after.samples, 'mnemo_http_request_duration_seconds_bucket', { method: 'GET', route: '/v1/memory/facts/:id', status: '200', le: '+Inf' });
    expect(fastest).toBe(timed(after.samples));

    // Bounded labels: every route a pattern of ours, never a path with an id in it.
    const routes = new Set(samplesOf(after.samples, 'mnemo_http_requests_total').map((s) => s.labels.route));
    expect([...routes].filter((route) => uuid.test(route!) || route!.includes('nowhere'))).toEqual([]);
    for (const secret of [a.tenantId, b.tenantId, id]) expect(after.text).not.toContain(secret);
  });

  it('serves the process, pool, queue and rate-limit families, and stays out of /openapi.json', async () => {
    const { samples, text } = await metrics();
    expect(valueOf(samples, 'mnemo_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(samplesOf(samples, 'mnemo_nodejs_eventloop_lag_seconds')).toHaveLength(1);
    // The test API's one pool (test/helpers/database.ts: max 5), idle between requests.
    expect(valueOf(samples, 'mnemo_db_pool_size', { pool: 'primary' })).toBe(5);
    expect(valueOf(samples, 'mnemo_db_transactions_in_use', { pool: 'primary' })).toBe(0);
    expect(valueOf(samples, 'mnemo_db_transactions_waiting', { pool: 'primary' })).toBe(0);
    expect(valueOf(samples, 'mnemo_rate_limit_fallback')).toBe(0);
    for (const family of ['mnemo_rate_limit_rejections_total counter', 'mnemo_queue_jobs gauge', 'mnemo_job_duration_seconds histogram', 'mnemo_embedding_backlog gauge']) {
      expect(text).toContain(`# TYPE ${family}`);
    }
    const spec = await api.request('GET', '/openapi.json');
    expect(Object.keys(spec.body.paths)).not.toContain('/metrics');
    expect(Object.keys(spec.body.paths).length).toBeGreaterThan(5);
  });

  // Five transactions open at once: one PGlite runs one at a time (src/embedded/wire-server.ts).
  it('shows tenant transactions holding the pool, and those waiting beyond its size', needs('postgres-server'), async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    // Seven transactions on a pool of five: five hold a connection (each until the gate opens), two wait for one.
    const held = Array.from({ length: 7 }, () =>
      withTenant(api.db.app.db, a.tenantId, async (tx) => {
        started++;
        await tx.execute(sql`select 1`);
        await gate;
      }),
    );
    try {
      await eventually(async () => started === 5, 10_000, () => `${started} transactions started`, 20);
      await sleep(100);
      expect(started).toBe(5);
      const { samples } = await metrics();
      expect(valueOf(samples, 'mnemo_db_transactions_in_use', { pool: 'primary' })).toBe(5);
      expect(valueOf(samples, 'mnemo_db_transactions_waiting', { pool: 'primary' })).toBe(2);
    } finally {
      release();
      await Promise.all(held);
    }
    const { samples } = await metrics();
    expect(valueOf(samples, 'mnemo_db_transactions_in_use', { pool: 'primary' })).toBe(0);
    expect(valueOf(samples, 'mnemo_db_transactions_waiting', { pool: 'primary' })).toBe(0);
  });

  it('times retrievals by mode, context included; an error answer is not a retrieval', async () => {
    const count = (samples: Parameters<typeof valueOf>[0], mode: string) => valueOf(samples, 'mnemo_retrieval_duration_seconds_count', { mode }) ?? 0;
    const before = (await metrics()).samples;
    const retrieve = (body: object) => api.request('POST', '/v1/memory/retrieve', { token: a.admin, body });
    expect((await retrieve({ mode: 'keyword', query: 'metrics' })).status).toBe(200);
    expect((await retrieve({ mode: 'both', query: 'metrics' })).status).toBe(200);
    expect((await retrieve({ mode: 'list' })).status).toBe(200);
    // No embeddings in this API: semantic answers 422 and times nothing.
    expect((await retrieve({ mode: 'semantic', query: 'metrics' })).status).toBe(422);
    expect((await api.request('POST', '/v1/memory/context', { token: a.admin, body: { query: 'metrics' } })).status).toBe(200);
    const after = (await metrics()).samples;
    expect(count(after, 'keyword') - count(before, 'keyword')).toBe(1);
    expect(count(after, 'both') - count(before, 'both')).toBe(2);
    expect(count(after, 'list') - count(before, 'list')).toBe(1);
    expect(count(after, 'semantic') - count(before, 'semantic')).toBe(0);
  });
});

describe("the worker's metrics port", needs('redis'), () => {
  let db: TestDatabase;
  let deployment: Deployment;
  let workerMetrics: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    deployment = await startDeployment({ db });
    const port = await freePort();
    await deployment.startWorker({ MNEMO_METRICS_PORT: String(port) });
    workerMetrics = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await deployment?.close();
    await db?.drop();
  });

  it('serves queue depth from Redis, and job durations, waits and failures from the jobs it ran', async () => {
    const tenantId = uniqueTenant('metrics-worker');
    // Two jobs due in an hour (delayed), and one the worker fails for good (its payload names no tenant).
    for (let i = 0; i < 2; i++) await deployment.queues.embed.add('embed', { payload: { tenantId } }, { delay: 3_600_000 });
    await deployment.queues.embed.add('embed', { payload: {} });

    const { samples, text } = await eventually(
      async () => {
        const scraped = await scrape(`${workerMetrics}/metrics`);
        const failed = valueOf(scraped.samples, 'mnemo_job_failures_total', { queue: 'embed', final: 'true' });
        const reconciled = valueOf(scraped.samples, 'mnemo_job_duration_seconds_count', { queue: 'reconcile', outcome: 'completed' });
        // The startup retention pass too: under load it may still run when the rest is there.
        const swept = valueOf(scraped.samples, 'mnemo_job_duration_seconds_count', { queue: 'retention', outcome: 'completed' });
        return failed === 1 && (reconciled ?? 0) >= 1 && (swept ?? 0) >= 1 ? scraped : undefined;
      },
      20_000,
      async () => (await scrape(`${workerMetrics}/metrics`)).text.split('\n').filter((line) => line.startsWith('mnemo_job')).join('\n'),
    );
    const depth = (state: string) => valueOf(samples, 'mnemo_queue_jobs', { queue: 'embed', state });
    expect({ waiting: depth('waiting'), active: depth('active'), delayed: depth('delayed'), failed: depth('failed') }).toEqual({ waiting: 0, active: 0, delayed: 2, failed: 1 });
    // Every queue the worker runs is counted, the ones with nothing in them too.
    expect(new Set(samplesOf(samples, 'mnemo_queue_jobs').map((s) => s.labels.queue))).toEqual(
      new Set(['reconcile', 'embed', 'reembed', 'report', 'retention', 'erasure']),
    );
    expect(valueOf(samples, 'mnemo_job_duration_seconds_count', { queue: 'embed', outcome: 'failed' })).toBe(1);
    expect(valueOf(samples, 'mnemo_job_failures_total', { queue: 'embed', final: 'false' })).toBeUndefined();
    // The startup passes of reconcile and retention waited in the queue before their first attempt.
    expect(valueOf(samples, 'mnemo_job_wait_seconds_count', { queue: 'reconcile' })).toBeGreaterThanOrEqual(1);
    expect(valueOf(samples, 'mnemo_job_duration_seconds_count', { queue: 'retention', outcome: 'completed' })).toBeGreaterThanOrEqual(1);
    expect(valueOf(samples, 'mnemo_db_pool_size', { pool: 'primary' })).toBe(10);
    expect(text).not.toContain(tenantId);
    expect(valueOf(samples, 'mnemo_process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('answers /healthz for a container healthcheck, and nothing else', async () => {
    const health = await fetch(`${workerMetrics}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    expect((await fetch(`${workerMetrics}/v1/memory/facts`)).status).toBe(404);
    expect((await fetch(`${workerMetrics}/metrics`, { method: 'POST' })).status).toBe(405);
  });

  it('the API process serves its own /metrics on its port, outside /v1 and without a token', async () => {
    const token = await tokenFor({ tid: uniqueTenant('metrics-api') });
    expect((await deployment.get(token, '/v1/memory/facts')).status).toBe(200);
    const scraped = await scrape(`${deployment.apiUrl}/metrics`);
    expect(scraped.status).toBe(200);
    expect(valueOf(scraped.samples, 'mnemo_http_requests_total', { method: 'GET', route: '/v1/memory/facts', status: '200' })).toBe(1);
  });
});
