/**
 * The who-sees-what table of DESIGN §3, as a matrix over the real API: every scope kind ×
 * every kind of principal, on read (current, ?version=1, ?asOf, revisions), list (current and
 * asOf, unfiltered and filtered by project), write, supersede, verify and delete.
 *
 * The expectations are written out below by hand from the contract; nothing here asks
 * src/auth/permissions.ts what the answer should be.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiResponse, type TestApi, startTestApi, tokenFor, type TokenClaims } from '../helpers/api.ts';
import { sleep } from '../../support/wait.ts';

// ---------------------------------------------------------------------------------------------
// The scopes: one fact of each kind is seeded by the tenant's admin.

const scopes = {
  tenant: {},
  org: { orgId: 'o1' },
  project: { projectId: 'p1' },
  'project+participant': { projectId: 'p1', participantId: 'end-7' },
  'project+thread': { projectId: 'p1', threadId: 'th-1' },
  'project+session': { projectId: 'p1', sessionId: 'se-1' },
  user: { userId: 'u-9' },
  'user+project': { userId: 'u-9', projectId: 'p1' },
} as const satisfies Record<string, Record<string, string>>;
type ScopeName = keyof typeof scopes;
const scopeNames = Object.keys(scopes) as ScopeName[];

// ---------------------------------------------------------------------------------------------
// The principals (claims without the tenant, which each tenant below fills in).

const principals = {
  admin: { sub: 'admin-1', role: 'admin' },
  'member-none': { sub: 'm-none', role: 'member' },
  'member-projects.read-p1': { sub: 'm-pr', role: 'member', projects: { read: ['p1'] } },
  'member-projects.write-p1': { sub: 'm-pw', role: 'member', projects: { write: ['p1'] } },
  'member-orgs.read-o1': { sub: 'm-or', role: 'member', orgs: { read: ['o1'] } },
  'member-orgs.write-o1': { sub: 'm-ow', role: 'member', orgs: { write: ['o1'] } },
  'member-sub-u-9': { sub: 'u-9', role: 'member' },
  'service-projects.write-p1': { sub: 'svc-pw', role: 'service', projects: { write: ['p1'] } },
  'service-none': { sub: 'svc-none', role: 'service' },
  'member-other-ids': {
    sub: 'u-2',
    role: 'member',
    projects: { read: ['p2'], write: ['p2'] },
    orgs: { read: ['o2'], write: ['o2'] },
  },
} satisfies Record<string, Omit<TokenClaims, 'tid'>>;
type PrincipalName = keyof typeof principals;
const principalNames = Object.keys(principals) as PrincipalName[];

// ---------------------------------------------------------------------------------------------
// The table, written out from DESIGN §3: 'W' reads and writes, 'R' reads only, '-' neither.

type Access = 'W' | 'R' | '-';
const row = (...cells: [Access, Access, Access, Access, Access, Access, Access, Access]) =>
  Object.fromEntries(scopeNames.map((name, i) => [name, cells[i]!])) as Record<ScopeName, Access>;

// prettier-ignore
const access: Record<PrincipalName, Record<ScopeName, Access>> = {
  //                                 tenant org  project p+particip. p+thread p+session user user+project
  'admin':                     row('W',   'W', 'W',    'W',        'W',     'W',      'W', 'W'),
  'member-none':               row('R',   '-', '-',    '-',        '-',     '-',      '-', '-'),
  'member-projects.read-p1':   row('R',   '-', 'R',    '-',        '-',     '-',      '-', '-'),
  'member-projects.write-p1':  row('R',   '-', 'W',    'W',        'W',     'W',      '-', '-'),
  'member-orgs.read-o1':       row('R',   'R', '-',    '-',        '-',     '-',      '-', '-'),
  'member-orgs.write-o1':      row('R',   'W', '-',    '-',        '-',     '-',      '-', '-'),
  'member-sub-u-9':            row('R',   '-', '-',    '-',        '-',     '-',      'W', 'W'),
  'service-projects.write-p1': row('R',   '-', 'W',    'W',        'W',     'W',      '-', '-'),
  'service-none':              row('R',   '-', '-',    '-',        '-',     '-',      '-', '-'),
  'member-other-ids':          row('R',   '-', '-',    '-',        '-',     '-',      '-', '-'),
};

/** What each access level answers, route by route (verify for role service: see below). */
const outcome = {
  W: { read: 200, listed: true, write: 201, supersede: 200, verify: 200, delete: 200 },
  R: { read: 200, listed: true, write: 403, supersede: 403, verify: 403, delete: 403 },
  '-': { read: 404, listed: false, write: 403, supersede: 404, verify: 404, delete: 404 },
} as const;
/** Role service never verifies: 403 where it can see the fact, 404 where it cannot. */
const serviceVerify = { W: 403, R: 403, '-': 404 } as const;

