/**
 * The read routing's decisions (src/http/read-routing.ts) without a replica cluster: the "replica"
 * is a second pool on the test database (a server not in recovery has replayed everything it
 * wrote), one on a port nothing listens on, or one that connects as the owner. The real streaming
 * replica, its lag and two API nodes are test/scale/read-replica.test.ts.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { FactNotFound } from '../../src/core/errors.ts';
import { connect, type Database, type Db, UnsafeDatabaseRoleError } from '../../src/db/client.ts';
import { AppError } from '../../src/foundation/app-error.ts';
import type { AppEnv } from '../../src/http/app-env.ts';
import { openReplicaReads, readFrom, type ReadRouting, rememberWrites, type WritePositions } from '../../src/http/read-routing.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { startTestApi, type TestApi } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { connectMcp } from '../helpers/mcp.ts';
import { freePort } from '../../support/ports.ts';

const logger = createLogger('error');
const principal = (sub: string): Principal => ({ tenantId: 'acme', sub, role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

/** Positions in a Map, or a Redis that does not answer. */
function memoryPositions(failing = false): WritePositions & { stored: Map<string, bigint> } {
  const stored = new Map<string, bigint>();
  return {
    stored,
    async remember(caller, position) {
      if (failing) throw new Error('Redis did not answer');
      stored.set(caller, position);
    },
    async recall(caller) {
      if (failing) throw new Error('Redis did not answer');
      return stored.get(caller);
    },
    close: async () => {},
  };
}

describe('read routing', () => {
  let db: TestDatabase;
  let replica: Database;
  const opened: Database[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    replica = connect(db.appUrl, { applicationName: 'mnemo-api-read' });
    opened.push(replica);
  });

  afterAll(async () => {
    for (const database of opened) await database.close();
    await db?.drop();
  });

  const served = (database: Database) => (handle: Db) => Promise.resolve(handle === database.db ? 'replica' : handle === db.app.db ? 'primary' : 'unknown');

  it('reads from the replica once it has replayed the caller\'s last write, which wrote() remembers', async () => {
    const positions = memoryPositions();
    const reads = await openReplicaReads({ primary: db.app, replica, positions, logger });
    expect(await reads.read(principal('never-wrote'), served(replica))).toBe('replica');
    await reads.wrote(principal('writer'));
    expect([...positions.stored.values()][0]).toBeGreaterThan(0n);
    // This "replica" is the primary itself: it has everything, the writer's write included.
    expect(await reads.read(principal('writer'), served(replica))).toBe('replica');
    await reads.check();
    reads.close();
  });

  it('reads from the primary while the caller\'s last write is past what the replica has replayed, or when Redis does not answer', async () => {
    const positions = memoryPositions();
    const reads = await openReplicaReads({ primary: db.app, replica, positions, logger });
    positions.stored.set(JSON.stringify(['acme', 'ahead']), BigInt(Number.MAX_SAFE_INTEGER));
    expect(await reads.read(principal('ahead'), served(replica))).toBe('primary');
    expect(await reads.read(principal('someone-else'), served(replica))).toBe('replica');
    reads.close();

    const blind = await openReplicaReads({ primary: db.app, replica, positions: memoryPositions(true), logger });
    expect(await blind.read(principal('never-wrote'), served(replica))).toBe('primary');
    // The write's answer does not wait on Redis failing: its position stays in this node.
    await blind.wrote(principal('writer'));
    blind.close();
  });

  it('asks the primary for a fact by id that the replica does not have, when told to', async () => {
    const reads = await openReplicaReads({ primary: db.app, replica, positions: memoryPositions(), logger });
    const lookUp = (handle: Db) => (handle === replica.db ? Promise.reject(new FactNotFound('f1')) : Promise.resolve('found on the primary'));
    expect(await reads.read(principal('reader'), lookUp, { notFoundAsksPrimary: true })).toBe('found on the primary');
    await expect(reads.read(principal('reader'), lookUp)).rejects.toBeInstanceOf(FactNotFound);
    // Any other error of the read is the read's answer, not a reason to ask again.
    const refused = (handle: Db) => (handle === replica.db ? Promise.reject(new AppError('bad-input', 'no')) : Promise.resolve('primary'));
    await expect(reads.read(principal('reader'), refused, { notFoundAsksPrimary: true })).rejects.toThrow('no');
    reads.close();
  });

  it('sends reads to the primary when the replica does not answer, and readiness says so', async () => {
    const port = await freePort();
    const away = new URL(db.appUrl);
    away.port = String(port);
    const unreachable = connect(away.toString(), { applicationName: 'mnemo-api-read', connectTimeoutMs: 500 });
    opened.push(unreachable);
    // Not answering at startup does not stop the API: it starts with reads on the primary.
    const reads = await openReplicaReads({ primary: db.app, replica: unreachable, positions: memoryPositions(), logger, probeEveryMs: 60_000 });
    const calls: string[] = [];
    const run = (handle: Db) => {
      const where = handle === unreachable.db ? 'replica' : 'primary';
      calls.push(where);
      return where === 'replica' ? unreachable.sql`select 1`.then(() => where) : Promise.resolve(where);
    };
    expect(await reads.read(principal('reader'), run)).toBe('primary');
    expect(calls).toEqual(['primary']);
    await expect(reads.check()).rejects.toThrow();
    reads.close();

    // Up at startup, down at the read: that read is answered by the primary, and the next skip the replica.
    const flaky = connect(db.appUrl, { applicationName: 'mnemo-api-read', connectTimeoutMs: 500 });
    opened.push(flaky);
    const later = await openReplicaReads({ primary: db.app, replica: flaky, positions: memoryPositions(), logger, probeEveryMs: 60_000 });
    const lost = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const seen: string[] = [];
    const breaking = (handle: Db) => {
      seen.push(handle === flaky.db ? 'replica' : 'primary');
      return handle === flaky.db ? Promise.reject(lost) : Promise.resolve('primary');
    };
    expect(await later.read(principal('reader'), breaking)).toBe('primary');
    expect(await later.read(principal('reader'), breaking)).toBe('primary');
    expect(seen).toEqual(['replica', 'primary', 'primary']);
    await expect(later.check()).rejects.toThrow('read replica unavailable');
    later.close();
  });

  it('refuses a replica connection that would bypass row-level security, naming DATABASE_READ_URL', async () => {
    const owner = connect(db.adminUrl, { applicationName: 'mnemo-api-read' });
    opened.push(owner);
    const refusal = openReplicaReads({ primary: db.app, replica: owner, positions: memoryPositions(), logger });
    await expect(refusal).rejects.toBeInstanceOf(UnsafeDatabaseRoleError);
    await expect(refusal).rejects.toThrow(/^DATABASE_READ_URL connects as "[^"]+", which is a superuser/);
  });
});

