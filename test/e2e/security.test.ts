/**
 * The facts routes in depth (DESIGN §3, §4, §7): every way a bearer token can be wrong is a 401
 * `unauthenticated` that echoes nothing of the token, another tenant's fact ids answer 404
 * `fact-not-found`, Idempotency-Key replays do not cross tenants or permissions, and no refused
 * request changes anything. test/e2e/route-security.test.ts holds every route of /openapi.json
 * to the 401s and the cross-tenant 404.
 *
 * All the bad tokens (test/helpers/credentials.ts) carry the claims of tenant A's admin, so a
 * verifier that let any of them through would be allowed to change A's facts: "nothing changed"
 * is a real check.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiResponse, type TestApi, startTestApi, tokenFor } from '../helpers/api.ts';
import {
  adminClaims,
  BAD_CREDENTIALS,
  type BadCredentialName,
  badCredentials as badCredentialsOf,
  type Credential,
  expectUnauthenticated,
  headersOf,
  nowSeconds,
  signed,
} from '../helpers/credentials.ts';

const ATTEMPT_TYPE = 'sec.write-attempt';

// ---------------------------------------------------------------------------------------------
// The routes

interface Call {
  method: string;
  path: string;
  body?: unknown;
}

interface RouteCase {
  name: string;
  /** A valid request on fact `id` (ignored by write and list). */
  call(id: string): Call;
  /** Its status when the caller may do it. */
  ok: number;
  mutates: boolean;
}

const routes: RouteCase[] = [
  {
    name: 'POST /v1/memory/facts (write)',
    call: () => ({ method: 'POST', path: '/v1/memory/facts', body: { type: ATTEMPT_TYPE, content: { text: 'attempt' } } }),
    ok: 201,
    mutates: true,
  },
  { name: 'GET /v1/memory/facts (list)', call: () => ({ method: 'GET', path: '/v1/memory/facts?limit=100' }), ok: 200, mutates: false },
  { name: 'GET /v1/memory/facts/:id (read)', call: (id) => ({ method: 'GET', path: `/v1/memory/facts/${id}` }), ok: 200, mutates: false },
  {
    name: 'GET /v1/memory/facts/:id?version=1 (read a version)',
    call: (id) => ({ method: 'GET', path: `/v1/memory/facts/${id}?version=1` }),
    ok: 200,
    mutates: false,
  },
  {
    name: 'POST /v1/memory/facts/:id/supersede',
    call: (id) => ({ method: 'POST', path: `/v1/memory/facts/${id}/supersede`, body: { content: { text: 'superseded' } } }),
    ok: 200,
    mutates: true,
  },
  {
    name: 'POST /v1/memory/facts/:id/verify',
    call: (id) => ({ method: 'POST', path: `/v1/memory/facts/${id}/verify`, body: {} }),
    ok: 200,
    mutates: true,
  },
  { name: 'DELETE /v1/memory/facts/:id', call: (id) => ({ method: 'DELETE', path: `/v1/memory/facts/${id}` }), ok: 200, mutates: true },
  {
    name: 'GET /v1/memory/facts/:id/revisions',
    call: (id) => ({ method: 'GET', path: `/v1/memory/facts/${id}/revisions` }),
    ok: 200,
    mutates: false,
  },
];

// ---------------------------------------------------------------------------------------------

