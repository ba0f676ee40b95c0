/**
 * Every validation rule of the facts API (DESIGN §4, §7) over real HTTP: each refused request
 * answers 400 `bad-input` with a message naming the field at fault, and writes nothing. The
 * rows behind the API are counted with the owner connection, which sees every tenant.
 */
import http from 'node:http';
import net from 'node:net';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, TEST_SECRET, type ApiResponse, type TestApi } from '../helpers/api.ts';
import { tenantTablesIn } from '../helpers/tenant-tables.ts';

const FACTS = '/v1/memory/facts';
const long = (n: number) => 'a'.repeat(n);
const valid = { type: 'acme.note', content: { text: 'a valid fact' } };
/** 1.1 MiB of JSON, over the 1 MiB body limit. */
const oversized = () => ({ type: 'acme.note', content: { text: long(Math.ceil(1.1 * 1024 * 1024)) } });

describe('validation: 400 bad-input naming the field, nothing written', () => {
  let api: TestApi;
  let tenantId: string;
  let token: string;
  /** A live fact of the tenant, for the routes that take an id. */
  let factId: string;

  beforeAll(async () => {
    api = await startTestApi();
    ({ tenantId, admin: token } = await api.newTenant('validation'));
    const written = await api.request('POST', FACTS, { token, body: valid });
    expect(written.status).toBe(201);
    factId = written.body.id;
  });
  afterAll(() => api.close());

  /** A POST over node:http and the given agent, so a test decides which connection carries it. */
  function post(agent: http.Agent, path: string, bearer: string, body: string): Promise<ApiResponse> {
    return new Promise((resolve, reject) => {
      const request = http.request(
        `${api.baseUrl}${path}`,
        {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${bearer}`,
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
          },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const headers = new Headers();
            for (const [name, value] of Object.entries(response.headers)) {
              if (typeof value === 'string') headers.set(name, value);
            }
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // not JSON: keep the text
            }
            resolve({ status: response.statusCode ?? 0, headers, body: parsed });
          });
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  }

  /** Rows of this tenant in facts and fact_revisions, and the fact's current version. */
  async function snapshot() {
    const [row] = await api.db.admin<{ facts: number; revisions: number; version: number }[]>`
      select (select count(*)::int from facts where tenant_id = ${tenantId}) as facts,
             (select count(*)::int from fact_revisions where tenant_id = ${tenantId}) as revisions,
             (select version from facts where tenant_id = ${tenantId} and id = ${factId}) as version`;
    return row!;
  }

  /** Sends the request and checks nothing was written, whatever it answered. */
  async function unchanged(send: () => Promise<ApiResponse>): Promise<ApiResponse> {
    const before = await snapshot();
    const response = await send();
    expect(await snapshot(), 'rows written by a refused request').toEqual(before);
    return response;
  }

  function expectBadInput(response: ApiResponse, field: string) {
    expect(response.status, JSON.stringify(response.body)).toBe(400);
    expect(response.body.error.code).toBe('bad-input');
    expect(typeof response.body.error.requestId).toBe('string');
    expect(response.body.error.requestId).toBe(response.headers.get('x-request-id'));
    // The envelope's message is `<field path>: <what is wrong>`.
    expect(response.body.error.message.startsWith(`${field}: `), response.body.error.message).toBe(true);
  }

  /** `details` names the field too, for the schema errors that carry details. */
  function expectDetail(response: ApiResponse, path: string) {
    const details = response.body.error.details as { path: string; message: string }[];
    expect(Array.isArray(details)).toBe(true);
    expect(details.map((d) => d.path)).toContain(path);
  }

  describe('POST /v1/memory/facts', () => {
    // [case, body, field named in the message, details path (null: the message names it only)]
    const cases: [string, Record<string, unknown>, string, string | null][] = [
      ['type missing', { content: valid.content }, 'type', 'type'],
      ['type with an upper-case letter', { ...valid, type: 'Acme.Note' }, 'type', 'type'],
      ['type starting with a dash', { ...valid, type: '-x' }, 'type', 'type'],
      ['type with a space', { ...valid, type: 'a b' }, 'type', 'type'],
      ['type over 128 characters', { ...valid, type: long(129) }, 'type', 'type'],
      ['content missing', { type: 'acme.note' }, 'content', 'content'],
      ['content null', { type: 'acme.note', content: null }, 'content', 'content'],
      ['content over 64 KiB serialized', { type: 'acme.note', content: { text: long(64 * 1024) } }, 'content', 'content'],
      ['an unknown top-level field', { ...valid, colour: 'blue' }, 'colour', 'colour'],
      ['an unknown field in scope', { ...valid, scope: { projectId: 'p1', teamId: 't' } }, 'scope.teamId', 'scope.teamId'],
      ['an unknown field in retention', { ...valid, retention: { keepDays: 3, forever: true } }, 'retention.forever', 'retention.forever'],
      [
        'an unknown field in subjects[i]',
        { ...valid, subjects: [{ kind: 'user', id: 'u1' }, { kind: 'user', id: 'u2', name: 'Bo' }] },
        'subjects.1.name',
        'subjects.1.name',
      ],
      ['trust "bogus"', { ...valid, trust: 'bogus' }, 'trust', 'trust'],
      ['retention.keepDays 0', { ...valid, retention: { keepDays: 0 } }, 'retention.keepDays', 'retention.keepDays'],
      ['retention.keepDays -1', { ...valid, retention: { keepDays: -1 } }, 'retention.keepDays', 'retention.keepDays'],
      ['retention.keepDays 1.5', { ...valid, retention: { keepDays: 1.5 } }, 'retention.keepDays', 'retention.keepDays'],
      ['retention.keepDays "3"', { ...valid, retention: { keepDays: '3' } }, 'retention.keepDays', 'retention.keepDays'],
      ['retention.keepUntil not a date', { ...valid, retention: { keepUntil: 'next week' } }, 'retention.keepUntil', 'retention.keepUntil'],
      // Decision (schemas.ts): both at once is ambiguous, so 400, reported on keepDays.
      [
        'retention.keepDays and keepUntil together',
        { ...valid, retention: { keepDays: 3, keepUntil: '2030-01-01T00:00:00Z' } },
        'retention.keepDays',
        'retention.keepDays',
      ],
      [
        '21 subjects',
        { ...valid, subjects: Array.from({ length: 21 }, (_, i) => ({ kind: 'external', id: `e${i}` })) },
        'subjects',
        'subjects',
      ],
      ['subject kind "robot"', { ...valid, subjects: [{ kind: 'robot', id: 'r2' }] }, 'subjects.0.kind', 'subjects.0.kind'],
      ['subject id ""', { ...valid, subjects: [{ kind: 'user', id: '' }] }, 'subjects.0.id', 'subjects.0.id'],
      ['subject id of 129 characters', { ...valid, subjects: [{ kind: 'user', id: long(129) }] }, 'subjects.0.id', 'subjects.0.id'],
      [
        'validFrom after validUntil',
        { ...valid, validFrom: '2026-02-01T00:00:00Z', validUntil: '2026-01-01T00:00:00Z' },
        'validFrom',
        'validFrom',
      ],
      ['validFrom not ISO 8601', { ...valid, validFrom: '01/02/2026' }, 'validFrom', 'validFrom'],
      ['observedAt "yesterday"', { ...valid, observedAt: 'yesterday' }, 'observedAt', 'observedAt'],
      ['memoryKind "dream"', { ...valid, memoryKind: 'dream' }, 'memoryKind', 'memoryKind'],
      ['scope.projectId empty', { ...valid, scope: { projectId: '' } }, 'scope.projectId', 'scope.projectId'],
      ['scope.userId of 129 characters', { ...valid, scope: { userId: long(129) } }, 'scope.userId', 'scope.userId'],
      ['scope.orgId empty', { ...valid, scope: { orgId: '' } }, 'scope.orgId', 'scope.orgId'],
      ['scope.tenantId of 129 characters', { ...valid, scope: { tenantId: long(129) } }, 'scope.tenantId', 'scope.tenantId'],
      // Conversation keys need a project or user to own them (DESIGN §3): refused by the domain.
      ['scope {participantId} alone', { ...valid, scope: { participantId: 'end-7' } }, 'scope', 'scope'],
      ['scope {threadId} alone', { ...valid, scope: { threadId: 'th-1' } }, 'scope', 'scope'],
      ['scope {sessionId, orgId}', { ...valid, scope: { sessionId: 's-1', orgId: 'o-1' } }, 'scope', 'scope'],
      ['mergedFrom entry without type', { ...valid, mergedFrom: [{ id: 'x-1' }] }, 'mergedFrom.0.type', 'mergedFrom.0.type'],
      [
        'mergedFrom entry with an unknown key',
        { ...valid, mergedFrom: [{ type: 'kiwi.page', id: 'x-1', weight: 2 }] },
        'mergedFrom.0.weight',
        'mergedFrom.0.weight',
      ],
    ];

    it.each(cases)('refuses %s', async (_name, body, field, detailPath) => {
      const response = await unchanged(() => api.request('POST', FACTS, { token, body }));
      expectBadInput(response, field);
      if (detailPath !== null) expectDetail(response, detailPath);
    });

    it('refuses trust "verified", saying a fact is verified only via verify', async () => {
      const response = await unchanged(() => api.request('POST', FACTS, { token, body: { ...valid, trust: 'verified' } }));
      expectBadInput(response, 'trust');
      expect(response.body.error.message).toMatch(/verif/);
      expect(response.body.error.message).toContain('/verify');
    });

    it('refuses a body that is not JSON', async () => {
      const response = await unchanged(() => api.request('POST', FACTS, { token, rawBody: '{not json' }));
      expect(response.status).toBe(400);
      expect(response.body.error.code).toBe('bad-input');
      expect(response.body.error.message).toMatch(/JSON/i);
    });

    it('refuses a JSON array body', async () => {
      const response = await unchanged(() => api.request('POST', FACTS, { token, body: [valid] }));
      expect(response.status).toBe(400);
      expect(response.body.error.code).toBe('bad-input');
      expect(response.body.error.message).toMatch(/object/i);
    });

    it('answers 413 payload-too-large to a body over 1 MiB, and writes nothing', async () => {
      // 1.1 MiB of JSON: over the body limit, so the 64 KiB content rule never gets to run.
      // Sent on a connection of its own (see the keep-alive test below).
      const agent = new http.Agent({ keepAlive: false });
      try {
        const response = await unchanged(() => post(agent, FACTS, token, JSON.stringify(oversized())));
        expect(response.status).toBe(413);
        expect(response.body.error.code).toBe('payload-too-large');
        expect(response.body.error.requestId).toBe(response.headers.get('x-request-id'));
      } finally {
        agent.destroy();
      }
    });

    it.each([
      ['a 413 (body too large)', () => token, () => JSON.stringify(oversized())],
      ['a 401 (bad token) with a large unread body', () => 'not-a-token', () => JSON.stringify({ type: 'acme.note', content: { text: long(900 * 1024) } })],
    ])('leaves the client a working connection after %s', async (_label, tokenOf, bodyOf) => {
      // One socket only: the next request goes over the connection that carried the refusal,
      // unless the refusal said Connection: close and the agent opens a fresh one.
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const refused = await post(agent, FACTS, tokenOf(), bodyOf());
        expect(refused.status).toBeGreaterThanOrEqual(400);
        expect(refused.headers.get('connection')?.toLowerCase()).toBe('close');
        const next = await post(agent, FACTS, token, JSON.stringify(valid)).catch((error: Error) => error);
        expect(next instanceof Error ? `request failed: ${next.message}` : next.status).toBe(201);
      } finally {
        agent.destroy();
      }
    });

    it('accepts content of exactly 64 KiB serialized (the bound is inclusive)', async () => {
      const text = long(64 * 1024 - JSON.stringify({ text: '' }).length);
      const content = { text };
      expect(Buffer.byteLength(JSON.stringify(content))).toBe(64 * 1024);
      const response = await api.request('POST', FACTS, { token, body: { type: 'acme.note', content } });
      expect(response.status).toBe(201);
    });
  });

  describe('POST /v1/memory/facts/:id/supersede', () => {
    const supersede = (body: unknown) => api.request('POST', `${FACTS}/${factId}/supersede`, { token, body });

    it.each([
      ['type', { type: 'acme.other', content: { text: 'x' } }],
      ['scope', { scope: { projectId: 'p2' }, content: { text: 'x' } }],
      ['type and scope', { type: 'acme.other', scope: { projectId: 'p2' }, content: { text: 'x' } }],
    ])('refuses a body naming %s: type and scope cannot change', async (_name, body) => {
      const response = await unchanged(() => supersede(body));
      expect(response.status).toBe(400);
      expect(response.body.error.code).toBe('bad-input');
      expect(response.body.error.message).toContain('type');
      expect(response.body.error.message).toContain('scope');
      expect(response.body.error.message).toMatch(/cannot change/);
    });

    // [case, body, field]
    const cases: [string, Record<string, unknown>, string][] = [
      ['content null', { content: null }, 'content'],
      ['expectVersion 0', { content: { text: 'x' }, expectVersion: 0 }, 'expectVersion'],
      ['expectVersion 1.5', { content: { text: 'x' }, expectVersion: 1.5 }, 'expectVersion'],
      ['expectVersion "1"', { content: { text: 'x' }, expectVersion: '1' }, 'expectVersion'],
      ['an unknown field', { content: { text: 'x' }, memoryKind: 'semantic' }, 'memoryKind'],
      ['retention.keepDays 0', { content: { text: 'x' }, retention: { keepDays: 0 } }, 'retention.keepDays'],
      ['21 subjects', { content: { text: 'x' }, subjects: Array.from({ length: 21 }, (_, i) => ({ kind: 'user', id: `u${i}` })) }, 'subjects'],
      ['validFrom after validUntil', { content: { text: 'x' }, validFrom: '2026-02-01T00:00:00Z', validUntil: '2026-01-01T00:00:00Z' }, 'validFrom'],
      ['observedAt "yesterday"', { content: { text: 'x' }, observedAt: 'yesterday' }, 'observedAt'],
    ];

    it.each(cases)('refuses %s', async (_name, body, field) => {
      const response = await unchanged(() => supersede(body));
      expectBadInput(response, field);
      expectDetail(response, field);
    });

    it('refuses a validFrom later than the validUntil already stored (checked by the domain)', async () => {
      const written = await api.request('POST', FACTS, {
        token,
        body: { ...valid, validUntil: '2026-01-01T00:00:00Z' },
      });
      expect(written.status).toBe(201);
      const response = await unchanged(() =>
        api.request('POST', `${FACTS}/${written.body.id}/supersede`, {
          token,
          body: { content: { text: 'x' }, validFrom: '2026-06-01T00:00:00Z' },
        }),
      );
      expectBadInput(response, 'validFrom');
    });
  });

  describe('POST /v1/memory/facts/:id/verify', () => {
    it.each([
      ['expectVersion 0', { expectVersion: 0 }, 'expectVersion'],
      ['an unknown field', { trust: 'verified' }, 'trust'],
    ])('refuses %s', async (_name, body, field) => {
      const response = await unchanged(() => api.request('POST', `${FACTS}/${factId}/verify`, { token, body }));
      expectBadInput(response, field);
    });
  });

  describe('an empty body sent as JSON (Content-Type: application/json, no bytes)', () => {
    /** As curl sends it with `-H 'Content-Type: application/json'` and no `-d`: no body, no length. */
    const emptyJson = (method: string, path: string) =>
      api.request(method, path, { token, headers: { 'content-type': 'application/json' } });
    /** As other clients send it: `Content-Length: 0`, or a body of whitespace only. */
    const zeroLength = (method: string, path: string, rawBody = '') => api.request(method, path, { token, rawBody });

    it('verify, whose body is optional, takes it as no body', async () => {
      const written = await api.request('POST', FACTS, { token, body: valid });
      for (const [send, version] of [
        [() => emptyJson('POST', `${FACTS}/${written.body.id}/verify`), 2],
        [() => zeroLength('POST', `${FACTS}/${written.body.id}/verify`), 3],
        [() => zeroLength('POST', `${FACTS}/${written.body.id}/verify`, ' \r\n'), 4],
      ] as const) {
        const response = await send();
        expect(response.status, JSON.stringify(response.body)).toBe(200);
        expect(response.body).toMatchObject({ id: written.body.id, version, trust: 'verified' });
      }
    });

    it('the other routes with an optional body take it too: a background report, the nightly schedule', async () => {
      const report = await emptyJson('POST', '/v1/memory/reports');
      expect(report.status, JSON.stringify(report.body)).toBe(202);
      expect(report.body.status).toBe('pending');
      const schedule = await zeroLength('PUT', '/v1/memory/reports/schedule');
      expect(schedule.status, JSON.stringify(schedule.body)).toBe(200);
    });

    it.each([
      ['POST', FACTS],
      ['POST', '/v1/memory/retrieve'],
      ['POST', '/v1/memory/context'],
      ['POST', '/v1/memory/erasures'],
      ['POST', 'supersede'],
    ])('%s %s, whose body is required, answers 400 saying a JSON body is required', async (method, route) => {
      const path = route === 'supersede' ? `${FACTS}/${factId}/supersede` : route;
      for (const send of [() => emptyJson(method, path), () => zeroLength(method, path)]) {
        const response = await unchanged(send);
        expect(response.status, JSON.stringify(response.body)).toBe(400);
        expect(response.body.error).toMatchObject({ code: 'bad-input', message: 'A JSON body is required (Content-Type: application/json)' });
      }
    });

    it('a body that is not JSON is still malformed, on an optional-body route too', async () => {
      const response = await unchanged(() => zeroLength('POST', `${FACTS}/${factId}/verify`, '{"expectVersion":'));
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ code: 'bad-input', message: 'Malformed JSON in request body' });
    });
  });

  describe('query and path validation', () => {
    // [case, query string, field]
    const listCases: [string, string, string][] = [
      ['limit=0', 'limit=0', 'limit'],
      ['limit=101', 'limit=101', 'limit'],
      ['limit=abc', 'limit=abc', 'limit'],
      ['limit=-1', 'limit=-1', 'limit'],
      ['an unknown query parameter', 'colour=blue', 'colour'],
      ['subjectKind without subjectId', 'subjectKind=user', 'subjectKind'],
      ['subjectId without subjectKind', 'subjectId=u1', 'subjectKind'],
      ['subjectKind "robot"', 'subjectKind=robot&subjectId=r2', 'subjectKind'],
      ['a malformed cursor', 'cursor=abc', 'cursor'],
      ['validAt "nope"', 'validAt=nope', 'validAt'],
      ['asOf "nope"', 'asOf=nope', 'asOf'],
      ['type "Acme.Note"', 'type=Acme.Note', 'type'],
      ['trust "bogus"', 'trust=bogus', 'trust'],
    ];

    it.each(listCases)('GET list refuses %s', async (_name, query, field) => {
      const response = await unchanged(() => api.request('GET', `${FACTS}?${query}`, { token }));
      expectBadInput(response, field);
    });

    it('GET list refuses a well-formed base64url cursor of the wrong shape', async () => {
      const cursor = Buffer.from(JSON.stringify({ v: 2, after: factId })).toString('base64url');
      const response = await api.request('GET', `${FACTS}?cursor=${cursor}`, { token });
      expectBadInput(response, 'cursor');
    });

    it('GET /v1/memory/facts/not-a-uuid → 400 naming id', async () => {
      const response = await api.request('GET', `${FACTS}/not-a-uuid`, { token });
      expectBadInput(response, 'id');
    });

    it.each([
      ['version=0', 'version=0', 'version'],
      ['version=x', 'version=x', 'version'],
      ['version=1.5', 'version=1.5', 'version'],
      ['version and asOf together', 'version=1&asOf=2026-01-01T00:00:00Z', 'version'],
      ['asOf "nope"', 'asOf=nope', 'asOf'],
      ['an unknown query parameter', 'at=1', 'at'],
    ])('GET one refuses %s', async (_name, query, field) => {
      const response = await api.request('GET', `${FACTS}/${factId}?${query}`, { token });
      expectBadInput(response, field);
    });

    it.each([
      ['expectVersion=abc', 'expectVersion=abc', 'expectVersion'],
      ['expectVersion=0', 'expectVersion=0', 'expectVersion'],
      ['an unknown query parameter', 'force=true', 'force'],
    ])('DELETE refuses %s and leaves the fact alone', async (_name, query, field) => {
      const response = await unchanged(() => api.request('DELETE', `${FACTS}/${factId}?${query}`, { token }));
      expectBadInput(response, field);
      const still = await api.request('GET', `${FACTS}/${factId}`, { token });
      expect(still.status).toBe(200);
    });

    it.each([
      ['supersede', 'POST', '/supersede'],
      ['verify', 'POST', '/verify'],
      ['revisions', 'GET', '/revisions'],
      ['delete', 'DELETE', ''],
    ])('%s with an id that is not a UUID → 400 naming id', async (_name, method, suffix) => {
      const body = suffix === '/supersede' ? { content: { text: 'x' } } : method === 'POST' ? {} : undefined;
      const response = await unchanged(() => api.request(method, `${FACTS}/not-a-uuid${suffix}`, { token, body }));
      expectBadInput(response, 'id');
    });
  });

  /**
   * Bytes and shapes PostgreSQL cannot store (issue 10, defect 3): each used to reach the
   * database and answer 500. Every one is now a 400 naming the field, and no row changes in
   * this file's database: in any table with a tenant_id, nor in tenants.
   */
  describe('bytes and shapes the database cannot store', () => {
    async function stored(): Promise<Record<string, number>> {
      const counts: Record<string, number> = {};
      for (const table of [...(await tenantTablesIn(api.db.admin)), 'tenants']) {
        const [row] = await api.db.admin<{ n: number }[]>`select count(*)::int as n from ${api.db.admin(table)}`;
        counts[table] = row!.n;
      }
      return counts;
    }

    /** Sends, then checks the answer is 400 bad-input naming `field` and that nothing was stored. */
    async function refused(send: () => Promise<ApiResponse>, field: string) {
      const before = await stored();
      const response = await send();
      expectBadInput(response, field);
      expect(await stored(), 'rows stored by a refused request').toEqual(before);
      return response;
    }

    const NUL = '\u0000';
    const LONE = '\ud800';
    /** `content` nested `depth` arrays deep around a string. */
    const nested = (depth: number): unknown => {
      let value: unknown = 'x';
      for (let i = 0; i < depth; i++) value = [value];
      return value;
    };
    /** A body already serialized: too deep for this process's own JSON.stringify to write. */
    class Raw {
      constructor(readonly text: string) {}
    }
    const deepBody = (depth: number) => new Raw(`{"type":"acme.note","content":${'['.repeat(depth)}"x"${']'.repeat(depth)}}`);
    const post = (path: string, body: unknown, headers?: Record<string, string>) =>
      api.request('POST', path, { token, ...(body instanceof Raw ? { rawBody: body.text } : { body }), ...(headers ? { headers } : {}) });

    // [case, route, body, field named]
    const bodies: [string, string, unknown, string][] = [
      ['a NUL in a content string', FACTS, { ...valid, content: { text: `a${NUL}b` } }, 'content.text'],
      ['a NUL in content as a bare string', FACTS, { ...valid, content: `a${NUL}` }, 'content'],
      ['a NUL in a content key', FACTS, { ...valid, content: { [`k${NUL}`]: 1 } }, 'content'],
      ['a NUL deep in content', FACTS, { ...valid, content: { a: [{ b: [`x${NUL}`] }] } }, 'content.a.0.b.0'],
      ['a lone surrogate in a content string', FACTS, { ...valid, content: { text: LONE } }, 'content.text'],
      ['a lone surrogate in a content key', FACTS, { ...valid, content: { [LONE]: 'x' } }, 'content'],
      ['content nested 5,000 deep (a 10 KB body)', FACTS, deepBody(5000), 'content'],
      ['content nested 65 deep, one past the limit', FACTS, { ...valid, content: nested(65) }, 'content'],
      ['a NUL in scope.projectId', FACTS, { ...valid, scope: { projectId: `p${NUL}` } }, 'scope.projectId'],
      ['a lone surrogate in scope.projectId', FACTS, { ...valid, scope: { projectId: `p${LONE}` } }, 'scope.projectId'],
      ['a NUL in path', FACTS, { ...valid, path: `notes/${NUL}.md` }, 'path'],
      ['a NUL in episodeId', FACTS, { ...valid, episodeId: `ep${NUL}` }, 'episodeId'],
      ['a NUL in subjects[0].id', FACTS, { ...valid, subjects: [{ kind: 'user', id: `u${NUL}` }] }, 'subjects.0.id'],
      ['a NUL in mergedFrom[0].id', FACTS, { ...valid, mergedFrom: [{ type: 'kiwi.page', id: `x${NUL}` }] }, 'mergedFrom.0.id'],
      ['a NUL in mergedFrom[0].date', FACTS, { ...valid, mergedFrom: [{ type: 'kiwi.page', id: 'x', date: `2026${NUL}` }] }, 'mergedFrom.0.date'],
      ['a NUL in mergedFrom[0].type', FACTS, { ...valid, mergedFrom: [{ type: `kiwi${NUL}`, id: 'x' }] }, 'mergedFrom.0.type'],
      ['a NUL in type', FACTS, { ...valid, type: `acme${NUL}` }, 'type'],
      ['validFrom 0001-01-01T00:00:00+14:00 (year 0 in UTC)', FACTS, { ...valid, validFrom: '0001-01-01T00:00:00+14:00' }, 'validFrom'],
      ['validUntil 0000-01-01T00:00:00Z', FACTS, { ...valid, validUntil: '0000-01-01T00:00:00Z' }, 'validUntil'],
      ['observedAt 9999-12-31T23:00:00-01:00 (year 10000 in UTC)', FACTS, { ...valid, observedAt: '9999-12-31T23:00:00-01:00' }, 'observedAt'],
      ['retention.keepUntil 0000-06-01T00:00:00Z', FACTS, { ...valid, retention: { keepUntil: '0000-06-01T00:00:00Z' } }, 'retention.keepUntil'],
      ['a NUL in a keyword query', '/v1/memory/retrieve', { mode: 'keyword', query: `washing${NUL}machine` }, 'query'],
      ['a NUL in a context query', '/v1/memory/context', { query: `a${NUL}` }, 'query'],
      ['a NUL in a retrieve scope', '/v1/memory/retrieve', { mode: 'list', scope: { projectId: NUL } }, 'scope.projectId'],
      ['validAt 0000-01-01T00:00:00Z in retrieve', '/v1/memory/retrieve', { mode: 'list', validAt: '0000-01-01T00:00:00Z' }, 'validAt'],
      ['a NUL in a report prefix', '/v1/memory/reports', { episodesPrefix: `episodes/${NUL}` }, 'episodesPrefix'],
      ['a NUL in an erasure subject id', '/v1/memory/erasures', { subject: { kind: 'participant', id: `end-9${NUL}` } }, 'subject.id'],
      ['a NUL in an erasure conversation id', '/v1/memory/erasures', { conversationId: `th${NUL}` }, 'conversationId'],
    ];

    it.each(bodies)('POST refuses %s', async (_name, path, body, field) => {
      await refused(() => post(path, body), field);
    });

    it('PUT /v1/memory/reports/schedule refuses a NUL in episodesPrefix', async () => {
      await refused(() => api.request('PUT', '/v1/memory/reports/schedule', { token, body: { episodesPrefix: NUL } }), 'episodesPrefix');
    });

    it('supersede refuses a NUL, a lone surrogate and year 0 in its body', async () => {
      const at = `${FACTS}/${factId}/supersede`;
      await refused(() => post(at, { content: { note: `x${NUL}` } }), 'content.note');
      await refused(() => post(at, { content: [LONE] }), 'content.0');
      await refused(() => post(at, { content: 'x', validFrom: '0001-01-01T00:00:00+14:00' }), 'validFrom');
      await refused(() => post(at, { content: 'x', subjects: [{ kind: 'external', id: NUL }] }), 'subjects.0.id');
    });

    it('an idempotent write with a NUL stores no key either', async () => {
      await refused(() => post(FACTS, { ...valid, content: { text: NUL } }, { 'Idempotency-Key': 'nul-key-1' }), 'content.text');
    });

    // [case, path and query, field named]
    const queries: [string, string, string][] = [
      ['asOf=0000-01-01T00:00:00Z on the list', `${FACTS}?asOf=0000-01-01T00:00:00Z`, 'asOf'],
      ['validAt=0000-01-01T00:00:00Z on the list', `${FACTS}?validAt=0000-01-01T00:00:00Z`, 'validAt'],
      ['asOf in year 10000 UTC on the list', `${FACTS}?asOf=${encodeURIComponent('9999-12-31T23:30:00-01:00')}`, 'asOf'],
      ['a NUL in projectId on the list', `${FACTS}?projectId=p%00`, 'projectId'],
      ['a NUL in episodeId on the list', `${FACTS}?episodeId=%00`, 'episodeId'],
      ['a NUL in path on the list', `${FACTS}?path=a%00b`, 'path'],
      ['a NUL in subjectId on the list', `${FACTS}?subjectKind=user&subjectId=u%00`, 'subjectId'],
      ['a NUL in cursor on the list', `${FACTS}?cursor=%00`, 'cursor'],
      ['a NUL in participantId on the report', '/v1/memory/report?projectId=p&participantId=%00', 'participantId'],
      ['a NUL in episodesPrefix on the report', '/v1/memory/report?episodesPrefix=e%00', 'episodesPrefix'],
      ['a NUL in episodes_prefix on the KiwiFS report', '/api/kiwi/memory/report?episodes_prefix=%00', 'episodes_prefix'],
      ['a NUL in cursor on the erasures', '/v1/memory/erasures?cursor=%00', 'cursor'],
    ];

    it.each(queries)('GET refuses %s', async (_name, pathAndQuery, field) => {
      await refused(() => api.request('GET', pathAndQuery, { token }), field);
    });

    it('GET one refuses asOf=0000-01-01T00:00:00Z', async () => {
      await refused(() => api.request('GET', `${FACTS}/${factId}?asOf=0000-01-01T00:00:00Z`, { token }), 'asOf');
    });

    it('accepts the ends of the range: content 64 deep, years 1 and 9999 in UTC', async () => {
      const deep = await post(FACTS, { ...valid, content: nested(64) });
      expect(deep.status, JSON.stringify(deep.body)).toBe(201);
      const ends = await post(FACTS, { ...valid, validFrom: '0001-01-01T00:00:00Z', validUntil: '9999-12-31T23:59:59.999Z' });
      expect(ends.status, JSON.stringify(ends.body)).toBe(201);
      expect(ends.body.validFrom).toBe('0001-01-01T00:00:00.000Z');
      expect(ends.body.validUntil).toBe('9999-12-31T23:59:59.999Z');
      const listed = await api.request('GET', `${FACTS}?asOf=0001-01-01T00:00:00Z`, { token });
      expect(listed.status).toBe(200);
      // Astral characters (a surrogate pair) are well-formed text and are kept.
      const emoji = await post(FACTS, { ...valid, content: { text: 'memo 😀' } });
      expect(emoji.status).toBe(201);
      expect(emoji.body.content).toEqual({ text: 'memo 😀' });
    });

    it('a NUL in a header value is refused by the HTTP server before the app sees it, in the envelope', async () => {
      // fetch refuses to send one, so this goes over a raw socket: Node's parser refuses it and
      // answerMalformedRequests puts the 400 in the error envelope.
      const { port } = new URL(api.baseUrl);
      const body = JSON.stringify(valid);
      const before = await stored();
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), '127.0.0.1', () => {
          socket.end(
            `POST ${FACTS} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
              `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
              `X-Provenance: run:a\u0000b\r\nX-Actor: bo\u0000\r\n\r\n${body}`,
            'latin1',
          );
        });
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString('latin1')));
        socket.on('error', reject);
        socket.on('close', () => resolve(text));
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      const [head, payload] = answer.split('\r\n\r\n');
      const requestId = /\r\nX-Request-Id: ([\w-]+)\r\n/i.exec(head!)?.[1];
      expect(JSON.parse(payload!)).toEqual({ error: { code: 'bad-input', message: expect.stringContaining('Malformed'), requestId } });
      expect(await stored()).toEqual(before);
    });

    /** An HS256 token the test server accepts, but for its claims. */
    const signed = (claims: Record<string, unknown>) =>
      new SignJWT({ role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] }, ...claims })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(TEST_SECRET));

    it.each([
      ['a NUL in tid', { tid: `acme${NUL}`, sub: 'u1' }],
      ['a NUL in sub', { tid: 'validation-claims', sub: `u${NUL}1` }],
      ['a NUL in a project grant', { tid: 'validation-claims', sub: 'u1', projects: { read: [`p${NUL}`], write: [] } }],
      ['a lone surrogate in tid', { tid: `acme${LONE}`, sub: 'u1' }],
    ])('a validly signed token with %s → 401 unauthenticated, nothing stored', async (_name, claims) => {
      const bad = await signed(claims);
      for (const [method, path, body] of [
        ['POST', FACTS, valid],
        ['GET', FACTS, undefined],
        ['POST', '/v1/memory/reports', {}],
      ] as const) {
        const before = await stored();
        const response = await api.request(method, path, { token: bad, body });
        expect(response.status, JSON.stringify(response.body)).toBe(401);
        expect(response.body.error.code).toBe('unauthenticated');
        expect(response.body.error.requestId).toBe(response.headers.get('x-request-id'));
        expect(await stored()).toEqual(before);
      }
    });
  });
});
