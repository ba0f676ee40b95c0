/**
 * Fault suite row: another tenant's ids on every route → 404; zero rows read or changed.
 *
 * Real processes: the API (`src/server.ts`) and the worker (`workers/index.ts`) as operators run
 * them, over a database of this file's own, the machine's Redis under a prefix of its own, and
 * the local embedding model behind its OpenAI-compatible endpoint. Tenant A (the victim) holds
 * facts of every kind (scoped, superseded, verified, deleted, erased, under legal hold, episodic
 * and consolidated), embeddings, idempotency records, completed and failed erasures, background
 * reports and a nightly schedule. B attacks with admin, member and service tokens (the same
 * `sub`s as A's people, grants on the same project and org names); B is one tenant per role, so
 * that each role meets A's Idempotency-Keys for the first time in its own tenant.
 *
 * What is sent is derived at run time from `/openapi.json` and MCP `tools/list`
 * (test/helpers/id-inputs.ts): every resource id (a UUID) in a path, query or body gets
 * each of A's ids of its kind, and every label (`…Id`, `cursor`) gets A's values. The tables
 * below only say how to build each route's body; a route or input they cannot serve fails the
 * coverage test. What must hold:
 * - an id of A answers exactly what an id that exists nowhere answers: 404 `fact-not-found` /
 *   `not-found` for B's admin, 403 (role, before any lookup) or 404 for B's member and service;
 * - no answer to B, whatever it sent, holds anything of A's it did not send itself (A's ids,
 *   content, tenant id);
 * - A's rows in every tenant table (found from the catalog, not listed) and A's nightly
 *   scheduler in Redis are byte for byte the same afterwards, also after the worker has run
 *   everything B's requests queued.
 */
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalEmbeddingsServer, startLocalEmbeddingsServer } from '../../src/embeddings/local-server.ts';
import { nightlySchedulerId } from '../../src/jobs/report-jobs.ts';
import { queueDefinitions, reportQueue } from '../../src/jobs/queues.ts';
import { tokenFor } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type Deployment, startDeployment } from '../helpers/deployment.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { tenantTablesIn } from '../helpers/tenant-tables.ts';
import { eventually, sleep } from '../../support/wait.ts';
import {
  type IdInput,
  inject as injectInto,
  type JsonSchema,
  type OpenApiDocument,
  type PlannedOperation,
  planOperations,
  problemsOf,
} from '../helpers/id-inputs.ts';

/** An hour far from now, so no nightly report fires while the test runs. */
const FAR_HOUR = (new Date().getUTCHours() + 12) % 24;
/** Words of A's facts: B's searches use them, so a search across tenants would find A's. */
const WORDS = 'washing machine spare parts quarterly tax filing';

/**
 * How to build each route's body (every body the route is tried with). The one table the test
 * keeps by hand; a route with a body that is not here fails the coverage test.
 */
const BODIES: Record<string, () => unknown[]> = {
  'POST /v1/memory/facts': () => [{ type: 'b.note', content: { text: 'B writes about spare parts' }, scope: { projectId: 'p-shared' } }],
  'POST /v1/memory/facts:batch': () => [
    { facts: [{ type: 'b.note', content: { text: 'B writes in bulk about spare parts' }, scope: { projectId: 'p-shared' } }, { type: 'b.note', content: { text: 'and the tax filing' } }] },
  ],
  'POST /v1/memory/facts/{id}/supersede': () => [{ content: { text: 'B overwrites' } }, { content: { text: 'B overwrites' }, expectVersion: 1 }],
  'POST /v1/memory/facts/{id}/verify': () => [{}, { expectVersion: 2 }],
  'POST /v1/memory/retrieve': () => [
    ...['both', 'keyword', 'semantic'].map((mode) => ({ mode, query: WORDS, limit: 100 })),
    { mode: 'list', limit: 100 },
  ],
  'POST /v1/memory/context': () => [{ query: WORDS, limit: 100 }, { query: WORDS, mode: 'keyword', instructionTypes: ['a.policy'] }],
  'POST /v1/memory/reports': () => [{}, { episodesPrefix: 'episodes/', limit: 100 }],
  'PUT /v1/memory/reports/schedule': () => [{ hourUtc: FAR_HOUR }],
  'POST /v1/memory/erasures': () => [{}],
};

