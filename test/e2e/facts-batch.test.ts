/**
 * `POST /v1/memory/facts:batch` over real HTTP (docs/decisions/0039-batch-writes.md): up to 1,000
 * facts written all or nothing in one transaction; a refused item refuses the batch and the error
 * names it; one Idempotency-Key covers the batch; bodies up to 16 MiB; the facts get vectors.
 * Rows are counted behind the API's back with the owner connection.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi, tokenFor } from '../helpers/api.ts';
import { rowCounts } from '../../support/seed.ts';

const BATCH = '/v1/memory/facts:batch';

const note = (text: string, extra: Record<string, unknown> = {}) => ({ type: 'acme.note', content: { text }, ...extra });

describe('POST /v1/memory/facts:batch', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi();
  });
  afterAll(() => api.close());

  const counts = (tenantId: string) => rowCounts(api.db.admin, tenantId);

  it('writes every fact, version 1, answering them in the order given; each reads back as written', async () => {
    const { tenantId, admin } = await api.newTenant('batch');
    const bodies = [
      note('first', { scope: { projectId: 'p1' }, subjects: [{ kind: 'user', id: 'u1' }], retention: { keepDays: 7 } }),
      note('second', { trust: 'unverified', memoryKind: 'episodic', episodeId: 'ep-1', path: 'raw/ep-1.md', validFrom: '2026-01-01T00:00:00Z' }),
      { type: 'acme.preference', content: 'prefers email', mergedFrom: [{ type: 'episode', id: 'ep-1' }] },
    ];
    const response = await api.request('POST', BATCH, { token: admin, body: { facts: bodies }, headers: { 'x-provenance': 'import:run-1' } });
    expect(response.status).toBe(201);
    const data = response.body.data as any[];
    expect(data.map((f) => f.content)).toEqual([{ text: 'first' }, { text: 'second' }, 'prefers email']);
    expect(new Set(data.map((f) => f.id)).size).toBe(3);
    expect(data[0]).toMatchObject({ version: 1, scope: { tenantId, projectId: 'p1' }, subjects: [{ kind: 'user', id: 'u1' }], trust: 'asserted' });
    expect(Date.parse(data[0].expiresAt) - Date.parse(data[0].createdAt)).toBe(7 * 24 * 3600 * 1000);
    expect(data[1]).toMatchObject({ trust: 'unverified', memoryKind: 'episodic', episodeId: 'ep-1', path: 'raw/ep-1.md', validFrom: '2026-01-01T00:00:00.000Z' });
    expect(data[2].mergedFrom).toEqual([{ type: 'episode', id: 'ep-1', date: expect.any(String) }]);
    for (const fact of data) expect(fact.derivedFrom).toEqual([{ type: 'import', id: 'run-1', date: expect.any(String) }]);

    // Each is the fact a read returns, and the batch is one moment: asOf its recordedAt finds them all.
    for (const fact of data) {
      const read = await api.request('GET', `/v1/memory/facts/${fact.id}`, { token: admin });
      expect({ ...read.body, embeddingModel: null }).toEqual(fact);
    }
    const asOf = await api.request('GET', `/v1/memory/facts?asOf=${encodeURIComponent(data[0].recordedAt)}`, { token: admin });
    expect(asOf.body.data).toHaveLength(3);
    expect(await counts(tenantId)).toEqual({ facts: 3, revisions: 3, keys: 0 });
  });

  it('writes 1,000 facts in a body over 1 MiB', async () => {
    const { tenantId, admin } = await api.newTenant('batch-full');
    const filler = 'x'.repeat(1500);
    const facts = Array.from({ length: 1000 }, (_, i) => note(`fact ${i} ${filler}`));
    expect(JSON.stringify({ facts }).length).toBeGreaterThan(1024 * 1024);
    const response = await api.request('POST', BATCH, { token: admin, body: { facts } });
    expect(response.status, JSON.stringify(response.body).slice(0, 300)).toBe(201);
    expect(response.body.data).toHaveLength(1000);
    expect(response.body.data[999].content).toEqual({ text: `fact 999 ${filler}` });
    expect(await counts(tenantId)).toMatchObject({ facts: 1000, revisions: 1000 });
  });

  it.each([
    ['no facts', { facts: [] }, 'facts'],
    ['1,001 facts', { facts: Array.from({ length: 1001 }, (_, i) => note(`n${i}`)) }, 'facts'],
    ['an array body', [note('a')], ''],
    ['an unknown field', { facts: [note('a')], atomic: false }, 'atomic'],
  ])('refuses %s with 400 bad-input', async (_name, body, path) => {
    const { tenantId, admin } = await api.newTenant('batch-shape');
    const response = await api.request('POST', BATCH, { token: admin, body });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('bad-input');
    expect(response.body.error.details[0].path).toBe(path);
    // About the batch, not one of its items.
    expect(response.body.error).not.toHaveProperty('item');
    expect(await counts(tenantId)).toMatchObject({ facts: 0 });
  });

  it('refuses the whole batch when one item is invalid, naming the item and its field', async () => {
    const { tenantId, admin } = await api.newTenant('batch-invalid');
    const facts = [note('fine'), note('fine too'), { type: 'Bad Type', content: { text: 'x' } }, note('also fine', { trust: 'verified' })];
    const response = await api.request('POST', BATCH, { token: admin, body: { facts } });
    expect(response.status).toBe(400);
    expect(response.body.error.message).toMatch(/^facts\.2\.type: /);
    expect(response.body.error.item).toBe(2);
    expect(response.body.error.details.map((d: { path: string }) => d.path)).toEqual(['facts.2.type', 'facts.3.trust']);

    // A field of an item nested deeper, and an item that is not an object, are that item's too.
    const nested = await api.request('POST', BATCH, { token: admin, body: { facts: [note('fine'), note('x', { scope: { projectId: '' } })] } });
    expect(nested.body.error).toMatchObject({ code: 'bad-input', item: 1, details: [{ path: 'facts.1.scope.projectId' }] });
    const notAnObject = await api.request('POST', BATCH, { token: admin, body: { facts: [note('fine'), note('fine'), note('fine'), 'text'] } });
    expect(notAnObject.body.error).toMatchObject({ code: 'bad-input', item: 3, details: [{ path: 'facts.3' }] });
    expect(await counts(tenantId)).toMatchObject({ facts: 0, revisions: 0 });
  });

  it('refuses the whole batch when the caller may not write one item, naming it (403, item N)', async () => {
    const { tenantId } = await api.newTenant('batch-denied');
    const member = await tokenFor({ tid: tenantId, sub: 'm-1', role: 'member', projects: { write: ['p1'] } });
    const facts = [note('mine', { scope: { projectId: 'p1' } }), note('not mine', { scope: { projectId: 'p2' } })];
    const response = await api.request('POST', BATCH, { token: member, body: { facts } });
    expect(response.status).toBe(403);
    expect(response.body.error).toMatchObject({ code: 'permission-denied', item: 1 });
    expect(response.body.error.message).toMatch(/^facts\.1: /);

    const otherTenant = await api.request('POST', BATCH, { token: member, body: { facts: [note('elsewhere', { scope: { tenantId: 'someone-else' } })] } });
    expect(otherTenant.status).toBe(403);
    expect(otherTenant.body.error).toMatchObject({ code: 'scope-mismatch', item: 0 });

    const invalidScope = await api.request('POST', BATCH, { token: member, body: { facts: [note('a', { scope: { projectId: 'p1' } }), note('b', { scope: { participantId: 'end-7' } })] } });
    expect(invalidScope.status).toBe(400);
    expect(invalidScope.body.error.details).toEqual([{ path: 'facts.1.scope', message: expect.any(String) }]);
    expect(invalidScope.body.error.item).toBe(1);
    expect(await counts(tenantId)).toMatchObject({ facts: 0 });

    // Corrected, the same batch writes both.
    const member2 = await tokenFor({ tid: tenantId, sub: 'm-1', role: 'member', projects: { write: ['p1', 'p2'] } });
    expect((await api.request('POST', BATCH, { token: member2, body: { facts } })).status).toBe(201);
    expect(await counts(tenantId)).toMatchObject({ facts: 2, revisions: 2 });
  });

  it('refuses the whole batch while someone one item names is being erased (409, item N, the erasure)', async () => {
    const { tenantId, admin } = await api.newTenant('batch-erasure');
    const erasure = await api.request('POST', '/v1/memory/erasures', { token: admin, body: { subject: { kind: 'participant', id: 'end-7' } } });
    expect(erasure.status).toBe(202);
    const facts = [
      note('someone else', { scope: { projectId: 'p1', participantId: 'end-8' } }),
      note('unnamed'),
      note('about end-7', { subjects: [{ kind: 'participant', id: 'end-7' }] }),
      note('in end-7 conversation', { scope: { projectId: 'p1', participantId: 'end-7' } }),
    ];
    const response = await api.request('POST', BATCH, { token: admin, body: { facts } });
    expect(response.status).toBe(409);
    expect(response.body.error).toMatchObject({ code: 'erasure-in-progress', item: 2, erasureId: erasure.body.id });
    expect(response.body.error.message).toMatch(/^facts\.2: /);
    expect(await counts(tenantId)).toMatchObject({ facts: 0 });
  });

  it('replays the batch to its Idempotency-Key, writing it once; another batch under the key is 422', async () => {
    const { tenantId, admin } = await api.newTenant('batch-key');
    const key = `batch-${randomUUID()}`;
    const body = { facts: [note('one'), note('two')] };
    const first = await api.request('POST', BATCH, { token: admin, body, headers: { 'idempotency-key': key } });
    expect(first.status).toBe(201);
    const retries = await Promise.all(
      Array.from({ length: 5 }, () => api.request('POST', BATCH, { token: admin, body, headers: { 'idempotency-key': key } })),
    );
    for (const retry of retries) {
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.body).toEqual(first.body);
    }
    const other = await api.request('POST', BATCH, { token: admin, body: { facts: [note('three')] }, headers: { 'idempotency-key': key } });
    expect(other.status).toBe(422);
    expect(await counts(tenantId)).toEqual({ facts: 2, revisions: 2, keys: 1 });

    // A refused batch is stored and replayed like any domain error, and wrote nothing.
    const deniedKey = `batch-${randomUUID()}`;
    const service = await tokenFor({ tid: tenantId, sub: 'svc', role: 'service', projects: { write: ['p1'] } });
    const denied = { facts: [note('ok', { scope: { projectId: 'p1' } }), note('held', { scope: { projectId: 'p1' }, retention: { legalHold: true } })] };
    const refused = await api.request('POST', BATCH, { token: service, body: denied, headers: { 'idempotency-key': deniedKey } });
    expect(refused.status).toBe(403);
    expect(refused.body.error.item).toBe(1);
    const replayed = await api.request('POST', BATCH, { token: service, body: denied, headers: { 'idempotency-key': deniedKey } });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body).toEqual(refused.body);
    expect(await counts(tenantId)).toEqual({ facts: 2, revisions: 2, keys: 2 });
  });

  it('refuses a body over 16 MiB with 413, and keeps 1 MiB for single writes', async () => {
    const { tenantId, admin } = await api.newTenant('batch-large');
    const big = 'y'.repeat(17 * 1024);
    const tooLarge = await api.request('POST', BATCH, { token: admin, body: { facts: Array.from({ length: 1000 }, () => note(big)) } });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.code).toBe('payload-too-large');
    const single = await api.request('POST', '/v1/memory/facts', { token: admin, body: note('z'.repeat(1100 * 1024)) });
    expect(single.status).toBe(413);
    expect(await counts(tenantId)).toMatchObject({ facts: 0 });
  });

  it('is in the OpenAPI document', async () => {
    const doc = await api.request('GET', '/openapi.json');
    const operation = doc.body.paths['/v1/memory/facts:batch'].post;
    expect(operation.requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/WriteFactsBody');
    expect(Object.keys(operation.responses)).toContain('201');
  });
});

describe('POST /v1/memory/facts:batch with embeddings', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi({ embeddings: true });
  });
  afterAll(() => api.close());

  it('queues the batch for vectors: every fact of it gets one', async () => {
    const { tenantId, admin } = await api.newTenant('batch-embed');
    const facts = Array.from({ length: 5 }, (_, i) => note(`spare part ${i} arrives next week`));
    expect((await api.request('POST', BATCH, { token: admin, body: { facts } })).status).toBe(201);
    await api.embeddings!.settled(tenantId);
  });
});
