/**
 * Read replicas with read-your-writes (issue 15, part 3), against a real streaming replica: a
 * private primary and a replica made from it with `pg_basebackup -R` on loopback, its apply delayed
 * 2 s (`recovery_min_apply_delay`) so it is visibly behind; two API processes — two nodes — sharing
 * Redis, both with DATABASE_READ_URL.
 *
 * Which server served a read is counted on each server: pg_stat_statements counts the statement
 * every tenant transaction opens with, so a list or a search on the replica adds one there.
 */
import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { connect, type Database, type Db } from '../../src/db/client.ts';
import { openReplicaReads, redisWritePositions } from '../../src/http/read-routing.ts';
import { createRedis } from '../../src/jobs/redis.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { type ClusterDatabase, type PostgresCluster, startPostgresCluster } from '../../support/postgres-cluster.ts';
import { tokenFor } from '../helpers/api.ts';
import { type Deployment, startDeployment } from '../helpers/deployment.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { freePort } from '../../support/ports.ts';
import type { RunningProcess } from '../../support/processes.ts';
import { startProcess } from '../helpers/process.ts';
import { deleteKeysUnder } from '../../support/redis.ts';
import { eventually, sleep } from '../../support/wait.ts';
import { type Replica, startReplica } from './helpers/replica.ts';

const APPLY_DELAY_MS = 2000;

/**
 * withTenant's first statement (the tenant, jit, the statement timeout) as pg_stat_statements keeps
 * it: its literals numbered after its parameters, the tenant id being $1 —
 * `select set_config($4, $1, $5), set_config($6, $2, $7), set_config($8, $3, $9)`. A search's
 * settings statement sets only literals; a report's has the same shape, but runs only inside a
 * tenant transaction on the same server, so it never counts a read where none was.
 */
const TENANT_STATEMENT = String.raw`^select set_config\(\$\d+, \$1, \$\d+\), set_config\(`;

interface Answer {
  status: number;
  body: any;
}

