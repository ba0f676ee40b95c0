/**
 * The API when the database cannot serve (issue 10, defects 4, 9 and 10), over real PostgreSQL:
 * an unreachable server, one that accepts and never answers, a statement stalled past the
 * statement timeout, and a failing statement whose parameters must not reach the logs.
 * (The crash-and-restart of a real cluster is in test/faults/postgres.test.ts.)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Job } from 'bullmq';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../src/app.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { connect, type Database, withTenant } from '../../src/db/client.ts';
import { databaseUnavailable } from '../../src/db/errors.ts';
import { runTool, type ToolContext } from '../../src/mcp/tool.ts';
import { recordOutbox } from '../../src/jobs/outbox.ts';
import type { JobData } from '../../src/jobs/queues.ts';
import { createProcessor } from '../../src/jobs/worker.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { TEST_SECRET, tokenFor } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { freePort } from '../../support/ports.ts';
import { projectRoot } from '../../support/processes.ts';
import { runProcess } from '../helpers/process.ts';
import { needs } from '../helpers/needs.ts';

const STATEMENT_TIMEOUT_MS = 400;

describe('the API when the database cannot serve', () => {
  let t: TestDatabase;
  let bounded: Database;
  let unreachable: Database;
  let silent: Database;
  let silentServer: Server;
  const sockets = new Set<Socket>();
  const logs: string[] = [];
  const logger = createLogger('info', {}, (line) => logs.push(line));

  const appOver = (database: Database) =>
    createApp({
      logger,
      db: database.db,
      verifyToken: createTokenVerifier({ jwtSecret: TEST_SECRET, jwksUrl: undefined, issuer: undefined, audience: undefined }),
      readiness: { accepting: () => true, checks: { postgres: () => database.sql`select 1` } },
    });

  async function post(database: Database, token: string, path: string, body: unknown) {
    const started = performance.now();
    const response = await appOver(database).request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as any, ms: performance.now() - started };
  }

  beforeAll(async () => {
    t = await createTestDatabase();
    bounded = connect(t.appUrl, { max: 3, statementTimeoutMs: STATEMENT_TIMEOUT_MS });
    // Nothing listens there: every connect is refused at once.
    unreachable = connect(`postgres://nobody@127.0.0.1:${await freePort()}/nothing`, { max: 3, connectTimeoutMs: 1000 });
    // Accepts the TCP connection and never says a word, like a server that hangs.
    silentServer = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silentServer.listen(0, '127.0.0.1', resolve));
    const { port } = silentServer.address() as { port: number };
    silent = connect(`postgres://nobody@127.0.0.1:${port}/nothing`, { max: 1, connectTimeoutMs: 800 });
  });

  afterAll(async () => {
    await Promise.all([bounded, unreachable, silent].map((d) => d?.close({ timeoutSeconds: 0 }).catch(() => {})));
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silentServer?.close(resolve));
    await t?.drop();
  });

  it('an unreachable database answers 503 unavailable with Retry-After, fast, every time', async () => {
    const token = await tokenFor({ tid: uniqueTenant('down'), role: 'admin' });
    const answers = [];
    // Many in a row: the driver's reconnect backoff used to grow with each failure (up to 20 s).
    for (let i = 0; i < 12; i++) answers.push(await post(unreachable, token, '/v1/memory/facts', { type: 'acme.note', content: { text: `note ${i}` } }));
    const slowest = Math.max(...answers.map((a) => a.ms));
    console.info(`[database] unreachable: ${answers.length} answers ${[...new Set(answers.map((a) => a.status))].join(',')}, slowest ${Math.round(slowest)}ms`);
    for (const answer of answers) {
      expect(answer.status).toBe(503);
      expect(answer.body.error).toMatchObject({ code: 'unavailable', message: 'The database is unavailable; retry shortly' });
      expect(answer.retryAfter).toBe('2');
    }
    expect(slowest).toBeLessThan(1500);
  });

  it('an MCP tool whose database is unreachable answers the unavailable tool error, not internal', async () => {
    const result = await runTool({ requestId: 'req-down', logger } as ToolContext, 'some_tool', async () => {
      await unreachable.sql`select 1`;
      return { content: [] };
    });
    expect(result.isError).toBe(true);
    const text = (result.content[0] as { text: string }).text;
    expect(JSON.parse(text)).toEqual({ error: { code: 'unavailable', message: 'The database is unavailable; retry shortly', requestId: 'req-down' } });
  });

  it('a transaction the server rolled back for a deadlock is a retryable 503, not a bug', needs('postgres-server'), async () => {
    // Two real transactions of the app role locking the same two rows in opposite orders.
    const tenantId = uniqueTenant('deadlock');
    const token = await tokenFor({ tid: tenantId, role: 'admin' });
    const ids: string[] = [];
    for (const text of ['first', 'second']) ids.push((await post(bounded, token, '/v1/memory/facts', { type: 'acme.note', content: { text } })).body.id);
    // Without a statement timeout (the server detects the deadlock after deadlock_timeout, 1 s).
    const lockBoth = (order: string[], bothLocked: Promise<unknown>, firstLocked: () => void) =>
      withTenant(t.app.db, tenantId, async (tx) => {
        await tx.execute(sql`select id from facts where id = ${order[0]} for update`);
        firstLocked();
        await bothLocked;
        await tx.execute(sql`select id from facts where id = ${order[1]} for update`);
      });
    let locked = 0;
    let release!: () => void;
    const bothHaveOne = new Promise<void>((resolve) => (release = resolve));
    const firstLocked = () => ++locked === 2 && release();
    const outcomes = await Promise.allSettled([
      lockBoth(ids, bothHaveOne, firstLocked),
      lockBoth([...ids].reverse(), bothHaveOne, firstLocked),
    ]);
    const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(failed).toHaveLength(1);
    const unavailable = databaseUnavailable(failed[0]!.reason);
    expect(unavailable).toMatchObject({ code: 'unavailable', reason: 'contention', retryAfterSeconds: 1 });
  });

  it('a server that accepts and never answers fails after the connect timeout, not after 30 s', async () => {
    const token = await tokenFor({ tid: uniqueTenant('hang'), role: 'admin' });
    const answer = await post(silent, token, '/v1/memory/facts', { type: 'acme.note', content: { text: 'hello' } });
    console.info(`[database] silent server: ${answer.status} after ${Math.round(answer.ms)}ms (connect timeout 800ms)`);
    expect(answer.status).toBe(503);
    expect(answer.body.error.code).toBe('unavailable');
    expect(answer.retryAfter).toBe('2');
    expect(answer.ms).toBeLessThan(2500);
  }, 15_000);

  it('a statement stalled past the statement timeout is cancelled by the server and answers 503', needs('postgres-server'), async () => {
    const tenantId = uniqueTenant('stall');
    const token = await tokenFor({ tid: tenantId, role: 'admin' });
    const created = await post(bounded, token, '/v1/memory/facts', { type: 'acme.note', content: { text: 'locked by an operator' } });
    expect(created.status).toBe(201);
    const locker = await t.admin.reserve();
    try {
      await locker`begin`;
      await locker`select id from facts where id = ${created.body.id} for update`;
      const stalled = await post(bounded, token, `/v1/memory/facts/${created.body.id}/supersede`, { content: { text: 'waits on the lock' } });
      console.info(`[database] stalled statement: ${stalled.status} after ${Math.round(stalled.ms)}ms (statement timeout ${STATEMENT_TIMEOUT_MS}ms)`);
      expect(stalled.status).toBe(503);
      expect(stalled.body.error).toMatchObject({ code: 'unavailable', message: 'The database did not answer in time; retry shortly' });
      expect(stalled.retryAfter).toBe('1');
      expect(stalled.ms).toBeGreaterThanOrEqual(STATEMENT_TIMEOUT_MS - 20);
      expect(stalled.ms).toBeLessThan(STATEMENT_TIMEOUT_MS + 1500);
      // Cancelled, not abandoned: no statement of the app is active or waiting on a lock.
      const left = await t.admin`
        select pid, state, wait_event_type from pg_stat_activity
        where datname = ${t.name} and usename <> current_user and state <> 'idle'`;
      expect(left).toEqual([]);
    } finally {
      await locker`rollback`;
      locker.release();
    }
    const [row] = await t.admin<{ version: number }[]>`select version from facts where id = ${created.body.id}`;
    expect(row!.version).toBe(1);
    expect((await post(bounded, token, `/v1/memory/facts/${created.body.id}/supersede`, { content: { text: 'free again' } })).status).toBe(200);
  });

  it('a transaction sets its own statement timeout, and only when configured', async () => {
    const read = (database: Database) => withTenant(database.db, 'any-tenant', async (tx) => (await tx.execute(sql`select current_setting('statement_timeout') as s`))[0]);
    expect(await read(bounded)).toEqual({ s: `${STATEMENT_TIMEOUT_MS}ms` });
    expect(await read(t.app)).toEqual({ s: '0' });
    // Transaction-local: the session keeps the server's setting afterwards.
    const [session] = await bounded.sql`select current_setting('statement_timeout') as s`;
    expect(session).toEqual({ s: '0' });
  });

  it('logs a failing statement by its SQLSTATE, never by its parameters (the content it carried)', async () => {
    const canary = `canary-${Math.random().toString(36).slice(2)}`;
    await t.admin.unsafe(`alter table facts add constraint faults_no_canary check (coalesce(content->>'text', '') not like '%canary-%') not valid`);
    try {
      const token = await tokenFor({ tid: uniqueTenant('logs'), role: 'admin' });
      logs.length = 0;
      const answer = await post(bounded, token, '/v1/memory/facts', { type: 'acme.note', content: { text: `the secret is ${canary}` } });
      expect(answer.status).toBe(500);
      expect(answer.body.error.code).toBe('internal');
      const line = logs.find((l) => l.includes('"unhandled error"'));
      expect(line, logs.join('\n')).toBeDefined();
      expect(line).not.toContain(canary);
      expect(line).not.toMatch(/params:|"parameters"|"query"|Failing row|insert into/i);
      // What it does say: which error, its SQLSTATE and constraint, and where in the code.
      const logged = JSON.parse(line!);
      expect(logged.error).toMatchObject({ name: 'DrizzleQueryError', cause: { name: 'PostgresError', code: '23514', constraint: 'faults_no_canary' } });
      expect(logged.error.stack).toMatch(/\n\s+at /);
      expect(JSON.stringify(answer.body)).not.toContain(canary);
    } finally {
      await t.admin.unsafe('alter table facts drop constraint faults_no_canary');
    }
  });

  it('a failed job logs and records its error without the statement parameters', async () => {
    const canary = `canary-${Math.random().toString(36).slice(2)}`;
    const definition = { name: 'faults-test', payload: z.object({}), jobOptions: {} };
    // A statement that fails on its parameter, whose value PostgreSQL also quotes in its message.
    const handler = async () => bounded.db.execute(sql`select ${canary}::int`);
    logs.length = 0;
    const processor = createProcessor(definition, handler, { db: bounded.db, logger });
    const tenantId = uniqueTenant('job-logs');
    const row = await withTenant(bounded.db, tenantId, (tx) => recordOutbox(tx, tenantId, definition.name, {}));
    const job = { id: '1', data: { payload: {}, outbox: { tenantId, id: row.id } }, attemptsMade: 0, opts: { attempts: 3 } } as unknown as Job<JobData>;
    const thrown = await processor(job).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(thrown).toBeInstanceOf(Error);
    // What BullMQ would store in Redis with the failed job.
    expect(`${thrown!.message}\n${thrown!.stack}`).not.toContain(canary);
    expect(thrown!.message).toContain('22P02');
    const line = logs.find((l) => l.includes('"job failed"'));
    expect(line, logs.join('\n')).toBeDefined();
    expect(line).not.toContain(canary);
    expect(JSON.parse(line!).error).toMatchObject({ name: 'DrizzleQueryError', cause: { name: 'PostgresError', code: '22P02' } });
    // The outbox row keeps the same safe text.
    const [stored] = await t.admin<{ last_error: string; attempts: number }[]>`select last_error, attempts from outbox where id = ${row.id}`;
    expect(stored!.attempts).toBe(1);
    expect(stored!.last_error).toContain('22P02');
    expect(stored!.last_error).not.toContain(canary);
  });

  it('a job whose last attempt fails because the database is down leaves its outbox row open for the reconciler', async () => {
    const definition = { name: 'faults-test', payload: z.object({}), jobOptions: {} };
    const tenantId = uniqueTenant('job-outage');
    const row = await withTenant(bounded.db, tenantId, (tx) => recordOutbox(tx, tenantId, definition.name, {}));
    // The handler's database is unreachable; the outbox is marked through one that answers.
    const processor = createProcessor(definition, async () => unreachable.sql`select 1`, { db: bounded.db, logger });
    const last = { id: '2', data: { payload: {}, outbox: { tenantId, id: row.id } }, attemptsMade: 2, opts: { attempts: 3 } } as unknown as Job<JobData>;
    await expect(processor(last)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    const [stored] = await t.admin<{ failed_at: Date | null; attempts: number }[]>`select failed_at, attempts from outbox where id = ${row.id}`;
    expect(stored).toEqual({ failed_at: null, attempts: 1 });
    // A real failure on the last attempt still closes it.
    const failing = createProcessor(definition, async () => bounded.db.execute(sql`select 1/0`), { db: bounded.db, logger });
    await expect(failing(last)).rejects.toThrow(/22012/);
    const [closed] = await t.admin<{ failed_at: Date | null }[]>`select failed_at from outbox where id = ${row.id}`;
    expect(closed!.failed_at).toBeInstanceOf(Date);
  });

  it('a stray promise rejection is logged (safely) and the process goes on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mnemo-rejection-'));
    const script = join(dir, 'stray.ts');
    writeFileSync(
      script,
      [
        `import { createLogger, logUnhandledRejections } from ${JSON.stringify(join(projectRoot, 'src/foundation/log.ts'))};`,
        `logUnhandledRejections(createLogger('info'));`,
        `const error = Object.assign(new Error('Failed query: insert\\nparams: canary-stray'), { params: ['canary-stray'] });`,
        `void Promise.reject(error);`,
        `setTimeout(() => console.log('still running'), 100);`,
      ].join('\n'),
    );
    try {
      const { code, stdout } = await runProcess(script, [], {});
      expect(code).toBe(0);
      expect(stdout).toContain('"unhandled promise rejection"');
      expect(stdout).toContain('still running');
      expect(stdout).not.toContain('canary-stray');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
