/**
 * The API and a worker through PgBouncer 1.18 in transaction mode (DESIGN §8), as processes, over a
 * private PostgreSQL with pgvector: every route's kind of work (writes, batch, idempotent replay,
 * supersede with expectVersion, keyword and semantic retrieval, context, the coverage report and a
 * background one, erasure) answers as it does without the pooler, with MNEMO_DB_PREPARED_STATEMENTS=
 * false. With prepared statements on (the default), the same API does not: a statement prepared on
 * one server connection is used again on another, and the requests never answer. So the setting is
 * what makes it work, and the migrations, which run on DATABASE_ADMIN_URL straight to PostgreSQL,
 * are not part of it.
 */
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddingText } from '../../src/embeddings/provider.ts';
import { type FakeEmbeddings, startFakeEmbeddings } from '../../support/fake-embeddings.ts';
import { type ClusterDatabase, type PostgresCluster, startPostgresCluster } from '../../support/postgres-cluster.ts';
import { tokenFor } from '../helpers/api.ts';
import { startDeployment } from '../helpers/deployment.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { TEST_APP_PASSWORD, TEST_APP_ROLE } from '../../support/urls.ts';
import { eventually } from '../../support/wait.ts';
import { type PgBouncer, startPgBouncer } from './helpers/pgbouncer.ts';

/** What the server logs when a client binds a statement prepared on another server connection. */
const PREPARED_MISSING = /ERROR: +prepared statement "[^"]+" does not exist/;

/** Fewer server connections than the API's pool (10) and the worker's: transactions must share them. */
const POOL_SIZE = 3;

