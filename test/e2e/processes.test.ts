import { jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { tokenFor } from '../helpers/api.ts';
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { insertFact, uniqueTenant } from '../helpers/factories.ts';
import { freePort } from '../../support/ports.ts';
import { runProcess, startProcess } from '../helpers/process.ts';
import { removeQueuePrefix } from '../../support/redis.ts';
import { sleep } from '../../support/wait.ts';
import { needs } from '../helpers/needs.ts';

const secret = 'e2e-secret-that-is-at-least-32-bytes-long';

describe('processes as operators run them', () => {
  let t: TestDatabase;
  let env: Record<string, string>;

  beforeAll(async () => {
    t = await createTestDatabase();
    env = {
      DATABASE_URL: t.appUrl,
      REDIS_URL: inject('redisUrl'),
      MNEMO_JWT_SECRET: secret,
      MNEMO_QUEUE_PREFIX: `mnemo-e2e-${t.name}`,
      MNEMO_SHUTDOWN_TIMEOUT_MS: '5000',
    };
  });
  afterAll(async () => {
    // The worker left its queues (and the reconcile scheduler) under this test's prefix.
    await removeQueuePrefix(env.MNEMO_QUEUE_PREFIX!, inject('redisUrl'));
    await t.drop();
  });

  it('npm start: answers /healthz and /readyz, then stops cleanly on SIGTERM', needs('redis'), async () => {
    const port = await freePort();
    const api = startProcess('src/server.ts', [], { ...env, PORT: String(port) });
    try {
      await api.waitFor('"api listening"');
      expect(api.stdout()).toContain('  Memory search: keyword (KINDGI_MEMORY_EMBEDDINGS turns on search by meaning)\n');

      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });

      const ready = await fetch(`http://127.0.0.1:${port}/readyz`, { headers: { 'X-Request-Id': 'probe-1' } });
      expect(ready.status).toBe(200);
      expect(ready.headers.get('x-request-id')).toBe('probe-1');
      expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' } });

      await api.waitFor('"path":"/readyz"');
      const line = api.stdout().split('\n').find((l) => l.includes('"path":"/readyz"'))!;
      expect(JSON.parse(line)).toMatchObject({ msg: 'request', method: 'GET', path: '/readyz', status: 200, requestId: 'probe-1' });
    } finally {
      api.child.kill('SIGTERM');
    }
    expect(await api.exited).toBe(0);
    expect(api.stdout()).toContain('"api stopped"');
  });

  it('npm start with Redis away: stays ready (redis degraded) and writes still commit', async () => {
    const port = await freePort();
    // Nothing listens on this port: the API's Redis never answers.
    const api = startProcess('src/server.ts', [], { ...env, REDIS_URL: `redis://127.0.0.1:${await freePort()}`, PORT: String(port) });
    try {
      await api.waitFor('"api listening"');
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'degraded' } });
      expect(ready.status).toBe(200);

      const tenantId = uniqueTenant('no-redis');
      const token = await tokenFor({ tid: tenantId, role: 'admin' }, { secret });
      const write = await fetch(`http://127.0.0.1:${port}/v1/memory/facts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'acme.note', content: { text: 'written while Redis is away' } }),
      });
      expect(write.status, await write.clone().text()).toBe(201);
      const [row] = await t.admin<{ n: number }[]>`select count(*)::int as n from facts where tenant_id = ${tenantId}`;
      expect(row!.n).toBe(1);
    } finally {
      api.child.kill('SIGTERM');
    }
    expect(await api.exited).toBe(0);
  });

  it('npm start: a bad setting stops startup with one line naming the variable', async () => {
    const result = await runProcess('src/server.ts', [], { ...env, PORT: 'eighty' });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('mnemo api: Invalid configuration: PORT must be a port number\n');
  });

  it('npm start: refuses a database role that bypasses row-level security', async () => {
    const result = await runProcess('src/server.ts', [], { ...env, DATABASE_URL: t.adminUrl, PORT: String(await freePort()) });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^mnemo api: DATABASE_URL connects as ".+", which is a superuser/);
  });

  it('npm run worker: starts, logs its queues, exits cleanly on SIGTERM', needs('redis'), async () => {
    const worker = startProcess('workers/index.ts', [], env);
    try {
      await worker.waitFor('"worker started"');
      const line = worker.stdout().split('\n').find((l) => l.includes('"worker started"'))!;
      expect(JSON.parse(line)).toMatchObject({ queues: ['reconcile', 'embed', 'reembed', 'report', 'retention', 'erasure'], prefix: env.MNEMO_QUEUE_PREFIX, embeddings: 'off' });
    } finally {
      worker.child.kill('SIGTERM');
    }
    // A second SIGTERM while it drains is ignored, not the default action that kills it: the drain
    // finishes. One that lands in the last instant of process.exit() (after the drain, when Node
    // has let go of its handlers) ends the process by the signal instead, which loses nothing.
    await sleep(50);
    if (worker.child.exitCode === null) worker.child.kill('SIGTERM');
    const code = await worker.exited;
    const output = `stdout: ${worker.stdout()}\nstderr: ${worker.stderr()}`;
    expect(worker.stdout(), output).toContain('"worker stopped"');
    if (code !== 0) expect(worker.child.signalCode, output).toBe('SIGTERM');
  });

  it('npm run worker: its retention pass at start expires a due fact and, with no grace, purges its content', needs('redis'), async () => {
    const tenantId = uniqueTenant('retention');
    const due = await insertFact(t.app.db, tenantId, { expiresAt: new Date(Date.now() - 60_000) });
    const kept = await insertFact(t.app.db, tenantId, { expiresAt: new Date(Date.now() - 60_000), legalHold: true });
    const worker = startProcess('workers/index.ts', [], { ...env, MNEMO_PURGE_GRACE_DAYS: '0' });
    try {
      await worker.waitFor('"retention swept"', 30_000);
    } finally {
      worker.child.kill('SIGTERM');
    }
    expect(await worker.exited).toBe(0);
    const rows = await t.admin<{ id: string; version: number; content: unknown; invalidation_reason: string | null }[]>`
      select id, version, content, invalidation_reason from facts where tenant_id = ${tenantId} order by id`;
    const byId = new Map(rows.map((row) => [row.id, row]));
    expect(byId.get(due.id)).toMatchObject({ version: 2, content: null, invalidation_reason: 'expired' });
    expect(byId.get(kept.id)).toMatchObject({ version: 1, content: kept.content, invalidation_reason: null });
  });

  it('mnemo token: mints a token the secret verifies, with the grants asked for', async () => {
    const result = await runProcess('bin/mnemo.js', ['token', '--tenant', 'acme', '--sub', 'app-1', '--role', 'service', '--projects-write', 'p1,p2', '--ttl', '600'], {
      MNEMO_JWT_SECRET: secret,
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const { payload, protectedHeader } = await jwtVerify(result.stdout.trim(), new TextEncoder().encode(secret), {
      algorithms: ['HS256'],
    });
    expect(protectedHeader.alg).toBe('HS256');
    expect(payload).toMatchObject({
      sub: 'app-1',
      tid: 'acme',
      role: 'service',
      projects: { read: [], write: ['p1', 'p2'] },
      orgs: { read: [], write: [] },
    });
    expect(payload.exp! - payload.iat!).toBe(600);
  });

  it('mnemo token: says what is missing or wrong', async () => {
    const noRole = await runProcess('bin/mnemo.js', ['token', '--tenant', 'acme', '--sub', 'u'], { MNEMO_JWT_SECRET: secret });
    expect(noRole).toMatchObject({ code: 2, stderr: 'mnemo token: --role is required\n' });
    const badRole = await runProcess('bin/mnemo.js', ['token', '--tenant', 'acme', '--sub', 'u', '--role', 'root'], { MNEMO_JWT_SECRET: secret });
    expect(badRole).toMatchObject({ code: 2, stderr: 'mnemo token: --role must be one of admin, member, service\n' });
    // With a server (DATABASE_URL) the secret must be given; embedded, the data directory has one.
    const noSecret = await runProcess('bin/mnemo.js', ['token', '--tenant', 'acme', '--sub', 'u', '--role', 'admin'], { DATABASE_URL: 'postgres://app@db.internal/mnemo' });
    expect(noSecret).toMatchObject({ code: 2, stderr: 'Invalid configuration: MNEMO_JWT_SECRET is required\n' });
  });

  it('mnemo migrate: migrates an empty database, then reports it up to date', async () => {
    const target = await createEmptyDatabase();
    try {
      const migrateEnv = { DATABASE_ADMIN_URL: target.adminUrl, DATABASE_URL: target.appUrl };
      const first = await runProcess('bin/mnemo.js', ['migrate'], migrateEnv);
      expect(first.code).toBe(0);
      expect(first.stderr).toMatch(/migrations: applied \d+, \d+ in all/);
      const second = await runProcess('bin/mnemo.js', ['migrate'], migrateEnv);
      expect(second.code).toBe(0);
      expect(second.stderr).toMatch(/migrations: up to date/);
    } finally {
      await target.drop();
    }
  });
});