async function call(base: string, method: string, token: string, path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

describe('read replica: reads on a streaming replica, each caller reading its own writes', () => {
  let cluster: PostgresCluster;
  let database: ClusterDatabase;
  let replica: Replica;
  let primaryAdmin: Sql;
  let replicaAdmin: Sql;
  let deployment: Deployment;
  let secondApi: RunningProcess;
  /** The two API nodes' base URLs. */
  let nodes: [string, string];
  const tenant = uniqueTenant('replica');
  let writer: string;
  let reader: string;

  beforeAll(async () => {
    cluster = await startPostgresCluster();
    // pg_stat_statements says which server ran what; the replica copies the setting.
    const root = postgres(cluster.adminUrl, { max: 1, onnotice: () => {} });
    await root`alter system set shared_preload_libraries = 'pg_stat_statements'`;
    await root.end();
    await cluster.stop();
    await cluster.start();
    database = await cluster.createDatabase();
    primaryAdmin = postgres(database.adminUrl, { max: 1, onnotice: () => {} });
    await primaryAdmin`create extension pg_stat_statements`;
    replica = await startReplica(cluster, { applyDelayMs: APPLY_DELAY_MS });
    replicaAdmin = postgres(replica.through(database.adminUrl), { max: 1, onnotice: () => {} });

    deployment = await startDeployment({ db: { appUrl: database.appUrl }, env: { DATABASE_READ_URL: replica.through(database.appUrl) } });
    const port = await freePort();
    secondApi = startProcess('src/server.ts', [], { ...deployment.env, PORT: String(port) });
    await secondApi.waitFor('"api listening"', 60_000);
    nodes = [deployment.apiUrl, `http://127.0.0.1:${port}`];
    writer = await tokenFor({ tid: tenant, sub: 'writer', role: 'admin' });
    reader = await tokenFor({ tid: tenant, sub: 'reader', role: 'admin' });
  });

  afterAll(async () => {
    if (secondApi) await deployment.kill(secondApi);
    await deployment?.close();
    await replicaAdmin?.end({ timeout: 5 });
    await primaryAdmin?.end({ timeout: 5 });
    await replica?.remove();
    await cluster?.remove();
  });

  /** Tenant transactions `server` has run so far. */
  const tenantTransactions = async (server: Sql) =>
    Number(
      (
        await server<{ n: number }[]>`
          select coalesce(sum(calls), 0)::int as n from pg_stat_statements
          where query ~ ${TENANT_STATEMENT} and dbid = (select oid from pg_database where datname = current_database())`
      )[0]!.n,
    );
  /** Whether the replica shows this fact yet (as its owner: no row-level security in the way). */
  const onReplica = async (id: string) =>
    Number((await replicaAdmin<{ n: number }[]>`select count(*)::int as n from facts where tenant_id = ${tenant} and id = ${id}`)[0]!.n) > 0;
  const write = async (base: string, type: string, text: string) => {
    const written = await call(base, 'POST', writer, '/v1/memory/facts', { type, content: { text } });
    expect(written.status, JSON.stringify(written.body)).toBe(201);
    return written.body as { id: string };
  };
  const ids = (answer: Answer) => (answer.body.data as { id: string }[]).map((fact) => fact.id);

  it('connects both nodes to the replica as mnemo-api-read, and only there', async () => {
    // A first read opens the pools (postgres.js connects on demand).
    for (const base of nodes) expect((await call(base, 'GET', reader, '/v1/memory/facts')).status).toBe(200);
    const readers = async (server: Sql) =>
      Number((await server<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where application_name = 'mnemo-api-read'`)[0]!.n);
    expect(await readers(replicaAdmin)).toBeGreaterThanOrEqual(2);
    expect(await readers(primaryAdmin)).toBe(0);
  });

  it('a caller reads its own write at once, through the node it wrote to and through the other, every time', async () => {
    const type = 'acme.own';
    const replicaBefore = await tenantTransactions(replicaAdmin);
    const primaryBefore = await tenantTransactions(primaryAdmin);
    const written: string[] = [];
    const rounds = 40;
    for (let i = 0; i < rounds; i++) {
      const [here, there] = i % 2 === 0 ? nodes : ([nodes[1], nodes[0]] as const);
      const { id } = await write(here, type, `order ${i} part w${i}x`);
      written.push(id);

      const byId = await call(there, 'GET', writer, `/v1/memory/facts/${id}`);
      expect([byId.status, byId.body.content]).toEqual([200, { text: `order ${i} part w${i}x` }]);
      const list = await call(here, 'GET', writer, `/v1/memory/facts?type=${type}&limit=100`);
      expect(ids(list).sort()).toEqual([...written].sort());
      const search = await call(there, 'POST', writer, '/v1/memory/retrieve', { mode: 'keyword', query: `w${i}x` });
      expect(search.body.results.map((r: { fact: { id: string } }) => r.fact.id)).toEqual([id]);
      if (i % 4 === 0) {
        const next = await call(there, 'POST', writer, `/v1/memory/facts/${id}/supersede`, { content: { text: `order ${i} changed` }, expectVersion: 1 });
        expect(next.status, JSON.stringify(next.body)).toBe(200);
        const seen = await call(here, 'GET', writer, `/v1/memory/facts/${id}`);
        expect([seen.body.version, seen.body.content]).toEqual([2, { text: `order ${i} changed` }]);
        const context = await call(there, 'POST', writer, '/v1/memory/context', { query: `order ${i} changed`, mode: 'keyword' });
        expect(context.body.factIds).toContain(id);
      }
      // The replica did not have the write yet: what the caller read came from the primary.
      expect(await onReplica(id)).toBe(false);
    }
    // Not one of the writer's reads reached the replica; they all ran on the primary.
    expect(await tenantTransactions(replicaAdmin)).toBe(replicaBefore);
    expect((await tenantTransactions(primaryAdmin)) - primaryBefore).toBeGreaterThanOrEqual(rounds * 4);
  });

  it("another caller's reads go to the replica, which is behind until the apply delay has passed; then the writer's go there too", async () => {
    const type = 'acme.other';
    const before = await tenantTransactions(replicaAdmin);
    const { id } = await write(nodes[0], type, 'spare belt shipped');
    const written = Date.now();

    // Stale: the replica has not applied the commit yet, and the reader has written nothing.
    for (const base of nodes) {
      const list = await call(base, 'GET', reader, `/v1/memory/facts?type=${type}`);
      expect([list.status, ids(list)]).toEqual([200, []]);
    }
    const report = await call(nodes[1], 'GET', reader, '/v1/memory/report');
    expect(report.status).toBe(200);
    // Asked for by id, the fact the replica lacks is looked up on the primary.
    const byId = await call(nodes[1], 'GET', reader, `/v1/memory/facts/${id}`);
    expect([byId.status, byId.body.id]).toEqual([200, id]);
    expect(await onReplica(id)).toBe(false);
    expect((await tenantTransactions(replicaAdmin)) - before).toBeGreaterThanOrEqual(4);

    const fresh = await eventually(
      async () => {
        const list = await call(nodes[1], 'GET', reader, `/v1/memory/facts?type=${type}`);
        return ids(list).includes(id) ? Date.now() - written : undefined;
      },
      15_000,
      () => 'the replica never showed the write',
      50,
    );
    console.log(`[read-replica] another caller saw the write on the replica after ${fresh} ms (apply delay ${APPLY_DELAY_MS} ms)`);
    expect(fresh).toBeGreaterThanOrEqual(APPLY_DELAY_MS - 200);

    // The replica has the writer's last write now: its reads go there.
    const caughtUp = await tenantTransactions(replicaAdmin);
    const own = await call(nodes[0], 'GET', writer, `/v1/memory/facts?type=${type}`);
    expect(ids(own)).toEqual([id]);
    expect(await tenantTransactions(replicaAdmin)).toBe(caughtUp + 1);
  });

  it('reads answer from the primary while the replica is stopped, readiness says degraded, and the replica is taken back once it answers', async () => {
    const type = 'acme.outage';
    await replica.stop();
    try {
      for (let i = 0; i < 10; i++) {
        const base = nodes[i % 2]!;
        const { id } = await write(base, type, `during outage ${i}`);
        for (const token of [writer, reader]) {
          const list = await call(base, 'GET', token, `/v1/memory/facts?type=${type}&limit=100`);
          expect(list.status, JSON.stringify(list.body)).toBe(200);
          expect(ids(list)).toContain(id);
          const search = await call(nodes[(i + 1) % 2]!, 'POST', token, '/v1/memory/retrieve', { mode: 'keyword', query: 'outage' });
          expect(search.status, JSON.stringify(search.body)).toBe(200);
        }
      }
      for (const base of nodes) {
        const ready = await fetch(`${base}/readyz`);
        expect([ready.status, await ready.json()]).toEqual([200, { status: 'ready', checks: { postgres: 'ok', redis: 'ok', replica: 'degraded' } }]);
      }
    } finally {
      await replica.start();
    }
    for (const base of nodes) {
      await eventually(
        async () => ((await (await fetch(`${base}/readyz`)).json()) as { checks: Record<string, string> }).checks.replica === 'ok',
        15_000,
        () => `${base} never took the replica back`,
        100,
      );
    }
    await eventually(
      async () => {
        const before = await tenantTransactions(replicaAdmin);
        await call(nodes[0], 'GET', reader, `/v1/memory/facts?type=${type}`);
        await call(nodes[1], 'GET', reader, `/v1/memory/facts?type=${type}`);
        return (await tenantTransactions(replicaAdmin)) - before === 2;
      },
      10_000,
      () => 'reads did not go back to the replica',
      100,
    );
  });

  it('costs one primary query and one Redis call per write, and one Redis call per read (plus a replica query while it is behind)', async () => {
    const logger = createLogger('error');
    const prefix = `rr-cost-${randomBytes(4).toString('hex')}`;
    const primary: Database = connect(database.appUrl, { applicationName: 'rr-cost' });
    const replicaDb: Database = connect(replica.through(database.appUrl), { applicationName: 'rr-cost-read' });
    const redisUrl = inject('redisUrl');
    const positions = redisWritePositions(redisUrl, prefix, logger);
    const redis = createRedis(redisUrl, 'producer');
    const reads = await openReplicaReads({ primary, replica: replicaDb, positions, logger });
    const caller = (sub: string): Principal => ({ tenantId: tenant, sub, role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });
    const served = (db: Db) => Promise.resolve(db === replicaDb.db ? 'replica' : 'primary');
    const rounds = 300;
    const figures: Record<string, number[]> = {};
    const time = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
      const started = performance.now();
      const result = await work();
      (figures[name] ??= []).push(performance.now() - started);
      return result;
    };
    try {
      await primary.sql`select 1`;
      await replicaDb.sql`select 1`;
      for (let i = 0; i < rounds; i++) {
        await time('primary select 1 (a round trip)', () => primary.sql`select 1`);
        await time('Redis PING (a round trip)', () => redis.ping());
        // A commit (txid_current() takes a transaction id), as the caller's write would make.
        await primaryAdmin`select txid_current()`;
        await time('after a write: WAL end + Redis', () => reads.wrote(caller('bench-writer')));
        // The replica applies commits 2 s late: a read right after one's write goes to the primary.
        expect(await time('read, own write not replayed: Redis + replica check', () => reads.read(caller('bench-writer'), served))).toBe('primary');
        expect(await time('read, caller with no write: Redis', () => reads.read(caller(`bench-reader-${i}`), served))).toBe('replica');
      }
      // Once the replica has replayed a caller's last write, its reads go there: one check, then the node knows.
      await primaryAdmin`select pg_switch_wal()`;
      await sleep(APPLY_DELAY_MS + 500);
      for (let i = 0; i < rounds; i++) {
        expect(await time('read, own write replayed: Redis', () => reads.read(caller('bench-writer'), served))).toBe('replica');
      }
    } finally {
      reads.close();
      await deleteKeysUnder(redis, prefix).catch(() => {});
      await positions.close();
      await redis.quit();
      await primary.close();
      await replicaDb.close();
    }
    const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!;
    const lines = Object.entries(figures).map(
      ([name, values]) =>
        `  ${name.padEnd(56)} mean ${(values.reduce((a, b) => a + b, 0) / values.length).toFixed(3)} ms  p50 ${percentile(values, 0.5).toFixed(3)}  p99 ${percentile(values, 0.99).toFixed(3)}`,
    );
    console.log(`[read-replica] read-your-writes cost, ${rounds} each, loopback:\n${lines.join('\n')}`);
  });
});