describe('rememberWrites', () => {
  function appWith(routing: ReadRouting) {
    const app = new Hono<AppEnv>();
    app.use('*', rememberWrites(routing));
    app.use('/v1/*', async (c, next) => {
      if (c.req.header('authorization')) c.set('principal', principal(c.req.header('authorization')!));
      await next();
    });
    app.post('/v1/write', (c) => c.json({}, 201));
    app.post('/v1/refused', (c) => c.json({}, 409));
    app.post('/v1/search', async (c) => c.json(await readFrom(c, routing, async () => 'found'), 200));
    app.get('/v1/list', (c) => c.json([], 200));
    return app;
  }

  it('remembers the caller after a write that answered 2xx, and after nothing else', async () => {
    const wrote: string[] = [];
    const routing: ReadRouting = { read: (_principal, run) => run({} as Db), wrote: async (p) => void wrote.push(p.sub) };
    const app = appWith(routing);
    const send = (method: string, path: string, sub?: string) => app.request(path, { method, headers: sub ? { authorization: sub } : {} });

    expect((await send('POST', '/v1/write', 'alice')).status).toBe(201);
    expect(wrote).toEqual(['alice']);
    expect((await send('POST', '/v1/refused', 'bob')).status).toBe(409);
    expect((await send('POST', '/v1/search', 'carol')).status).toBe(200);
    expect((await send('GET', '/v1/list', 'dave')).status).toBe(200);
    // Nobody authenticated: nobody to remember.
    expect((await send('POST', '/v1/write')).status).toBe(201);
    expect(wrote).toEqual(['alice']);
  });
});

describe('the MCP tools', () => {
  let api: TestApi;
  let replica: Database;
  /** Which pool answered each routed read. */
  const served: string[] = [];

  beforeAll(async () => {
    api = await startTestApi({
      reads: async (database) => {
        replica = connect(database.appUrl, { applicationName: 'mnemo-api-read' });
        const routing = await openReplicaReads({ primary: database.app, replica, positions: memoryPositions(), logger });
        return {
          ...routing,
          read: (caller, run, options) =>
            routing.read(caller, (handle) => {
              served.push(handle === replica.db ? 'replica' : handle === database.app.db ? 'primary' : 'unknown');
              return run(handle);
            }, options),
        };
      },
    });
  });

  afterAll(async () => {
    await api?.close();
    await replica?.close();
  });

  it('read where /v1 reads go: memory_retrieve and kiwi_memory_report on the replica, remember on the primary, and the recall sees it', async () => {
    const { admin } = await api.newTenant('mcp-reads');
    const client = await connectMcp(api.baseUrl, admin);
    try {
      const remembered = (await client.callTool({ name: 'kindgi_remember', arguments: { type: 'note', text: 'The standup moved to 9:30' } })) as CallToolResult;
      expect(remembered.isError).toBeFalsy();
      expect(served).toEqual([]);
      const recalled = (await client.callTool({ name: 'memory_retrieve', arguments: { query: 'standup', mode: 'keyword' } })) as CallToolResult;
      expect(recalled.structuredContent).toMatchObject({ factIds: [(remembered.structuredContent as { factId: string }).factId] });
      expect(served).toEqual(['replica']);
      const report = (await client.callTool({ name: 'kiwi_memory_report', arguments: {} })) as CallToolResult;
      expect(report.isError).toBeFalsy();
      expect(served).toEqual(['replica', 'replica']);
    } finally {
      await client.close();
    }
  });
});