/** Query strings a route is also tried with (history reads, expected versions, page sizes). */
const QUERIES: Record<string, () => string[]> = {
  'GET /v1/memory/facts/{id}': () => ['', 'version=1', `asOf=${encodeURIComponent(new Date().toISOString())}`],
  'DELETE /v1/memory/facts/{id}': () => ['', 'expectVersion=1'],
  'GET /v1/memory/facts': () => ['limit=100', 'limit=100&trust=verified'],
  'GET /v1/memory/report': () => ['limit=1000', 'episodesPrefix=episodes%2F&limit=1000'],
  'GET /api/kiwi/memory/report': () => ['limit=1000'],
  'GET /v1/memory/reports': () => ['limit=100'],
  'GET /v1/memory/erasures': () => ['limit=100'],
};

/** What a query label needs beside it to be a valid filter. */
const COMPANIONS: Record<string, string> = { subjectId: 'subjectKind=participant' };

/** Arguments of each MCP tool (the same rule: a tool not here fails the coverage test). */
const MCP_ARGS: Record<string, () => Record<string, unknown>[]> = {
  kiwi_memory_report: () => [{}, { episodes_prefix: 'episodes/', limit: 1000 }],
  // B remembers and recalls in A's words: its own tenant's memory, never A's.
  kindgi_remember: () => [
    { type: 'note', text: 'The washing machine needs spare parts' },
    { type: 'preference', key: 'tax-filing', text: 'The quarterly tax filing is due in April' },
  ],
  memory_retrieve: () => [
    { query: 'washing machine spare parts' },
    { query: 'tax filing', mode: 'keyword', limit: 100 },
    { query: 'anything', mode: 'list', limit: 100 },
  ],
};