const errorCodeOf = { 200: undefined, 201: undefined, 403: 'permission-denied', 404: 'fact-not-found' } as const;

const cells = principalNames.flatMap((who) => scopeNames.map((where) => ({ who, where, access: access[who][where] })));

// ---------------------------------------------------------------------------------------------

describe('permissions matrix over the API', () => {
  let api: TestApi;
  /** Holds only the eight seeded facts: for the read and list matrix. */
  let readTenant: string;
  /** Where writes and per-cell facts go, so the read tenant's list stays exactly eight facts. */
  let writeTenant: string;
  const tokens = { read: {} as Record<PrincipalName, string>, write: {} as Record<PrincipalName, string> };
  const seeded = {} as Record<ScopeName, { id: string; version: number; content: unknown }>;
  let seededAt: string;

  const token = (tenant: 'read' | 'write', who: PrincipalName) => tokens[tenant][who];

  async function seed(tenant: 'read' | 'write', where: ScopeName, text: string) {
    const response = await api.request('POST', '/v1/memory/facts', {
      token: token(tenant, 'admin'),
      body: { type: 'matrix.seed', content: { text }, scope: scopes[where] },
    });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return response.body as { id: string; version: number; content: unknown; scope: Record<string, string> };
  }

  /** Checks status and, for an error, its envelope code. */
  function expectStatus(response: ApiResponse, status: 200 | 201 | 403 | 404, label: string) {
    expect(response.status, `${label}: ${JSON.stringify(response.body)}`).toBe(status);
    const code = errorCodeOf[status];
    if (code) expect(response.body.error, label).toMatchObject({ code, requestId: expect.any(String) });
  }

  beforeAll(async () => {
    api = await startTestApi();
    readTenant = (await api.newTenant('matrix-read')).tenantId;
    writeTenant = (await api.newTenant('matrix-write')).tenantId;
    for (const who of principalNames) {
      tokens.read[who] = await tokenFor({ tid: readTenant, ...principals[who] });
      tokens.write[who] = await tokenFor({ tid: writeTenant, ...principals[who] });
    }
    for (const where of scopeNames) {
      const fact = await seed('read', where, `seeded ${where}`);
      expect(fact.scope).toEqual({ tenantId: readTenant, ...scopes[where] });
      seeded[where] = { id: fact.id, version: fact.version, content: fact.content };
    }
    // A moment strictly after every seed, for asOf reads and lists.
    await sleep(20);
    seededAt = new Date().toISOString();
  });
  afterAll(() => api?.close());

  it('the table has a cell for every scope kind × principal', () => {
    expect(cells).toHaveLength(8 * 10);
    for (const who of principalNames) expect(Object.keys(access[who]).sort()).toEqual([...scopeNames].sort());
  });

  describe.each(principalNames)('%s', (who) => {
    it.each(scopeNames)('reads the %s fact by id, ?version=1, ?asOf and /revisions as the table says', async (where) => {
      const expected = outcome[access[who][where]].read;
      const { id } = seeded[where];
      const t = token('read', who);
      const current = await api.request('GET', `/v1/memory/facts/${id}`, { token: t });
      expectStatus(current, expected, 'current');
      const first = await api.request('GET', `/v1/memory/facts/${id}?version=1`, { token: t });
      expectStatus(first, expected, '?version=1');
      const asOf = await api.request('GET', `/v1/memory/facts/${id}?asOf=${encodeURIComponent(seededAt)}`, { token: t });
      expectStatus(asOf, expected, '?asOf');
      const revisions = await api.request('GET', `/v1/memory/facts/${id}/revisions`, { token: t });
      expectStatus(revisions, expected, '/revisions');
      if (expected === 200) {
        for (const response of [current, first, asOf]) {
          expect(response.body).toMatchObject({ id, version: 1, scope: { tenantId: readTenant, ...scopes[where] } });
        }
        expect(revisions.body.data.map((f: { version: number }) => f.version)).toEqual([1]);
      } else {
        // A 404 says nothing of the fact beyond its absence.
        expect(JSON.stringify(current.body)).not.toContain(`seeded ${where}`);
      }
    });

    it.each(scopeNames)('lists the %s fact (current and asOf) only when it may read it', async (where) => {
      const listed = outcome[access[who][where]].listed;
      const { id } = seeded[where];
      for (const path of ['/v1/memory/facts?limit=100', `/v1/memory/facts?limit=100&asOf=${encodeURIComponent(seededAt)}`]) {
        const response = await api.request('GET', path, { token: token('read', who) });
        expect(response.status, path).toBe(200);
        expect(response.body.hasMore, path).toBe(false);
        const ids = response.body.data.map((f: { id: string }) => f.id);
        if (listed) expect(ids, path).toContain(id);
        else expect(ids, path).not.toContain(id);
      }
    });

    it('lists exactly the facts it may read, and no more through scope filters', async () => {
      const visible = scopeNames.filter((where) => access[who][where] !== '-');
      const idsOf = (response: ApiResponse) => (response.body.data as { id: string }[]).map((f) => f.id).sort();
      const all = await api.request('GET', '/v1/memory/facts?limit=100', { token: token('read', who) });
      expect(idsOf(all)).toEqual(visible.map((where) => seeded[where].id).sort());

      // Filtering by a scope key narrows what is visible; it never widens it.
      for (const [key, value] of [
        ['projectId', 'p1'],
        ['orgId', 'o1'],
        ['userId', 'u-9'],
        ['participantId', 'end-7'],
        ['threadId', 'th-1'],
        ['sessionId', 'se-1'],
      ] as const) {
        const filtered = await api.request('GET', `/v1/memory/facts?limit=100&${key}=${value}`, { token: token('read', who) });
        expect(filtered.status).toBe(200);
        const expected = visible.filter((where) => (scopes[where] as Record<string, string>)[key] === value);
        expect(idsOf(filtered), `${key}=${value}`).toEqual(expected.map((where) => seeded[where].id).sort());
      }
    });

    it.each(scopeNames)('writes a new fact in the %s scope only when it may write there', async (where) => {
      const expected = outcome[access[who][where]].write;
      const type = `matrix.write.${who}.${where}`.replace(/\+/g, '-');
      const response = await api.request('POST', '/v1/memory/facts', {
        token: token('write', who),
        body: { type, content: { text: `written by ${who}` }, scope: scopes[where] },
      });
      expectStatus(response, expected, 'write');
      if (expected === 201) {
        expect(response.body).toMatchObject({
          version: 1,
          type,
          scope: { tenantId: writeTenant, ...scopes[where] },
          assertedBy: { kind: principals[who].role === 'service' ? 'service' : 'user', id: principals[who].sub },
        });
      }
      // The admin sees exactly what was written: one fact on 201, none on 403.
      const check = await api.request('GET', `/v1/memory/facts?type=${type}`, { token: token('write', 'admin') });
      expect(check.body.data).toHaveLength(expected === 201 ? 1 : 0);
    });

    it.each(scopeNames)('supersedes the %s fact: 200 if writable, 403 if only readable, 404 if invisible', async (where) => {
      const expected = outcome[access[who][where]].supersede;
      const fact = await seed('write', where, `supersede ${who} ${where}`);
      const response = await api.request('POST', `/v1/memory/facts/${fact.id}/supersede`, {
        token: token('write', who),
        body: { content: { text: `superseded by ${who}` } },
      });
      expectStatus(response, expected, 'supersede');
      const after = await api.request('GET', `/v1/memory/facts/${fact.id}`, { token: token('write', 'admin') });
      const revisions = await api.request('GET', `/v1/memory/facts/${fact.id}/revisions`, { token: token('write', 'admin') });
      if (expected === 200) {
        expect(response.body).toMatchObject({ id: fact.id, version: 2, scope: fact.scope, content: { text: `superseded by ${who}` } });
        expect(after.body).toMatchObject({ version: 2, content: { text: `superseded by ${who}` } });
        expect(revisions.body.data).toHaveLength(2);
      } else {
        expect(after.body).toMatchObject({ version: 1, content: fact.content });
        expect(revisions.body.data).toHaveLength(1);
      }
    });

    it.each(scopeNames)('verifies the %s fact as the table says (role service never verifies)', async (where) => {
      const level = access[who][where];
      const expected = principals[who].role === 'service' ? serviceVerify[level] : outcome[level].verify;
      const fact = await seed('write', where, `verify ${who} ${where}`);
      const response = await api.request('POST', `/v1/memory/facts/${fact.id}/verify`, {
        token: token('write', who),
        body: { expectVersion: 1 },
      });
      expectStatus(response, expected, 'verify');
      const after = await api.request('GET', `/v1/memory/facts/${fact.id}`, { token: token('write', 'admin') });
      if (expected === 200) {
        expect(response.body).toMatchObject({ id: fact.id, version: 2, trust: 'verified', verifiedBy: { kind: 'user', id: principals[who].sub } });
        expect(after.body).toMatchObject({ version: 2, trust: 'verified' });
      } else {
        expect(after.body).toMatchObject({ version: 1, trust: 'asserted', verifiedBy: null, content: fact.content });
      }
    });

    it.each(scopeNames)('deletes the %s fact: 200 if writable, 403 if only readable, 404 if invisible', async (where) => {
      const expected = outcome[access[who][where]].delete;
      const fact = await seed('write', where, `delete ${who} ${where}`);
      const response = await api.request('DELETE', `/v1/memory/facts/${fact.id}`, { token: token('write', who) });
      expectStatus(response, expected, 'delete');
      const after = await api.request('GET', `/v1/memory/facts/${fact.id}`, { token: token('write', 'admin') });
      if (expected === 200) {
        expect(response.body).toMatchObject({ id: fact.id, version: 2, invalidationReason: 'deleted' });
        expectStatus(after, 404, 'read after delete');
      } else {
        expect(after.status).toBe(200);
        expect(after.body).toMatchObject({ version: 1, content: fact.content, invalidatedAt: null });
      }
    });

    it("refuses a scope naming another tenant: 403 scope-mismatch, nothing written", async () => {
      for (const scope of [{ tenantId: 'some-other-tenant' }, { tenantId: 'some-other-tenant', projectId: 'p1' }, { tenantId: readTenant }]) {
        const type = `matrix.mismatch.${who}`;
        const response = await api.request('POST', '/v1/memory/facts', {
          token: token('write', who),
          body: { type, content: { text: 'elsewhere' }, scope },
        });
        expect(response.status, `${JSON.stringify(scope)}: ${JSON.stringify(response.body)}`).toBe(403);
        expect(response.body.error.code).toBe('scope-mismatch');
        const check = await api.request('GET', `/v1/memory/facts?type=${type}`, { token: token('write', 'admin') });
        expect(check.body.data).toEqual([]);
      }
    });

    it('accepts its own tenant named in scope.tenantId, with the same rule as when it is left out', async () => {
      const expected = outcome[access[who].tenant].write;
      const response = await api.request('POST', '/v1/memory/facts', {
        token: token('write', who),
        body: { type: `matrix.own-tenant.${who}`, content: { text: 'own' }, scope: { tenantId: writeTenant } },
      });
      expectStatus(response, expected, 'own tenantId');
      if (expected === 201) expect(response.body.scope).toEqual({ tenantId: writeTenant });
    });

    it.each([
      ['participantId alone', { participantId: 'end-7' }],
      ['threadId alone', { threadId: 'th-1' }],
      ['sessionId alone', { sessionId: 'se-1' }],
      ['orgId + participantId', { orgId: 'o1', participantId: 'end-7' }],
      ['orgId + threadId + sessionId', { orgId: 'o1', threadId: 'th-1', sessionId: 'se-1' }],
    ])('refuses %s (no project or user to own it): 400 bad-input', async (_, scope) => {
      const type = `matrix.bad-input.${who}`;
      const response = await api.request('POST', '/v1/memory/facts', {
        token: token('write', who),
        body: { type, content: { text: 'orphan' }, scope },
      });
      expect(response.status, JSON.stringify(response.body)).toBe(400);
      expect(response.body.error.code).toBe('bad-input');
      const check = await api.request('GET', `/v1/memory/facts?type=${type}`, { token: token('write', 'admin') });
      expect(check.body.data).toEqual([]);
    });
  });

  it("nothing in the read tenant changed while the matrix ran (still version 1, original content)", async () => {
    for (const where of scopeNames) {
      const response = await api.request('GET', `/v1/memory/facts/${seeded[where].id}`, { token: token('read', 'admin') });
      expect(response.body, where).toMatchObject({ version: 1, content: seeded[where].content });
    }
  });
});
