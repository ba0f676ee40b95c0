/**
 * Concurrent writers of one fact over real HTTP (DESIGN §4): every supersede, verify and delete
 * writes exactly the next revision; `expectVersion` lets exactly one of racing writers win and
 * answers the others 409 `fact-changed` with `currentVersion`. The revisions are checked behind
 * the API's back with the owner connection: contiguous versions, one row each, no gaps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiResponse, type TestApi } from '../helpers/api.ts';

const FACTS = '/v1/memory/facts';
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('concurrent writes of one fact', () => {
  let api: TestApi;
  let tenantId: string;
  let token: string;

  beforeAll(async () => {
    api = await startTestApi();
    ({ tenantId, admin: token } = await api.newTenant('concurrency'));
  });
  afterAll(() => api.close());

  async function newFact(text = 'v1'): Promise<string> {
    const written = await api.request('POST', FACTS, { token, body: { type: 'acme.note', content: { text } } });
    expect(written.status).toBe(201);
    return written.body.id;
  }

  async function revisionsOf(factId: string) {
    return api.db.admin<{ version: number; content: unknown; recordedAt: Date; invalidationReason: string | null }[]>`
      select version, content, recorded_at as "recordedAt", invalidation_reason as "invalidationReason"
      from fact_revisions where tenant_id = ${tenantId} and fact_id = ${factId} order by version, recorded_at`;
  }

  async function currentRow(factId: string) {
    const [row] = await api.db.admin<{ version: number; content: unknown; invalidationReason: string | null }[]>`
      select version, content, invalidation_reason as "invalidationReason"
      from facts where tenant_id = ${tenantId} and id = ${factId}`;
    return row!;
  }

  const describeAll = (responses: ApiResponse[]) => responses.map((r) => `${r.status} ${JSON.stringify(r.body)}`).join('\n');

  it('lets exactly one of 50 parallel supersedes with expectVersion 1 win; the 49 others get 409 currentVersion 2', async () => {
    const id = await newFact();
    const responses = await Promise.all(
      range(1, 50).map((i) =>
        api.request('POST', `${FACTS}/${id}/supersede`, { token, body: { content: { text: `writer ${i}` }, expectVersion: 1 } }),
      ),
    );

    const won = responses.filter((r) => r.status === 200);
    const lost = responses.filter((r) => r.status === 409);
    expect(won, describeAll(responses)).toHaveLength(1);
    expect(lost, describeAll(responses)).toHaveLength(49);
    expect(won[0]!.body.version).toBe(2);
    for (const response of lost) {
      expect(response.body.error).toMatchObject({ code: 'fact-changed', currentVersion: 2 });
    }

    const revisions = await revisionsOf(id);
    expect(revisions.map((r) => r.version)).toEqual([1, 2]);
    expect(revisions[1]!.content).toEqual(won[0]!.body.content);
    const current = await currentRow(id);
    expect(current.version).toBe(2);
    expect(current.content).toEqual(won[0]!.body.content);
  });

  it('serialises 30 parallel supersedes without expectVersion into versions 2..31, no gaps or duplicates', async () => {
    const id = await newFact();
    const responses = await Promise.all(
      range(1, 30).map((i) => api.request('POST', `${FACTS}/${id}/supersede`, { token, body: { content: { text: `writer ${i}` } } })),
    );

    expect(responses.map((r) => r.status), describeAll(responses)).toEqual(Array(30).fill(200));
    const versions = responses.map((r) => r.body.version as number);
    expect(new Set(versions).size).toBe(30);
    expect([...versions].sort((a, b) => a - b)).toEqual(range(2, 31));

    const revisions = await revisionsOf(id);
    expect(revisions.map((r) => r.version)).toEqual(range(1, 31));
    // Each revision holds the content of the writer that was answered with its version.
    for (const response of responses) {
      expect(revisions[response.body.version - 1]!.content).toEqual(response.body.content);
    }
    // Revisions are recorded in version order (the clock is read after the row lock).
    for (let i = 1; i < revisions.length; i++) {
      expect(revisions[i]!.recordedAt.getTime()).toBeGreaterThanOrEqual(revisions[i - 1]!.recordedAt.getTime());
    }
    expect((await currentRow(id)).version).toBe(31);

    const read = await api.request('GET', `${FACTS}/${id}`, { token });
    expect(read.body.version).toBe(31);
    const listed = await api.request('GET', `${FACTS}/${id}/revisions`, { token });
    expect(listed.body.data.map((f: { version: number }) => f.version)).toEqual(range(1, 31).reverse());
  });

  /**
   * Delete and supersede, both against expectVersion 1, sent together on several facts so both
   * orders are likely to occur. Exactly one wins. When the supersede wins the delete answers
   * 409 fact-changed (currentVersion 2); when the delete wins the fact is gone, and a deleted
   * fact is not found by every route (DESIGN §4), so the supersede answers 404 fact-not-found.
   */
  it('lets exactly one of a racing delete and supersede win against expectVersion 1', async () => {
    const outcomes = { deleteWon: 0, supersedeWon: 0 };
    for (let round = 0; round < 12; round++) {
      const id = await newFact(`round ${round}`);
      const supersede = () =>
        api.request('POST', `${FACTS}/${id}/supersede`, {
          token,
          body: { content: { text: `superseded ${round}` }, expectVersion: 1 },
        });
      const remove = () => api.request('DELETE', `${FACTS}/${id}?expectVersion=1`, { token });
      // Alternate which request leaves first.
      const [superseded, deleted] =
        round % 2 === 0
          ? await Promise.all([supersede(), remove()])
          : await Promise.all([remove(), supersede()]).then(([d, s]) => [s, d] as const);
      const detail = describeAll([superseded, deleted]);

      expect([superseded.status, deleted.status].filter((s) => s === 200), detail).toHaveLength(1);
      const revisions = await revisionsOf(id);
      expect(revisions.map((r) => r.version), detail).toEqual([1, 2]);
      const current = await currentRow(id);
      expect(current.version).toBe(2);

      if (deleted.status === 200) {
        outcomes.deleteWon++;
        expect(deleted.body).toMatchObject({ version: 2, invalidationReason: 'deleted' });
        expect(superseded.status, detail).toBe(404);
        expect(superseded.body.error.code).toBe('fact-not-found');
        expect(current.invalidationReason).toBe('deleted');
        expect(revisions[1]!.invalidationReason).toBe('deleted');
        expect((await api.request('GET', `${FACTS}/${id}`, { token })).status).toBe(404);
      } else {
        outcomes.supersedeWon++;
        expect(superseded.body.version).toBe(2);
        expect(deleted.status, detail).toBe(409);
        expect(deleted.body.error).toMatchObject({ code: 'fact-changed', currentVersion: 2 });
        expect(current.invalidationReason).toBeNull();
        expect(current.content).toEqual({ text: `superseded ${round}` });
      }
    }
    expect(outcomes.deleteWon + outcomes.supersedeWon).toBe(12);
  });

  it('lets exactly one of 20 parallel deletes win; the others find the fact gone (404)', async () => {
    const id = await newFact();
    const responses = await Promise.all(range(1, 20).map(() => api.request('DELETE', `${FACTS}/${id}?expectVersion=1`, { token })));
    const won = responses.filter((r) => r.status === 200);
    expect(won, describeAll(responses)).toHaveLength(1);
    for (const response of responses.filter((r) => r.status !== 200)) {
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe('fact-not-found');
    }
    expect((await revisionsOf(id)).map((r) => r.version)).toEqual([1, 2]);
  });

  it('lets exactly one of 20 parallel verifies with expectVersion 1 win; the others get 409 currentVersion 2', async () => {
    const id = await newFact();
    const responses = await Promise.all(
      range(1, 20).map(() => api.request('POST', `${FACTS}/${id}/verify`, { token, body: { expectVersion: 1 } })),
    );
    const won = responses.filter((r) => r.status === 200);
    expect(won, describeAll(responses)).toHaveLength(1);
    expect(won[0]!.body).toMatchObject({ version: 2, trust: 'verified' });
    for (const response of responses.filter((r) => r.status !== 200)) {
      expect(response.status).toBe(409);
      expect(response.body.error).toMatchObject({ code: 'fact-changed', currentVersion: 2 });
    }
    expect((await revisionsOf(id)).map((r) => r.version)).toEqual([1, 2]);
  });
});