interface Request {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

interface Answer {
  status: number;
  text: string;
  json: any;
  headers: Headers;
}

interface Victim {
  tenantId: string;
  /** Server-issued ids by kind: what resource inputs get. */
  ids: Record<string, string[]>;
  /** Client-chosen ids and cursors by label key: what label inputs get. */
  labels: Record<string, string[]>;
  /** Idempotency-Key values A used, by route key, with the id it used each on. */
  keys: Record<string, { key: string; id?: string }>;
  /** Strings no answer to B may hold unless B sent them: A's ids, content markers, tenant id. */
  secrets: string[];
}

describe("another tenant's ids on every route (from /openapi.json)", () => {
  let db: TestDatabase;
  let embeddings: LocalEmbeddingsServer;
  let deployment: Deployment;
  let doc: OpenApiDocument;
  let tools: { name: string; inputSchema: JsonSchema }[];
  let operations: PlannedOperation[];
  const victim: Victim = { tenantId: uniqueTenant('iso-a'), ids: {}, labels: {}, keys: {}, secrets: [] };
  /**
   * The attackers: one tenant per role, so that each meets A's Idempotency-Keys for the first
   * time in its own tenant (a key one role used is, rightly, "reused" for another in the same one).
   */
  const attackerTenants = { admin: uniqueTenant('iso-b'), member: uniqueTenant('iso-c'), service: uniqueTenant('iso-d') };

  async function send(token: string, request: Request): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...request.headers };
    if (request.body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(`${deployment.apiUrl}${request.path}`, {
      method: request.method,
      headers,
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: response.status, text, json, headers: response.headers };
  }

  /** A's own requests during setup: each must succeed. */
  async function asVictim(token: string, method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<any> {
    const answer = await send(token, { method, path, body, headers });
    if (answer.status >= 300) throw new Error(`${method} ${path} → ${answer.status} ${answer.text}`);
    return answer.json;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    embeddings = await startLocalEmbeddingsServer({ port: 0 });
    deployment = await startDeployment({
      db,
      embeddings: { url: embeddings.url, model: embeddings.model },
      env: { MNEMO_RECONCILE_EVERY_MS: '1000' },
    });
    await deployment.startWorker();

    doc = (await (await fetch(`${deployment.apiUrl}/openapi.json`)).json()) as OpenApiDocument;
    operations = planOperations(doc);
    await seedVictim();
    tools = await mcpTools(await tokenFor({ tid: attackerTenants.admin, sub: 'admin-1', role: 'admin' }));
  }, 180_000);

  afterAll(async () => {
    await deployment?.close();
    await embeddings?.close();
    await db?.drop();
  });

  // -------------------------------------------------------------------------------------------
  // Tenant A

  async function seedVictim(): Promise<void> {
    const v = victim;
    const admin = await tokenFor({ tid: v.tenantId, sub: 'admin-1', role: 'admin' });
    const label = (name: string) => `a-${name}-${randomUUID().slice(0, 8)}`;
    const L = {
      org: label('org'),
      user: label('user'),
      participant: label('participant'),
      held: label('held'),
      thread: label('thread'),
      thread2: label('thread2'),
      session: label('session'),
      episode: label('episode'),
    };
    const facts: string[] = [];
    const marker = () => {
      const m = `amark-${randomUUID()}`;
      v.secrets.push(m);
      return m;
    };
    const write = async (body: Record<string, unknown>, headers?: Record<string, string>) => {
      const fact = await asVictim(admin, 'POST', '/v1/memory/facts', { type: 'a.note', ...body }, headers);
      facts.push(fact.id);
      return fact.id as string;
    };
    const text = (words: string) => ({ text: `${words} ${marker()}` });

    v.keys['POST /v1/memory/facts'] = { key: label('key-write') };
    await write({ content: text('The washing machine needs spare parts') }, { 'idempotency-key': v.keys['POST /v1/memory/facts'].key });
    await write({ content: text('The quarterly tax filing is due in April'), scope: { projectId: 'p-shared' } });
    v.keys['POST /v1/memory/facts:batch'] = { key: label('key-batch') };
    const batch = await asVictim(admin, 'POST', '/v1/memory/facts:batch', { facts: [{ type: 'a.note', content: text('Bulk note on the washing machine') }] }, {
      'idempotency-key': v.keys['POST /v1/memory/facts:batch'].key,
    });
    facts.push(...(batch.data as { id: string }[]).map((fact) => fact.id));
    await write({ content: text('Ordered spare parts for the washing machine'), scope: { projectId: 'p-shared', participantId: L.participant, threadId: L.thread, sessionId: L.session }, subjects: [{ kind: 'participant', id: L.participant }] });
    await write({ content: text('Private note on the tax filing'), scope: { userId: L.user } });
    await write({ content: text('Org policy on spare parts'), scope: { orgId: 'o-shared' } });
    await write({ content: text('Another org on the washing machine'), scope: { orgId: L.org } });
    await write({ type: 'a.policy', content: text('Always quote the tax filing deadline') });

    const superseded = await write({ content: text('Version one of the washing machine') });
    v.keys['POST /v1/memory/facts/{id}/supersede'] = { key: label('key-supersede'), id: superseded };
    await asVictim(admin, 'POST', `/v1/memory/facts/${superseded}/supersede`, { content: text('Version two of the washing machine'), expectVersion: 1 }, { 'idempotency-key': v.keys['POST /v1/memory/facts/{id}/supersede'].key });
    const verified = await write({ content: text('A person checked the spare parts order') });
    v.keys['POST /v1/memory/facts/{id}/verify'] = { key: label('key-verify'), id: verified };
    await asVictim(admin, 'POST', `/v1/memory/facts/${verified}/verify`, {}, { 'idempotency-key': v.keys['POST /v1/memory/facts/{id}/verify'].key });
    const deleted = await write({ content: text('Deleted washing machine note') });
    await asVictim(admin, 'DELETE', `/v1/memory/facts/${deleted}`);

    await write({ content: text('Raw episode about spare parts'), memoryKind: 'episodic', path: `episodes/${L.episode}.md`, episodeId: L.episode });
    await write({ content: text('Raw uncovered episode on tax filing'), path: `episodes/${label('uncovered')}.md` });
    await write({ content: text('Consolidated: spare parts arrive Monday'), memoryKind: 'consolidation', mergedFrom: [{ type: 'episode', id: L.episode }] });

    // Erasures: one completed by fact, one completed by conversation, one failed on a legal hold.
    const erasedFact = await write({ content: text('To be erased: washing machine') });
    await write({ content: text('Conversation to be erased: tax filing'), scope: { projectId: 'p-shared', participantId: L.participant, threadId: L.thread2 } });
    await write({ content: text('Held for a lawsuit: spare parts'), scope: { projectId: 'p-shared', participantId: L.held }, retention: { legalHold: true } });
    v.keys['POST /v1/memory/erasures'] = { key: label('key-erasure'), id: erasedFact };
    const erasures = [
      (await asVictim(admin, 'POST', '/v1/memory/erasures', { factId: erasedFact }, { 'idempotency-key': v.keys['POST /v1/memory/erasures'].key })).id as string,
      (await asVictim(admin, 'POST', '/v1/memory/erasures', { conversationId: L.thread2 })).id as string,
      (await asVictim(admin, 'POST', '/v1/memory/erasures', { subject: { kind: 'participant', id: L.held } })).id as string,
    ];
    v.keys['POST /v1/memory/reports'] = { key: label('key-report') };
    const reports = [
      (await asVictim(admin, 'POST', '/v1/memory/reports', {}, { 'idempotency-key': v.keys['POST /v1/memory/reports'].key })).id as string,
      (await asVictim(admin, 'POST', '/v1/memory/reports', { episodesPrefix: 'episodes/', scope: { projectId: 'p-shared' } })).id as string,
    ];
    await asVictim(admin, 'PUT', '/v1/memory/reports/schedule', { hourUtc: FAR_HOUR });

    for (const id of erasures) {
      await eventually(
        async () => ['completed', 'failed'].includes((await asVictim(admin, 'GET', `/v1/memory/erasures/${id}`)).status),
        60_000,
        async () => `erasure ${id}: ${JSON.stringify(await asVictim(admin, 'GET', `/v1/memory/erasures/${id}`))}`,
        200,
      );
    }
    const erasureStatuses = () => Promise.all(erasures.map(async (id) => (await asVictim(admin, 'GET', `/v1/memory/erasures/${id}`)).status));
    expect(await erasureStatuses(), 'A has completed erasures and one failed on a legal hold (resumable)').toEqual(['completed', 'completed', 'failed']);
    // Resumed under a key while the hold stays: it fails again, and A has used a key on resume too.
    v.keys['POST /v1/memory/erasures/{id}/resume'] = { key: label('key-resume'), id: erasures[2]! };
    await asVictim(admin, 'POST', `/v1/memory/erasures/${erasures[2]}/resume`, undefined, { 'idempotency-key': v.keys['POST /v1/memory/erasures/{id}/resume'].key });
    await eventually(async () => (await erasureStatuses())[2] === 'failed', 60_000, async () => `resumed erasure: ${JSON.stringify(await erasureStatuses())}`, 200);
    for (const id of reports) {
      await eventually(async () => (await asVictim(admin, 'GET', `/v1/memory/reports/${id}`)).status === 'completed', 60_000, () => `report ${id}`, 200);
    }

    // Cursors of A's lists (one item per page, so each has a next page).
    const cursors: string[] = [];
    for (const path of ['/v1/memory/facts?limit=1', '/v1/memory/reports?limit=1', '/v1/memory/erasures?limit=1']) {
      const page = await asVictim(admin, 'GET', path);
      expect(page.nextCursor, path).toEqual(expect.any(String));
      cursors.push(page.nextCursor);
    }

    v.ids = { facts, reports, erasures };
    v.labels = {
      tenantId: [v.tenantId],
      orgId: ['o-shared', L.org],
      projectId: ['p-shared'],
      userId: [L.user],
      participantId: [L.participant, L.held],
      threadId: [L.thread, L.thread2],
      sessionId: [L.session],
      episodeId: [L.episode],
      subjectId: [L.participant],
      'subjects.id': [L.participant],
      'mergedFrom.id': [L.episode],
      'subject.id': [L.participant, L.held],
      conversationId: [L.thread, L.thread2],
      cursor: cursors,
    };
    v.secrets.push(v.tenantId, ...facts, ...reports, ...erasures);
    await quiet([v.tenantId]);
  }

  // -------------------------------------------------------------------------------------------
  // Observing A: rows, Redis, and when the background has nothing left to do

  /** A's rows in every table with a tenant_id, plus its tenants row. */
  async function snapshot(tenantId: string): Promise<Record<string, string[]>> {
    const rows: Record<string, string[]> = {};
    for (const name of await tenantTablesIn(db.admin)) {
      const found = await db.admin.unsafe<{ row: string }[]>(`select row_to_json(t)::text as row from "${name}" t where tenant_id = $1 order by 1`, [tenantId]);
      rows[name] = found.map((r) => r.row);
    }
    rows.tenants = (await db.admin<{ row: string }[]>`select row_to_json(t)::text as row from tenants t where id = ${tenantId}`).map((r) => r.row);
    return rows;
  }

  async function nightlyScheduler(tenantId: string): Promise<string> {
    const queue = new Queue(reportQueue.name, { connection: deployment.connection, prefix: deployment.prefix });
    try {
      return JSON.stringify((await queue.getJobScheduler(nightlySchedulerId(tenantId))) ?? null);
    } finally {
      await queue.close();
    }
  }

  /** Nothing left to do for these tenants: outbox, erasures, reports, vectors, queued jobs. */
  async function quiet(tenants: string[]): Promise<void> {
    const queues = queueDefinitions.map(({ name }) => new Queue(name, { connection: deployment.connection, prefix: deployment.prefix }));
    const state = async () => {
      const [row] = await db.admin<Record<string, number>[]>`
        select
          (select count(*) from outbox where tenant_id in ${db.admin(tenants)} and done_at is null and failed_at is null)::int as outbox,
          (select count(*) from erasures where tenant_id in ${db.admin(tenants)} and status in ('pending', 'running'))::int as erasures,
          (select count(*) from coverage_reports where tenant_id in ${db.admin(tenants)} and status in ('pending', 'running'))::int as reports,
          (select count(*) from facts f where tenant_id in ${db.admin(tenants)} and invalidated_at is null
             and not exists (select 1 from fact_embeddings e where e.tenant_id = f.tenant_id and e.fact_id = f.id and e.version = f.version))::int as unembedded`;
      let jobs = 0;
      for (const queue of queues) {
        const counts = await queue.getJobCounts('waiting', 'active', 'prioritized');
        jobs += (counts.waiting ?? 0) + (counts.active ?? 0) + (counts.prioritized ?? 0);
      }
      return { ...row, jobs };
    };
    try {
      await eventually(async () => Object.values(await state()).every((n) => n === 0), 90_000, async () => JSON.stringify(await state()), 200);
    } finally {
      await Promise.all(queues.map((q) => q.close()));
    }
  }

  // -------------------------------------------------------------------------------------------
  // MCP

  async function mcp(token: string, method: string, params: unknown): Promise<Answer> {
    return send(token, {
      method: 'POST',
      path: '/mcp',
      body: { jsonrpc: '2.0', id: 1, method, params },
      headers: { accept: 'application/json, text/event-stream' },
    });
  }

  async function mcpTools(token: string): Promise<{ name: string; inputSchema: JsonSchema }[]> {
    const answer = await mcp(token, 'tools/list', {});
    expect(answer.status, answer.text).toBe(200);
    return answer.json.result.tools;
  }

  /** MCP tools as operations, so the same planner reads their inputs. */
  const toolOperations = () =>
    tools.map((tool): PlannedOperation => {
      const [planned] = planOperations(
        { paths: { [`/mcp#${tool.name}`]: { post: { requestBody: { required: true, content: { 'application/json': { schema: tool.inputSchema } } } } } } },
        () => true,
      );
      return { ...planned!, key: `MCP ${tool.name}` };
    });

  // -------------------------------------------------------------------------------------------
  // The tests

  it('covers every route and input of /openapi.json and every MCP tool', () => {
    const coverage = {
      resourceKinds: new Set(Object.keys(victim.ids)),
      labelKeys: new Set(Object.keys(victim.labels)),
      bodies: new Set([...Object.keys(BODIES), ...Object.keys(MCP_ARGS).map((name) => `MCP ${name}`)]),
    };
    expect(problemsOf([...operations, ...toolOperations()], coverage)).toEqual([]);
    // The tables name nothing the document does not have (a renamed route is not silently skipped).
    const keys = new Set(operations.map((op) => op.key));
    for (const key of [...Object.keys(BODIES), ...Object.keys(QUERIES)]) expect(keys.has(key), key).toBe(true);
    for (const name of Object.keys(MCP_ARGS)) expect(tools.map((t) => t.name)).toContain(name);

    // The planner finds ids in paths, queries and bodies; a new route with an id it has no ids
    // for, or a body it cannot build, is a problem — so this test fails until it is covered.
    const withIds = operations.filter((op) => op.inputs.some((i) => 'resource' in i.role)).map((op) => op.key);
    expect(withIds).toEqual(expect.arrayContaining(['GET /v1/memory/facts/{id}', 'POST /v1/memory/erasures', 'GET /v1/memory/reports/{id}']));
    const extended: OpenApiDocument = {
      ...doc,
      paths: {
        ...doc.paths,
        '/v1/memory/widgets/{id}': { get: { parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } }] } },
        '/v1/memory/links': { post: { requestBody: { content: { 'application/json': { schema: { type: 'object', properties: { reportId: { type: 'string', format: 'uuid' } } } } } } } },
      },
    };
    expect(problemsOf(planOperations(extended), coverage)).toEqual([
      'GET /v1/memory/widgets/{id} path id: an id of kind "widgets" and the victim tenant has none of that kind',
      'POST /v1/memory/links: takes a body and the test has no way to build one',
    ]);
  });

  it("answers other tenants' admin, member and service tokens as if A's ids did not exist, and changes nothing of A's", async () => {
    const before = await snapshot(victim.tenantId);
    const schedulerBefore = await nightlyScheduler(victim.tenantId);
    expect(JSON.parse(schedulerBefore), "A's nightly scheduler is in Redis").not.toBeNull();
    // A is at rest by itself: the same a moment later, before B sends anything.
    await sleep(1500);
    expect(await snapshot(victim.tenantId)).toEqual(before);

    const grants = { projects: { read: ['p-shared'], write: ['p-shared'] }, orgs: { read: ['o-shared'], write: ['o-shared'] } };
    const attackers = {
      admin: { tenantId: attackerTenants.admin, token: await tokenFor({ tid: attackerTenants.admin, sub: 'admin-1', role: 'admin', ...grants }) },
      member: { tenantId: attackerTenants.member, token: await tokenFor({ tid: attackerTenants.member, sub: 'admin-1', role: 'member', ...grants }) },
      service: { tenantId: attackerTenants.service, token: await tokenFor({ tid: attackerTenants.service, sub: 'svc-1', role: 'service', ...grants }) },
    };
    const failures: string[] = [];
    const figures = { routes: new Set<string>(), requests: 0, notFound: 0, other: 0, labelRequests: 0, statuses: new Map<number, number>(), labelStatuses: new Map<number, number>() };
    const describeRequest = (role: string, r: Request) => `${role} ${r.method} ${r.path}${r.body === undefined ? '' : ` ${JSON.stringify(r.body)}`}${r.headers?.['idempotency-key'] ? ` key=${r.headers['idempotency-key']}` : ''}`;

    /** Every secret of A the answer holds that the request did not carry. */
    const leaks = (request: Request, answer: Answer) => {
      const sent = `${request.path} ${JSON.stringify(request.body ?? null)} ${JSON.stringify(request.headers ?? {})}`;
      return victim.secrets.filter((secret) => answer.text.includes(secret) && !sent.includes(secret));
    };
    /** The answer with the id that was asked for, and the request id, taken out. */
    const shape = (answer: Answer, id: string) => {
      const error = answer.json?.error;
      return error
        ? `${answer.status} ${error.code} ${String(error.message).replaceAll(id, '<id>')}`
        : `${answer.status} ${answer.text.replaceAll(id, '<id>').slice(0, 300)}`;
    };

    const variantsOf = (op: PlannedOperation) => {
      const bodies: (unknown | undefined)[] = op.body ? (BODIES[op.key]?.() ?? []) : [undefined];
      const queries = QUERIES[op.key]?.() ?? [''];
      return bodies.flatMap((body) => queries.map((query) => ({ body, query })));
    };

    const build = (op: PlannedOperation, variant: { body: unknown; query: string }, input: IdInput | undefined, value: string | undefined): Request => {
      let path = op.path;
      for (const name of op.pathParams) {
        const kind = op.inputs.find((i) => i.in === 'path' && i.path[0] === name)!.role;
        const fill = input?.in === 'path' && input.path[0] === name ? value! : victim.ids['resource' in kind ? kind.resource : '']?.[0] ?? randomUUID();
        path = path.replace(`{${name}}`, encodeURIComponent(fill));
      }
      const query = [variant.query];
      if (input?.in === 'query') {
        query.push(`${encodeURIComponent(input.path[0]!)}=${encodeURIComponent(value!)}`);
        const companion = 'label' in input.role ? COMPANIONS[input.role.label] : undefined;
        if (companion) query.push(companion);
      }
      const search = query.filter(Boolean).join('&');
      const body = input?.in === 'body' ? injectInto(doc, op.body!.schema, variant.body ?? {}, input.path, value) : variant.body;
      return { method: op.method, path: `${path}${search ? `?${search}` : ''}`, ...(body === undefined ? {} : { body }) };
    };

    // 1. Resource ids: each of A's ids of the input's kind, against an id that exists nowhere.
    const tally = (op: PlannedOperation, answer: Answer) => {
      figures.routes.add(op.key);
      figures.requests++;
      figures.statuses.set(answer.status, (figures.statuses.get(answer.status) ?? 0) + 1);
      if (answer.status === 404) figures.notFound++;
      else figures.other++;
    };
    const judge = (role: string, request: Request, answer: Answer, id: string, baseline: Answer, unknownId: string) => {
      const what = describeRequest(role, request);
      const code = answer.json?.error?.code;
      if (role === 'admin' && !(answer.status === 404 && ['fact-not-found', 'not-found'].includes(code))) {
        failures.push(`${what} → ${answer.status} ${answer.text.slice(0, 300)} (expected 404)`);
      } else if (answer.status !== 404 && answer.status !== 403) {
        failures.push(`${what} → ${answer.status} ${answer.text.slice(0, 300)} (expected 403 or 404)`);
      }
      if (shape(answer, id) !== shape(baseline, unknownId)) {
        failures.push(`${what} → ${shape(answer, id)}, but an id that exists nowhere → ${shape(baseline, unknownId)}`);
      }
      if (answer.headers.get('idempotent-replayed')) failures.push(`${what} → replayed a stored answer`);
      const leaked = leaks(request, answer);
      if (leaked.length > 0) failures.push(`${what} → holds A's ${leaked.join(', ')}`);
    };
    for (const [role, { token }] of Object.entries(attackers)) {
      for (const op of operations) {
        let keyTried = false;
        for (const input of op.inputs) {
          if (!('resource' in input.role)) continue;
          const ids = victim.ids[input.role.resource] ?? [];
          for (const variant of variantsOf(op)) {
            const unknownId = randomUUID();
            const baseline = await send(token, build(op, variant, input, unknownId));
            for (const id of ids) {
              const request = build(op, variant, input, id);
              const answer = await send(token, request);
              tally(op, answer);
              judge(role, request, answer, id, baseline, unknownId);
            }
            // The Idempotency-Key A used on this route, on the id A used it with, the first time
            // this tenant sends it: answered as with a key never used, never with A's stored answer.
            const used = victim.keys[op.key];
            if (op.idempotent && used && !keyTried) {
              keyTried = true;
              const id = used.id ?? ids[0]!;
              const keyedBaseline = await send(token, { ...build(op, variant, input, unknownId), headers: { 'idempotency-key': `fresh-${randomUUID()}` } });
              const request = { ...build(op, variant, input, id), headers: { 'idempotency-key': used.key } };
              const answer = await send(token, request);
              tally(op, answer);
              judge(role, request, answer, id, keyedBaseline, unknownId);
            }
          }
        }
      }
    }

    // 2. Labels and plain requests: A's client-chosen ids, cursors and words find nothing of A's.
    const check = (role: string, request: Request, answer: Answer, input?: IdInput) => {
      figures.labelRequests++;
      figures.labelStatuses.set(answer.status, (figures.labelStatuses.get(answer.status) ?? 0) + 1);
      const what = describeRequest(role, request);
      if (answer.status >= 500) failures.push(`${what} → ${answer.status} ${answer.text.slice(0, 300)}`);
      if (answer.headers.get('idempotent-replayed')) failures.push(`${what} → replayed a stored answer`);
      if (input && 'label' in input.role && input.role.label === 'tenantId' && answer.status < 300) {
        failures.push(`${what} → ${answer.status}: naming A's tenant must be refused`);
      }
      const leaked = leaks(request, answer);
      if (leaked.length > 0) failures.push(`${what} → holds A's ${leaked.join(', ')}`);
    };
    for (const [role, { token }] of Object.entries(attackers)) {
      for (const op of operations) {
        if (op.pathParams.length > 0) continue; // already tried with A's ids above
        const variants = variantsOf(op);
        for (const variant of variants) {
          const request = build(op, variant, undefined, undefined);
          check(role, request, await send(token, request));
          // Once per route: B sending the key again with another variant's body is B's own reuse (422).
          if (op.idempotent && variant === variants[0]) {
            // A's key on B's request: B's own answer (not A's, not 422 for a key B never used).
            const keyed = { ...request, headers: { 'idempotency-key': victim.keys[op.key]!.key } };
            const answer = await send(token, keyed);
            check(role, keyed, answer);
            if (answer.status === 422) failures.push(`${describeRequest(role, keyed)} → 422: A's key must not be visible to B`);
          }
        }
        for (const input of op.inputs) {
          if (!('label' in input.role)) continue;
          for (const value of victim.labels[input.role.label] ?? []) {
            const request = build(op, variants[0]!, input, value);
            check(role, request, await send(token, request), input);
          }
        }
      }
      for (const tool of toolOperations()) {
        const name = tool.key.replace(/^MCP /, '');
        const argsList = MCP_ARGS[name]?.() ?? [];
        const call = async (args: unknown, input?: IdInput) => {
          const request: Request = { method: 'POST', path: '/mcp', body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } } };
          const answer = await mcp(token, 'tools/call', { name, arguments: args });
          check(role, request, answer, input);
        };
        for (const args of argsList) await call(args);
        for (const input of tool.inputs) {
          if ('resource' in input.role) {
            for (const id of victim.ids[input.role.resource] ?? []) await call(injectInto(doc, tool.body!.schema, argsList[0] ?? {}, input.path, id), input);
          } else {
            for (const value of victim.labels[input.role.label] ?? []) await call(injectInto(doc, tool.body!.schema, argsList[0] ?? {}, input.path, value), input);
          }
        }
      }
    }

    // 3. After the worker has run everything B's requests queued (erasures, reports, vectors).
    await quiet([victim.tenantId, ...Object.values(attackerTenants)]);
    const after = await snapshot(victim.tenantId);
    const changed = Object.keys({ ...before, ...after }).filter((table) => JSON.stringify(before[table]) !== JSON.stringify(after[table]));
    const schedulerAfter = await nightlyScheduler(victim.tenantId);
    const rowsChanged = changed.reduce((n, table) => {
      const a = new Set(before[table] ?? []);
      const b = new Set(after[table] ?? []);
      return n + [...a].filter((r) => !b.has(r)).length + [...b].filter((r) => !a.has(r)).length;
    }, 0);

    const histogram = (m: Map<number, number>) => [...m].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`).join(' ');
    console.log(
      `[faults] cross-tenant ids: routes=${figures.routes.size}, requests=${figures.requests}, 404=${figures.notFound}, other=${figures.other}, ` +
        `rows changed=${rowsChanged} (other = 403 before any lookup, as for an id that exists nowhere: ${histogram(figures.statuses)}; ` +
        `plus ${figures.labelRequests} requests with A's labels, cursors and words: ${histogram(figures.labelStatuses)}; ` +
        `${Object.values(before).flat().length} rows of A compared)`,
    );

    expect(failures, failures.slice(0, 40).join('\n')).toEqual([]);
    expect(changed, 'tables where A has rows changed').toEqual([]);
    expect(after).toEqual(before);
    expect(schedulerAfter).toBe(schedulerBefore);
    expect(figures.routes.size).toBeGreaterThanOrEqual(9);
    expect(figures.notFound).toBeGreaterThan(0);
  });
});
