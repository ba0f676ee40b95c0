/**
 * Every route of the app's own `/openapi.json`, and the MCP endpoint, held to one security
 * contract (DESIGN §3, §4):
 * - without a token, and with each bad credential (test/helpers/credentials.ts), a 401
 *   `unauthenticated` in the error envelope that echoes nothing of the credential; with a valid
 *   token the same request is not refused, so the 401 is the credential's;
 * - a route with an id in its path answers tenant B's admin, for tenant A's resource, exactly what
 *   it answers for an id that exists nowhere: 404 (not 403, not 200), changing none of A's rows;
 *   tenant A's own admin gets anything but 404.
 * The routes come from the document at run time. What is kept by hand says only how tenant A makes
 * a resource of each kind and which body a route with an id takes; a route those cannot serve
 * fails the coverage test. test/e2e/security.test.ts goes deeper into the facts routes.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiResponse, type TestApi, startTestApi } from '../helpers/api.ts';
import { BAD_CREDENTIALS, type BadCredentialName, badCredentials, type Credential, expectUnauthenticated, headersOf } from '../helpers/credentials.ts';
import { minimal, type OpenApiDocument, type PlannedOperation, planOperations } from '../helpers/id-inputs.ts';
import { tenantTablesIn } from '../helpers/tenant-tables.ts';

/** Reads the id of what a request made, which must have answered `status`. */
async function made(request: Promise<ApiResponse>, status: number): Promise<string> {
  const response = await request;
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  return response.body.id as string;
}

/** How tenant A makes a resource of each kind (the path segment before `{id}`), by its admin. */
const CREATE: Record<string, (api: TestApi, token: string) => Promise<string>> = {
  facts: (api, token) => made(api.request('POST', '/v1/memory/facts', { token, body: { type: 'sec.route', content: { text: 'of tenant A' } } }), 201),
  reports: (api, token) => made(api.request('POST', '/v1/memory/reports', { token, body: {} }), 202),
  erasures: (api, token) =>
    made(api.request('POST', '/v1/memory/erasures', { token, body: { subject: { kind: 'participant', id: `someone-${randomUUID()}` } } }), 202),
};

/** The body each route with an id in its path is sent, when it takes one. */
const BODIES: Record<string, unknown> = {
  'POST /v1/memory/facts/{id}/supersede': { content: { text: 'superseded by the caller' } },
  'POST /v1/memory/facts/{id}/verify': {},
};

/** The MCP endpoint, which planOperations leaves out (JSON-RPC): a client's first request. */
const MCP = {
  key: 'POST /mcp',
  method: 'POST',
  path: '/mcp',
  body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
  headers: { accept: 'application/json, text/event-stream' },
};

interface Target {
  key: string;
  method: string;
  path: string;
  body: unknown;
  headers: Record<string, string>;
}

const kindsInPath = (op: PlannedOperation) => op.inputs.filter((input) => input.in === 'path').map((input) => ({ name: input.path[0]!, kind: 'resource' in input.role ? input.role.resource : input.role.label }));
const withIds = (path: string, ids: Record<string, string>) => path.replace(/\{([^}]+)\}/g, (_, name: string) => ids[name] ?? randomUUID());

