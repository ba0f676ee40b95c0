/**
 * `Idempotency-Key` on POST (DESIGN §7) over real HTTP: the first response is stored per tenant
 * and key for 24 h and replayed byte for byte; the same key with another body → 422
 * `idempotency-key-reused`; while the first is still running → 409 `idempotency-in-flight`.
 * Rows are counted behind the API's back with the owner connection.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers/api.ts';
import { sleep } from '../../support/wait.ts';
import { needs } from '../helpers/needs.ts';
import { rowCounts } from '../../support/seed.ts';

const FACTS = '/v1/memory/facts';

interface RawResponse {
  status: number;
  /** The body exactly as sent, for byte-for-byte comparisons. */
  text: string;
  body: any;
  headers: Headers;
}

const newKey = (label = 'key') => `${label}-${randomUUID()}`;

describe('Idempotency-Key', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi();
  });
  afterAll(() => api.close());

  /** A request whose raw body text is kept (api.request parses it). */
  async function send(
    method: string,
    path: string,
    options: { token: string; key?: string; body?: unknown; rawBody?: string },
  ): Promise<RawResponse> {
    const headers: Record<string, string> = { authorization: `Bearer ${options.token}` };
    if (options.key !== undefined) headers['idempotency-key'] = options.key;
    const payload = options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(`${api.baseUrl}${path}`, { method, headers, body: payload });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, text, body, headers: response.headers };
  }

  const counts = (tenantId: string) => rowCounts(api.db.admin, tenantId);

  async function versionsOf(tenantId: string, factId: string): Promise<number[]> {
    const rows = await api.db.admin<{ version: number }[]>`
      select version from fact_revisions where tenant_id = ${tenantId} and fact_id = ${factId} order by version`;
    return rows.map((r) => r.version);
  }

  const note = (text: string) => ({ type: 'acme.note', content: { text } });

  it('replays the first response byte for byte to the same key and body, writing one fact', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-replay');
    const key = newKey();
    const body = note('replay me');

    const first = await send('POST', FACTS, { token, key, body });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();

    const second = await send('POST', FACTS, { token, key, body });
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.headers.get('content-type')).toMatch(/^application\/json/);
    expect(second.text).toBe(first.text);
    expect(second.body.id).toBe(first.body.id);
    // A replay is a new request: its own X-Request-Id, while the stored body is the first one's.
    expect(second.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));

    expect(await counts(tenantId)).toEqual({ facts: 1, revisions: 1, keys: 1 });
    const [stored] = await api.db.admin<{ status: number; body: string; hours: number }[]>`
      select response_status as status, response_body as body,
             round(extract(epoch from expires_at - created_at) / 3600)::int as hours
      from idempotency_keys where tenant_id = ${tenantId} and key = ${key}`;
    expect(stored).toEqual({ status: 201, body: first.text, hours: 24 });
  });

  it('creates exactly one fact from 20 parallel requests with one key', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-parallel');
    const key = newKey();
    const body = note('twenty at once');

    const responses = await Promise.all(Array.from({ length: 20 }, () => send('POST', FACTS, { token, key, body })));

    const created = responses.filter((r) => r.status === 201);
    const inFlight = responses.filter((r) => r.status === 409);
    expect(created.length + inFlight.length, responses.map((r) => `${r.status} ${r.text}`).join('\n')).toBe(20);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const response of inFlight) expect(response.body.error.code).toBe('idempotency-in-flight');
    // Every 201 is the one write: the original or a replay of it, byte for byte.
    expect(new Set(created.map((r) => r.text)).size).toBe(1);
    expect(created.filter((r) => r.headers.get('idempotent-replayed') !== 'true')).toHaveLength(1);

    expect(await counts(tenantId)).toEqual({ facts: 1, revisions: 1, keys: 1 });

    // Once the first has finished, the key replays it.
    const later = await send('POST', FACTS, { token, key, body });
    expect(later.status).toBe(201);
    expect(later.text).toBe(created[0]!.text);
  });

  /**
   * Defect 7 of issue 10: parallel retries of a request that had already finished were answered
   * 1 replay and 4 × 409, because every retry took the key's lock before looking for the stored
   * response, so replays locked each other out. Once the first has finished, every retry replays.
   */
  it.each([
    ['a success', FACTS, note('finished first'), 201],
    ['a stored domain error', `${FACTS}/00000000-0000-4000-8000-000000000000/supersede`, { content: { text: 'x' } }, 404],
  ])('replays %s to every one of 10 parallel retries once the first has finished', async (_name, path, body, status) => {
    const { tenantId, admin: token } = await api.newTenant('idem-retries');
    const key = newKey();
    const first = await send('POST', path, { token, key, body });
    expect(first.status).toBe(status);
    const before = await counts(tenantId);

    for (let round = 0; round < 3; round++) {
      const retries = await Promise.all(Array.from({ length: 10 }, () => send('POST', path, { token, key, body })));
      expect(retries.map((r) => `${r.status} ${r.headers.get('idempotent-replayed')}`)).toEqual(Array(10).fill(`${status} true`));
      for (const retry of retries) expect(retry.text).toBe(first.text);
    }
    expect(await counts(tenantId)).toEqual(before);
  });

  /**
   * The first request commits its record after a retry looked for it but before the retry took
   * the key's lock (the retry finds no record, gets the lock, runs): the retry's insert of its
   * record meets the first one's, so its write is undone and the first response replayed, never
   * a second fact. Staged by holding the "first" record in an open transaction of the owner.
   */
  it('replays, writing nothing, when the first request commits while a retry runs', needs('postgres-server'), async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-commit-race');
    const body = note('raced');
    // The request hash covers method, path, caller and body, not the key: a record for the
    // raced key with the hash a first run would have had.
    const model = await send('POST', FACTS, { token, key: newKey(), body });
    const [modelRecord] = await api.db.admin<{ hash: string }[]>`select request_hash as hash from idempotency_keys where tenant_id = ${tenantId}`;
    const hash = modelRecord!.hash;
    const key = newKey();
    const firstResponse = JSON.stringify({ first: 'response' });

    const before = await counts(tenantId);
    const reserved = await api.db.admin.reserve();
    try {
      await reserved`begin`;
      await reserved`insert into idempotency_keys (tenant_id, key, request_hash, response_status, response_body, expires_at)
                     values (${tenantId}, ${key}, ${hash}, 201, ${firstResponse}, now() + interval '24 hours')`;
      const retry = send('POST', FACTS, { token, key, body });
      // The retry has looked, locked, written its fact and now waits on the uncommitted record.
      for (let i = 0; i < 100; i++) {
        const [waiting] = await api.db.admin<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like 'insert into "idempotency_keys"%'`;
        if (waiting!.n > 0) break;
        await sleep(50);
      }
      await reserved`commit`;
      const answered = await retry;
      expect(answered.status).toBe(201);
      expect(answered.headers.get('idempotent-replayed')).toBe('true');
      expect(answered.text).toBe(firstResponse);
    } finally {
      reserved.release();
    }
    expect(model.status).toBe(201);
    expect(await counts(tenantId)).toEqual({ ...before, keys: before.keys + 1 });
  });

  it('answers 422 idempotency-key-reused to the same key with another body, writing nothing', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-reused');
    const key = newKey();
    const first = await send('POST', FACTS, { token, key, body: note('first') });
    expect(first.status).toBe(201);
    const before = await counts(tenantId);

    const reused = await send('POST', FACTS, { token, key, body: note('second') });
    expect(reused.status).toBe(422);
    expect(reused.body.error.code).toBe('idempotency-key-reused');
    expect(reused.headers.get('idempotent-replayed')).toBeNull();
    expect(await counts(tenantId)).toEqual(before);

    // The stored response is untouched: the original body still replays.
    const again = await send('POST', FACTS, { token, key, body: note('first') });
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
  });

  it('treats the same key on another route as another request (422)', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-route');
    const key = newKey();
    const written = await send('POST', FACTS, { token, key, body: note('route') });
    expect(written.status).toBe(201);
    const before = await counts(tenantId);

    // The request hash covers method and path as well as the body.
    const supersede = await send('POST', `${FACTS}/${written.body.id}/supersede`, { token, key, body: { content: { text: 'x' } } });
    expect(supersede.status).toBe(422);
    expect(supersede.body.error.code).toBe('idempotency-key-reused');
    expect(await counts(tenantId)).toEqual(before);
  });

  it('keeps keys per tenant: two tenants using one key each get their own fact', async () => {
    const a = await api.newTenant('idem-a');
    const b = await api.newTenant('idem-b');
    const key = newKey('shared');
    const body = note('same key, two tenants');

    const ofA = await send('POST', FACTS, { token: a.admin, key, body });
    const ofB = await send('POST', FACTS, { token: b.admin, key, body });
    expect(ofA.status).toBe(201);
    expect(ofB.status).toBe(201);
    expect(ofB.headers.get('idempotent-replayed')).toBeNull();
    expect(ofB.body.id).not.toBe(ofA.body.id);
    expect(ofA.body.scope.tenantId).toBe(a.tenantId);
    expect(ofB.body.scope.tenantId).toBe(b.tenantId);

    // Another body under B's key is judged against B's record only.
    const reusedInB = await send('POST', FACTS, { token: b.admin, key, body: note('other') });
    expect(reusedInB.status).toBe(422);

    expect(await counts(a.tenantId)).toEqual({ facts: 1, revisions: 1, keys: 1 });
    expect(await counts(b.tenantId)).toEqual({ facts: 1, revisions: 1, keys: 1 });
  });

  it('treats a body with the same JSON in another key order as the same request', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-order');
    const key = newKey();
    const first = await send('POST', FACTS, {
      token,
      key,
      rawBody: '{"type":"acme.note","content":{"a":1,"b":{"x":true,"y":[1,2]}},"subjects":[{"kind":"user","id":"u1"}]}',
    });
    expect(first.status).toBe(201);
    const second = await send('POST', FACTS, {
      token,
      key,
      rawBody: '{ "subjects": [ { "id": "u1", "kind": "user" } ], "content": { "b": { "y": [1, 2], "x": true }, "a": 1 }, "type": "acme.note" }',
    });
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
    expect(await counts(tenantId)).toMatchObject({ facts: 1, revisions: 1 });

    // Array order is meaning, not formatting: a reordered array is another body.
    const reordered = await send('POST', FACTS, {
      token,
      key,
      rawBody: '{"type":"acme.note","content":{"a":1,"b":{"x":true,"y":[2,1]}},"subjects":[{"kind":"user","id":"u1"}]}',
    });
    expect(reordered.status).toBe(422);
  });

  /**
   * Decision, from src/http/idempotency.ts: a domain error (4xx) is stored like a success and
   * replayed as it was first answered — even after the fact has moved on, so the replayed
   * `currentVersion` is the one of the first answer, not the fact's version now. The replayed
   * envelope also keeps the first request's `requestId`; the X-Request-Id header is new.
   */
  it('stores a domain error and replays it, even after the fact changed further', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-error');
    const written = await send('POST', FACTS, { token, body: note('v1') });
    const id = written.body.id as string;
    const key = newKey();
    const stale = { content: { text: 'stale' }, expectVersion: 5 };

    const refused = await send('POST', `${FACTS}/${id}/supersede`, { token, key, body: stale });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'fact-changed', currentVersion: 1 });
    expect(refused.body.error.requestId).toBe(refused.headers.get('x-request-id'));
    expect(await versionsOf(tenantId, id)).toEqual([1]);

    const replayed = await send('POST', `${FACTS}/${id}/supersede`, { token, key, body: stale });
    expect(replayed.status).toBe(409);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.text).toBe(refused.text);

    // The fact moves on (without a key); the stored 409 still replays unchanged.
    const moved = await send('POST', `${FACTS}/${id}/supersede`, { token, body: { content: { text: 'v2' } } });
    expect(moved.status).toBe(200);
    expect(moved.body.version).toBe(2);
    const afterMove = await send('POST', `${FACTS}/${id}/supersede`, { token, key, body: stale });
    expect(afterMove.status).toBe(409);
    expect(afterMove.headers.get('idempotent-replayed')).toBe('true');
    expect(afterMove.text).toBe(refused.text);
    expect(afterMove.body.error.currentVersion).toBe(1);
    expect(afterMove.headers.get('x-request-id')).not.toBe(afterMove.body.error.requestId);

    expect(await versionsOf(tenantId, id)).toEqual([1, 2]);
  });

  it('honours the key on supersede: a replay returns the same version and writes no revision', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-supersede');
    const written = await send('POST', FACTS, { token, body: note('v1') });
    const id = written.body.id as string;
    const key = newKey();
    const body = { content: { text: 'v2' }, expectVersion: 1 };

    const first = await send('POST', `${FACTS}/${id}/supersede`, { token, key, body });
    expect(first.status).toBe(200);
    expect(first.body.version).toBe(2);

    // Replayed although expectVersion 1 is stale by now: the stored 200 answers, not a 409.
    const second = await send('POST', `${FACTS}/${id}/supersede`, { token, key, body });
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);

    expect(await versionsOf(tenantId, id)).toEqual([1, 2]);
    const [row] = await api.db.admin<{ version: number }[]>`select version from facts where tenant_id = ${tenantId} and id = ${id}`;
    expect(row!.version).toBe(2);
  });

  it('honours the key on verify: a replay returns the same version and writes no revision', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-verify');
    const written = await send('POST', FACTS, { token, body: note('to verify') });
    const id = written.body.id as string;
    const key = newKey();

    const first = await send('POST', `${FACTS}/${id}/verify`, { token, key, body: {} });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ version: 2, trust: 'verified' });

    const second = await send('POST', `${FACTS}/${id}/verify`, { token, key, body: {} });
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);

    // Without the key, verify writes another revision: the key is what deduplicated.
    const unkeyed = await send('POST', `${FACTS}/${id}/verify`, { token, body: {} });
    expect(unkeyed.status).toBe(200);
    expect(unkeyed.body.version).toBe(3);
    expect(await versionsOf(tenantId, id)).toEqual([1, 2, 3]);
  });

  it.each([
    ['300 characters', 'k'.repeat(300)],
    ['a space inside', 'my key'],
    ['a tab inside', 'my\tkey'],
  ])('refuses a malformed key (%s) with 400 bad-input, writing nothing', async (_name, key) => {
    const { tenantId, admin: token } = await api.newTenant('idem-bad-key');
    const response = await send('POST', FACTS, { token, key, body: note('bad key') });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('bad-input');
    expect(response.body.error.message).toContain('Idempotency-Key');
    expect(await counts(tenantId)).toEqual({ facts: 0, revisions: 0, keys: 0 });
  });

  it('accepts a key of exactly 255 visible characters', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-long-key');
    const key = `${'k'.repeat(254)}~`;
    const first = await send('POST', FACTS, { token, key, body: note('long key') });
    expect(first.status).toBe(201);
    const second = await send('POST', FACTS, { token, key, body: note('long key') });
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await counts(tenantId)).toEqual({ facts: 1, revisions: 1, keys: 1 });
  });

  it('does not deduplicate requests without a key', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-none');
    const body = note('no key');
    const first = await send('POST', FACTS, { token, body });
    const second = await send('POST', FACTS, { token, body });
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.body.id).not.toBe(first.body.id);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(await counts(tenantId)).toEqual({ facts: 2, revisions: 2, keys: 0 });
  });

  /**
   * Decision, from the code: a request refused by validation (400 before the route runs) is not
   * stored, so the key stays free for a corrected request.
   */
  it('stores nothing for a request refused by validation: the key stays usable', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-invalid');
    const key = newKey();
    const invalid = await send('POST', FACTS, { token, key, body: { type: 'Bad Type', content: { text: 'x' } } });
    expect(invalid.status).toBe(400);
    expect(await counts(tenantId)).toEqual({ facts: 0, revisions: 0, keys: 0 });

    const corrected = await send('POST', FACTS, { token, key, body: note('corrected') });
    expect(corrected.status).toBe(201);
    expect(corrected.headers.get('idempotent-replayed')).toBeNull();
    expect(await counts(tenantId)).toEqual({ facts: 1, revisions: 1, keys: 1 });
  });

  it('forgets an expired record: the same key with another body writes a new fact', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-expired');
    const key = newKey();
    const first = await send('POST', FACTS, { token, key, body: note('before expiry') });
    expect(first.status).toBe(201);

    const expired = await api.db.admin`
      update idempotency_keys set expires_at = now() - interval '1 minute'
      where tenant_id = ${tenantId} and key = ${key}`;
    expect(expired.count).toBe(1);

    const second = await send('POST', FACTS, { token, key, body: note('after expiry') });
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(second.body.id).not.toBe(first.body.id);
    expect(second.body.content).toEqual({ text: 'after expiry' });

    // The expired record was replaced by the new one, kept 24 h again.
    const replay = await send('POST', FACTS, { token, key, body: note('after expiry') });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(second.text);
    const original = await send('POST', FACTS, { token, key, body: note('before expiry') });
    expect(original.status).toBe(422);

    expect(await counts(tenantId)).toEqual({ facts: 2, revisions: 2, keys: 1 });
    const [stored] = await api.db.admin<{ fresh: boolean }[]>`
      select expires_at > now() + interval '23 hours' as fresh from idempotency_keys
      where tenant_id = ${tenantId} and key = ${key}`;
    expect(stored!.fresh).toBe(true);
  });

  it('treats an expired key with the same body as a new write, not a replay', async () => {
    const { tenantId, admin: token } = await api.newTenant('idem-expired-same');
    const key = newKey();
    const body = note('same body');
    const first = await send('POST', FACTS, { token, key, body });
    await api.db.admin`update idempotency_keys set expires_at = now() - interval '1 minute' where tenant_id = ${tenantId} and key = ${key}`;
    const second = await send('POST', FACTS, { token, key, body });
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(second.body.id).not.toBe(first.body.id);
    expect(await counts(tenantId)).toEqual({ facts: 2, revisions: 2, keys: 1 });
  });
});