describe('PgBouncer in transaction mode in front of PostgreSQL', () => {
  let cluster: PostgresCluster;
  let database: ClusterDatabase;
  let bouncer: PgBouncer;
  let fake: FakeEmbeddings;
  let admin: Sql;

  beforeAll(async () => {
    [cluster, fake] = await Promise.all([startPostgresCluster(), startFakeEmbeddings({ dims: 16 })]);
    // Migrations run as the owner straight to PostgreSQL, never through the pooler.
    database = await cluster.createDatabase();
    bouncer = await startPgBouncer({ serverPort: cluster.port, users: [{ name: TEST_APP_ROLE, password: TEST_APP_PASSWORD }], poolSize: POOL_SIZE });
    admin = postgres(database.adminUrl, { max: 1, onnotice: () => {} });
    // The server's log keeps each error on one short line (no statement text), for what a test reads in it.
    await admin`alter system set log_min_error_statement = 'panic'`;
    await admin`select pg_reload_conf()`;
  });

  afterAll(async () => {
    await admin?.end({ timeout: 5 });
    await bouncer?.stop();
    await fake?.close();
    await cluster?.remove();
  });

  const deploy = (env: Record<string, string>) =>
    startDeployment({ db: { appUrl: bouncer.through(database.appUrl) }, embeddings: { url: fake.url, model: fake.model }, env });

  /** The app role's connections the server holds: PgBouncer's, at most its pool. */
  const appServerConnections = async () =>
    Number((await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where usename = ${TEST_APP_ROLE}`)[0]!.n);

  it('serves writes, supersedes, searches, reports and erasure with prepared statements off', async () => {
    const deployment = await deploy({ MNEMO_DB_PREPARED_STATEMENTS: 'false' });
    try {
      const worker = await deployment.startWorker();
      expect(worker.child.pid).toBeDefined();
      const tenant = uniqueTenant('bouncer');
      const token = await tokenFor({ tid: tenant, sub: 'ops', role: 'admin' });
      const before = await bouncer.show('stats');
      const transactions = (rows: Record<string, unknown>[]) =>
        Number(rows.find((row) => row.database === database.name)?.total_xact_count ?? 0);

      // More writes at once than PgBouncer has server connections.
      const written = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          deployment.post(token, '/v1/memory/facts', { type: 'acme.note', content: { text: `washing machine part ${i} ordered` } }),
        ),
      );
      for (const response of written) expect(response.status, JSON.stringify(response.body)).toBe(201);
      const batch = await deployment.post(token, '/v1/memory/facts:batch', {
        facts: [0, 1, 2].map((i) => ({ type: 'acme.note', content: { text: `dishwasher hose ${i}` } })),
      });
      expect(batch.status, JSON.stringify(batch.body)).toBe(201);

      // An idempotent write takes a transaction-scoped advisory lock; its replay reads the stored answer.
      const keyed = async () => {
        const response = await fetch(`${deployment.apiUrl}/v1/memory/facts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': 'bouncer-1' },
          body: JSON.stringify({ type: 'acme.note', content: { text: 'kettle descaled' } }),
        });
        return { status: response.status, replayed: response.headers.get('idempotent-replayed'), body: (await response.json()) as { id: string } };
      };
      const first = await keyed();
      const again = await keyed();
      expect([first.status, again.status, again.replayed, again.body.id]).toEqual([201, 201, 'true', first.body.id]);

      const target = written[0]!.body as { id: string };
      const superseded = await deployment.post(token, `/v1/memory/facts/${target.id}/supersede`, { content: { text: 'tumble dryer belt ordered' }, expectVersion: 1 });
      expect(superseded.status, JSON.stringify(superseded.body)).toBe(200);
      expect(superseded.body.version).toBe(2);
      const stale = await deployment.post(token, `/v1/memory/facts/${target.id}/supersede`, { content: { text: 'late' }, expectVersion: 1 });
      expect([stale.status, stale.body.error.code, stale.body.error.currentVersion]).toEqual([409, 'fact-changed', 2]);

      const read = await deployment.get(token, `/v1/memory/facts/${target.id}`);
      expect([read.status, read.body.content]).toEqual([200, { text: 'tumble dryer belt ordered' }]);
      const list = await deployment.get(token, '/v1/memory/facts?limit=100');
      expect([list.status, list.body.data.length]).toEqual([200, 28]);

      const keyword = await deployment.post(token, '/v1/memory/retrieve', { mode: 'keyword', query: 'dryer belt' });
      expect(keyword.status, JSON.stringify(keyword.body)).toBe(200);
      expect(keyword.body.results[0].fact.id).toBe(target.id);

      // The worker embeds through PgBouncer too. The fake's vectors match equal texts only: the query
      // is the text the fact was embedded from.
      const query = embeddingText('acme.note', { text: 'tumble dryer belt ordered' });
      const semantic = await eventually(
        async () => {
          const response = await deployment.post(token, '/v1/memory/retrieve', { mode: 'semantic', query, limit: 1 });
          return response.status === 200 && response.body.results[0]?.fact.id === target.id ? response : undefined;
        },
        30_000,
        async () => `semantic search never found the superseded fact; worker: ${worker.stdout().slice(-1500)}`,
        200,
      );
      expect(semantic.body.results[0].score).toBeCloseTo(1, 5);

      const context = await deployment.post(token, '/v1/memory/context', { query: 'dryer', mode: 'both' });
      expect(context.status, JSON.stringify(context.body)).toBe(200);
      expect(context.body.factIds).toContain(target.id);

      const episode = await deployment.post(token, '/v1/memory/facts', { type: 'acme.run', content: { text: 'run 1' }, memoryKind: 'episodic', episodeId: 'run-1' });
      expect(episode.status).toBe(201);
      const report = await deployment.get(token, '/v1/memory/report');
      expect([report.status, report.body.episodic_count]).toEqual([200, 1]);
      const kiwi = await deployment.get(token, '/api/kiwi/memory/report');
      expect(kiwi.body).toEqual(report.body);
      const queued = await deployment.post(token, '/v1/memory/reports', {});
      expect(queued.status).toBe(202);
      const stored = await eventually(
        async () => {
          const response = await deployment.get(token, `/v1/memory/reports/${queued.body.id}`);
          return response.body.status === 'completed' || response.body.status === 'failed' ? response.body : undefined;
        },
        30_000,
        () => 'the background report never finished',
        200,
      );
      expect(stored).toMatchObject({ status: 'completed', result: report.body });

      const person = await deployment.post(token, '/v1/memory/facts', {
        type: 'acme.note',
        content: { text: 'end-7 prefers morning calls' },
        scope: { projectId: 'p1', participantId: 'end-7' },
      });
      expect(person.status).toBe(201);
      const erasure = await deployment.post(token, '/v1/memory/erasures', { subject: { kind: 'participant', id: 'end-7' } });
      expect(erasure.status, JSON.stringify(erasure.body)).toBe(202);
      const erased = await eventually(
        async () => {
          const response = await deployment.get(token, `/v1/memory/erasures/${erasure.body.id}`);
          return response.body.status === 'completed' || response.body.status === 'failed' ? response.body : undefined;
        },
        30_000,
        () => 'the erasure never finished',
        200,
      );
      expect(erased).toMatchObject({ status: 'completed', factsErased: 1 });
      expect((await deployment.get(token, `/v1/memory/facts/${person.body.id}`)).status).toBe(404);
      const [row] = await admin<{ content: unknown; reason: string }[]>`
        select content, invalidation_reason as reason from facts where tenant_id = ${tenant} and id = ${person.body.id}`;
      expect(row).toEqual({ content: null, reason: 'erased' });

      // It all went through PgBouncer, whose few server connections the API's and worker's pools shared.
      // At least one transaction per request made above (24 writes, a batch, reads, searches,
      // reports, the erasure: ~40), besides the worker's jobs.
      await eventually(
        async () => transactions(await bouncer.show('stats')) - transactions(before) >= 40,
        5000,
        async () => `PgBouncer counted ${transactions(await bouncer.show('stats')) - transactions(before)} transactions`,
      );
      expect(await appServerConnections()).toBeLessThanOrEqual(POOL_SIZE);
      expect((await deployment.get(token, '/readyz')).status).toBe(200);
      expect(cluster.log()).not.toMatch(PREPARED_MISSING);
    } finally {
      await deployment.close();
    }
  });

  it('does not work with prepared statements on: a statement prepared on one server connection is used on another', async () => {
    const deployment = await deploy({});
    try {
      const token = await tokenFor({ tid: uniqueTenant('bouncer-prepared'), sub: 'ops', role: 'admin' });
      // Each request gets 5 s (without the pooler each takes milliseconds).
      const attempt = async (path: string, body: unknown) => {
        try {
          const response = await fetch(`${deployment.apiUrl}${path}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
            signal: AbortSignal.timeout(5000),
          });
          return response.status;
        } catch {
          return 'no answer';
        }
      };
      const outcomes = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          i % 2 === 0
            ? attempt('/v1/memory/facts', { type: 'acme.note', content: { text: `note ${i}` } })
            : attempt('/v1/memory/retrieve', { mode: 'keyword', query: `note ${i}` }),
        ),
      );
      const failed = outcomes.filter((outcome) => outcome !== 200 && outcome !== 201);
      expect(failed.length, JSON.stringify(outcomes)).toBeGreaterThan(0);
      // Why: the server was asked for a statement prepared on another of its connections.
      expect(cluster.log()).toMatch(PREPARED_MISSING);
    } finally {
      await deployment.close();
    }
  });
});