describe('every route: 401 without a valid token, 404 for another tenant\'s ids', () => {
  let api: TestApi;
  let doc: OpenApiDocument;
  let operations: PlannedOperation[];
  let tenantA: string;
  let adminA: string;
  let adminB: string;
  let credentials: Map<BadCredentialName, Credential>;

  /** A request of the route on an id that exists nowhere, with a body it accepts where one is known. */
  const targetOf = (op: PlannedOperation): Target => ({
    key: op.key,
    method: op.method,
    path: withIds(op.path, {}),
    body: op.key in BODIES ? BODIES[op.key] : op.body ? minimal(doc, op.body.schema) : undefined,
    headers: {},
  });
  const targets = (): Target[] => [...operations.map(targetOf), MCP];
  const send = (target: Target, headers: Record<string, string>) =>
    api.request(target.method, target.path, { body: target.body, headers: { ...target.headers, ...headers } });

  /** Tenant A's rows in every tenant table, plus its tenants row, as the owner reads them. */
  async function rowsOfA(): Promise<Record<string, string[]>> {
    const rows: Record<string, string[]> = {};
    for (const table of [...(await tenantTablesIn(api.db.admin)), 'tenants']) {
      const column = table === 'tenants' ? 'id' : 'tenant_id';
      const found = await api.db.admin.unsafe<{ row: string }[]>(`select row_to_json(t)::text as row from "${table}" t where ${column} = $1 order by 1`, [tenantA]);
      rows[table] = found.map((r) => r.row);
    }
    return rows;
  }

  beforeAll(async () => {
    api = await startTestApi();
    ({ tenantId: tenantA, admin: adminA } = await api.newTenant('route-a'));
    ({ admin: adminB } = await api.newTenant('route-b'));
    const document = await api.request('GET', '/openapi.json');
    expect(document.status).toBe(200);
    doc = document.body as OpenApiDocument;
    operations = planOperations(doc);
    credentials = await badCredentials(tenantA);
  });
  afterAll(() => api?.close());

  it('serves every route of the document: each declares bearer auth, and each id in a path is of a kind this test can make', () => {
    // The document was read: the routes every release has are in it.
    expect(operations.map((op) => op.key)).toEqual(expect.arrayContaining(['POST /v1/memory/facts', 'GET /v1/memory/facts/{id}']));
    const problems: string[] = [];
    for (const op of operations) {
      const security = (doc.paths[op.path]![op.method.toLowerCase()] as { security?: unknown }).security;
      if (JSON.stringify(security) !== JSON.stringify([{ bearer: [] }])) problems.push(`${op.key}: security ${JSON.stringify(security)}, not bearer`);
      for (const { name, kind } of kindsInPath(op)) {
        if (!(kind in CREATE)) problems.push(`${op.key}: {${name}} is an id of kind "${kind}", and CREATE cannot make one`);
      }
      if (op.pathParams.length > 0 && op.body && !(op.key in BODIES)) problems.push(`${op.key}: takes a body, and BODIES has none for it`);
    }
    for (const key of Object.keys(BODIES)) if (!operations.some((op) => op.key === key)) problems.push(`BODIES names ${key}, which the document does not have`);
    const kinds = new Set(operations.flatMap((op) => kindsInPath(op).map(({ kind }) => kind)));
    for (const kind of Object.keys(CREATE)) if (!kinds.has(kind)) problems.push(`CREATE makes "${kind}", which no route takes in its path`);
    expect(problems).toEqual([]);
  });

  it('answers a valid token on every route with something other than 401 or an unknown route', async () => {
    for (const target of targets()) {
      const response = await send(target, { authorization: `Bearer ${adminB}` });
      const what = `${target.key}: ${response.status} ${JSON.stringify(response.body)}`;
      expect(response.status, what).not.toBe(401);
      expect(response.status, what).toBeLessThan(500);
      expect(String(response.body?.error?.message ?? ''), what).not.toMatch(/^No route for/);
    }
  });

  it.each(BAD_CREDENTIALS)('refuses %s on every route with 401 unauthenticated, echoing nothing', async (name) => {
    const credential = credentials.get(name)!;
    for (const target of targets()) {
      const response = await send(target, headersOf(credential));
      expectUnauthenticated(response, credential, target.key);
      if (target === MCP) {
        expect(response.headers.get('www-authenticate'), target.key).toBe(
          credential.authorization === undefined ? 'Bearer realm="mnemo"' : 'Bearer realm="mnemo", error="invalid_token"',
        );
      }
    }
  });

  it("answers tenant B's admin 404 for tenant A's ids on every route with an id, as for ids that exist nowhere; A's admin is served", async () => {
    const withId = operations.filter((op) => op.pathParams.length > 0);
    expect(withId.map((op) => op.key)).toContain('GET /v1/memory/facts/{id}');
    for (const op of withId) {
      // A resource of its own per route: A's request may change or delete it.
      const ids: Record<string, string> = {};
      for (const { name, kind } of kindsInPath(op)) ids[name] = await CREATE[kind]!(api, adminA);
      const body = BODIES[op.key];
      const before = await rowsOfA();

      const nowhere = await api.request(op.method, withIds(op.path, {}), { token: adminB, body });
      const ofB = await api.request(op.method, withIds(op.path, ids), { token: adminB, body });
      const what = `${op.key} as B: ${ofB.status} ${JSON.stringify(ofB.body)}`;
      expect(nowhere.status, `${op.key} on an id that exists nowhere: ${JSON.stringify(nowhere.body)}`).toBe(404);
      expect(ofB.status, what).toBe(404);
      expect(ofB.body, what).toEqual({ error: { code: nowhere.body.error.code, message: expect.any(String), requestId: expect.any(String) } });
      expect(JSON.stringify(ofB.body), what).not.toContain(tenantA);
      expect(await rowsOfA(), `${op.key}: rows of A changed by B's request`).toEqual(before);

      const ofA = await api.request(op.method, withIds(op.path, ids), { token: adminA, body });
      expect(ofA.status, `${op.key} as A: ${ofA.status} ${JSON.stringify(ofA.body)}`).not.toBe(404);
      expect(ofA.status, `${op.key} as A: ${JSON.stringify(ofA.body)}`).toBeLessThan(500);
    }
  });
});