describe('security of every facts route', () => {
  let api: TestApi;
  let tenantA: string;
  let adminA: string;
  let tenantB: string;
  let adminB: string;
  /** Per route, a fact of tenant A that every refused request below aims at. */
  const targets = new Map<string, string>();
  /** The bad credentials, all naming tenant A's admin. */
  let badCredentials: Map<BadCredentialName, Credential>;

  const send = (route: RouteCase, id: string, credential: Credential | { token: string }): Promise<ApiResponse> => {
    const { method, path, body } = route.call(id);
    if ('token' in credential) return api.request(method, path, { token: credential.token, body });
    return api.request(method, path, { headers: headersOf(credential), body });
  };

  async function writeFactOfA(text: string): Promise<string> {
    const response = await api.request('POST', '/v1/memory/facts', {
      token: adminA,
      body: { type: 'sec.target', content: { text } },
    });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return response.body.id as string;
  }

  /** What A's admin sees of a fact and of tenant A: must be identical before and after a refusal. */
  async function snapshot(id: string) {
    const fact = await api.request('GET', `/v1/memory/facts/${id}`, { token: adminA });
    const revisions = await api.request('GET', `/v1/memory/facts/${id}/revisions`, { token: adminA });
    const attempts = await api.request('GET', `/v1/memory/facts?type=${ATTEMPT_TYPE}&limit=100`, { token: adminA });
    expect(fact.status).toBe(200);
    expect(revisions.status).toBe(200);
    expect(attempts.status).toBe(200);
    return {
      status: fact.status,
      version: fact.body.version as number,
      content: fact.body.content as unknown,
      trust: fact.body.trust as string,
      invalidatedAt: fact.body.invalidatedAt as string | null,
      recordedAt: fact.body.recordedAt as string,
      revisions: (revisions.body.data as unknown[]).length,
      attemptsWritten: (attempts.body.data as unknown[]).length,
    };
  }

  beforeAll(async () => {
    api = await startTestApi();
    ({ tenantId: tenantA, admin: adminA } = await api.newTenant('sec-a'));
    ({ tenantId: tenantB, admin: adminB } = await api.newTenant('sec-b'));
    for (const route of routes) targets.set(route.name, await writeFactOfA(`target of ${route.name}`));

    badCredentials = await badCredentialsOf(tenantA);
  });
  afterAll(() => api?.close());

  it('the bad tokens are what they claim to be (the oversized one is over 8 KiB, the rest are not)', () => {
    const sizes = Object.fromEntries(
      [...badCredentials].map(([name, c]) => [name, Buffer.byteLength((c.authorization ?? '').replace(/^Bearer /, ''))]),
    );
    expect(sizes['a token over 8 KiB']).toBeGreaterThan(8 * 1024);
    for (const [name, size] of Object.entries(sizes)) if (name !== 'a token over 8 KiB') expect(size, name).toBeLessThan(8 * 1024);
  });

  describe.each(routes)('$name', (route) => {
    it(`answers ${route.ok} to a valid admin token (the control)`, async () => {
      const id = await writeFactOfA(`control of ${route.name}`);
      const response = await send(route, id, { token: adminA });
      expect(response.status, JSON.stringify(response.body)).toBe(route.ok);
      expect(response.headers.get('x-request-id')).toBeTruthy();
      if (route.ok === 201) {
        // Clean up so the "no attempt was written" counts stay at zero.
        const del = await api.request('DELETE', `/v1/memory/facts/${response.body.id}`, { token: adminA });
        expect(del.status).toBe(200);
      }
    });

    it('accepts a token that expired 10 s ago (30 s clock tolerance)', async () => {
      const id = await writeFactOfA(`tolerance of ${route.name}`);
      const now = nowSeconds();
      const token = await signed(adminClaims(tenantA), { iat: now - 600, exp: now - 10 });
      const response = await send(route, id, { token });
      expect(response.status, JSON.stringify(response.body)).toBe(route.ok);
      if (route.ok === 201) {
        const del = await api.request('DELETE', `/v1/memory/facts/${response.body.id}`, { token: adminA });
        expect(del.status).toBe(200);
      }
    });

    it.each(BAD_CREDENTIALS)('refuses %s with 401 unauthenticated, echoing nothing, changing nothing', async (caseName) => {
      const credential = badCredentials.get(caseName);
      expect(credential, caseName).toBeDefined();
      const id = targets.get(route.name)!;
      const before = await snapshot(id);

      expectUnauthenticated(await send(route, id, credential!), credential!);

      expect(await snapshot(id)).toEqual(before);
    });

    if (route.name.startsWith('POST /v1/memory/facts (write)')) {
      it("refuses tenant B's admin writing into tenant A's scope: 403 scope-mismatch, nothing written", async () => {
        const id = targets.get(route.name)!;
        const before = await snapshot(id);
        const response = await api.request('POST', '/v1/memory/facts', {
          token: adminB,
          body: { type: ATTEMPT_TYPE, content: { text: 'cross-tenant' }, scope: { tenantId: tenantA } },
        });
        expect(response.status, JSON.stringify(response.body)).toBe(403);
        expect(response.body.error.code).toBe('scope-mismatch');
        expect(await snapshot(id)).toEqual(before);
        // And nothing landed in B either.
        const ofB = await api.request('GET', `/v1/memory/facts?type=${ATTEMPT_TYPE}`, { token: adminB });
        expect(ofB.body.data).toEqual([]);
      });
    } else if (route.name.startsWith('GET /v1/memory/facts (list)')) {
      it("does not show tenant A's facts to tenant B's admin (current and asOf)", async () => {
        const id = targets.get(route.name)!;
        const before = await snapshot(id);
        const ofA = await api.request('GET', '/v1/memory/facts?limit=100', { token: adminA });
        expect(ofA.body.data.map((f: { id: string }) => f.id)).toContain(id);

        for (const path of ['/v1/memory/facts?limit=100', `/v1/memory/facts?limit=100&asOf=${encodeURIComponent(new Date().toISOString())}`]) {
          const ofB = await api.request('GET', path, { token: adminB });
          expect(ofB.status, path).toBe(200);
          expect(ofB.body).toEqual({ data: [], hasMore: false, nextCursor: null });
        }
        expect(await snapshot(id)).toEqual(before);
      });
    } else {
      it(`answers tenant B's admin with 404 fact-not-found for tenant A's fact${route.mutates ? ', changing nothing' : ''}`, async () => {
        const id = targets.get(route.name)!;
        const before = await snapshot(id);
        const response = await send(route, id, { token: adminB });
        expect(response.status, JSON.stringify(response.body)).toBe(404);
        expect(response.body.error).toMatchObject({ code: 'fact-not-found', requestId: expect.any(String) });
        expect(await snapshot(id)).toEqual(before);
      });

      if (route.mutates) {
        it(`answers tenant B's admin with 404 for tenant A's fact also with expectVersion and an Idempotency-Key`, async () => {
          const id = targets.get(route.name)!;
          const before = await snapshot(id);
          const { method, path, body } = route.call(id);
          const withVersion =
            method === 'DELETE'
              ? { path: `${path}?expectVersion=${before.version}`, body }
              : { path, body: { ...(body as object), expectVersion: before.version } };
          const response = await api.request(method, withVersion.path, {
            token: adminB,
            body: withVersion.body,
            headers: method === 'POST' ? { 'idempotency-key': `cross-${route.name.length}-${id}` } : {},
          });
          expect(response.status, JSON.stringify(response.body)).toBe(404);
          expect(response.body.error.code).toBe('fact-not-found');
          expect(await snapshot(id)).toEqual(before);
        });
      }
    }
  });

  it("B's own facts stay B's: A's admin gets 404 on them and cannot list them", async () => {
    const written = await api.request('POST', '/v1/memory/facts', { token: adminB, body: { type: 'sec.b', content: { text: 'of B' } } });
    expect(written.status).toBe(201);
    const id = written.body.id as string;
    for (const route of routes.filter((r) => !r.name.includes('(write)') && !r.name.includes('(list)'))) {
      const response = await send(route, id, { token: adminA });
      expect(response.status, route.name).toBe(404);
      expect(response.body.error.code, route.name).toBe('fact-not-found');
    }
    const listed = await api.request('GET', '/v1/memory/facts?limit=100&type=sec.b', { token: adminA });
    expect(listed.body.data).toEqual([]);
    const mine = await api.request('GET', `/v1/memory/facts/${id}`, { token: adminB });
    expect(mine.status).toBe(200);
    expect(mine.body).toMatchObject({ id, version: 1, content: { text: 'of B' }, scope: { tenantId: tenantB } });
  });

  describe('Idempotency-Key replays do not bypass who-sees-what', () => {
    it.each([
      ['supersede', (id: string) => ({ path: `/v1/memory/facts/${id}/supersede`, body: { content: { text: 'v2 (private)' } } })],
      ['verify', (id: string) => ({ path: `/v1/memory/facts/${id}/verify`, body: {} })],
    ])("%s: tenant B's admin reusing A's key and body gets 404, not A's stored answer", async (_, call) => {
      const id = await writeFactOfA('idempotent cross-tenant');
      const { path, body } = call(id);
      const idempotencyKey = `replay-b-${id}`;
      const first = await api.request('POST', path, { token: adminA, body, headers: { 'idempotency-key': idempotencyKey } });
      expect(first.status).toBe(200);
      const before = await snapshot(id);

      const replay = await api.request('POST', path, { token: adminB, body, headers: { 'idempotency-key': idempotencyKey } });
      expect(replay.status, JSON.stringify(replay.body)).toBe(404);
      expect(replay.body.error.code).toBe('fact-not-found');
      expect(JSON.stringify(replay.body)).not.toContain(tenantA);
      expect(replay.headers.get('idempotent-replayed')).toBeNull();
      expect(await snapshot(id)).toEqual(before);
    });

    /**
     * The admin of tenant A acts on a fact only its owner (u-9) and admins may read, with an
     * Idempotency-Key; then a member of the same tenant (sub u-2, no grants) sends the same
     * request with the same key. It must be refused as it is without the key (403/404), or as a
     * reused key (422) — never handed the admin's stored 2xx with the private fact in it.
     */
    it.each([
      ['write', 'POST /v1/memory/facts', 403],
      ['supersede', 'POST /v1/memory/facts/:id/supersede', 404],
      ['verify', 'POST /v1/memory/facts/:id/verify', 404],
    ] as const)('%s: a same-tenant member who may not read the fact does not get the admin\'s replay', async (verb, _route, refusal) => {
      const written = await api.request('POST', '/v1/memory/facts', {
        token: adminA,
        body: { type: 'sec.private', content: { text: 'v1 (private)' }, scope: { userId: 'u-9' } },
      });
      expect(written.status).toBe(201);
      const target = written.body.id as string;
      const { path, body } =
        verb === 'write'
          ? { path: '/v1/memory/facts', body: { type: 'sec.private-write', content: { text: 'w (private)' }, scope: { userId: 'u-9' } } }
          : verb === 'supersede'
            ? { path: `/v1/memory/facts/${target}/supersede`, body: { content: { text: 'v2 (private)' } } }
            : { path: `/v1/memory/facts/${target}/verify`, body: {} };
      const idempotencyKey = `replay-member-${verb}-${target}`;
      const first = await api.request('POST', path, { token: adminA, body, headers: { 'idempotency-key': idempotencyKey } });
      expect(first.status).toBe(verb === 'write' ? 201 : 200);
      const before = await snapshot(target);

      const outsider = await tokenFor({ tid: tenantA, sub: 'u-2', role: 'member' });
      // Without the key, the outsider is refused.
      const plain = await api.request('POST', path, { token: outsider, body });
      expect(plain.status, JSON.stringify(plain.body)).toBe(refusal);

      const replay = await api.request('POST', path, { token: outsider, body, headers: { 'idempotency-key': idempotencyKey } });
      expect([refusal, 422], `status ${replay.status}: ${JSON.stringify(replay.body)}`).toContain(replay.status);
      expect(replay.headers.get('idempotent-replayed')).toBeNull();
      expect(JSON.stringify(replay.body)).not.toContain('(private)');
      if (verb === 'write') expect(JSON.stringify(replay.body)).not.toContain(first.body.id);
      expect(await snapshot(target)).toEqual(before);
    });
  });

  it.each(routes)('$name: authentication comes before validation (a malformed id or body without a token is 401, not 400)', async (route) => {
    const { method, path } = route.call('not-a-uuid');
    const response = await api.request(method, path, method === 'GET' || method === 'DELETE' ? {} : { rawBody: '{"unknown": ' });
    expect(response.status, JSON.stringify(response.body)).toBe(401);
    expect(response.body.error.code).toBe('unauthenticated');
  });

  it('verify also works without any body', async () => {
    const id = await writeFactOfA('verify without body');
    const response = await api.request('POST', `/v1/memory/facts/${id}/verify`, { token: adminA });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body).toMatchObject({ id, version: 2, trust: 'verified', verifiedBy: { kind: 'user', id: 'admin-1' } });
  });

  it('accepts a token just under 8 KiB (the bound is on size, not on padding)', async () => {
    const claims = adminClaims(tenantA);
    const base = await signed({ ...claims, padding: '' });
    // base64url of n bytes is ceil(4n/3) characters: pad so the token lands a little under 8 KiB.
    const room = Math.floor(((8 * 1024 - base.length - 64) * 3) / 4);
    const token = await signed({ ...claims, padding: 'x'.repeat(room) });
    expect(token.length).toBeLessThanOrEqual(8 * 1024);
    expect(token.length).toBeGreaterThan(8 * 1024 - 200);
    const response = await api.request('GET', '/v1/memory/facts?limit=1', { token });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
  });
});
