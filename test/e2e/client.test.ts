import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Through the package's own export, as a user imports it.
import { createClient, MnemoError, type MnemoClient } from 'mnemo/client';
import { startTestApi, type TestApi, tokenFor } from '../helpers/api.ts';
import { sleep } from '../helpers/wait.ts';

describe('TypeScript client against the real server', () => {
  let api: TestApi;
  let client: MnemoClient;
  let tenantId: string;

  beforeAll(async () => {
    api = await startTestApi({ worker: true });
    const tenant = await api.newTenant('client');
    tenantId = tenant.tenantId;
    client = createClient({ baseUrl: `${api.baseUrl}/`, token: tenant.admin });
  });
  afterAll(() => api.close());

  it('writes, reads, lists, supersedes, verifies, lists revisions and deletes', async () => {
    const written = await client.memory.facts.write(
      { type: 'acme.preference', content: { text: 'prefers email' }, scope: { projectId: 'p1' }, subjects: [{ kind: 'user', id: 'u1' }] },
      { provenance: { type: 'session', id: 's-1', actor: 'agent' } },
    );
    expect(written).toMatchObject({ version: 1, scope: { tenantId, projectId: 'p1' }, derivedFrom: [{ type: 'session', id: 's-1', actor: 'agent' }] });

    expect(await client.memory.facts.read(written.id)).toEqual(written);

    const page = await client.memory.facts.list({ types: ['acme.preference', 'acme.other'], projectId: 'p1', limit: 10 });
    expect(page).toEqual({ data: [written], hasMore: false, nextCursor: null });

    const v2 = await client.memory.facts.supersede(written.id, { content: { text: 'prefers phone' }, expectVersion: 1 });
    expect(v2).toMatchObject({ id: written.id, version: 2, content: { text: 'prefers phone' } });

    const v3 = await client.memory.facts.verify(written.id, { expectVersion: 2 });
    expect(v3).toMatchObject({ version: 3, trust: 'verified' });

    expect((await client.memory.facts.read(written.id, { version: 1 })).content).toEqual({ text: 'prefers email' });
    expect((await client.memory.facts.read(written.id, { asOf: new Date() })).version).toBe(3);
    expect((await client.memory.facts.revisions(written.id)).data.map((r) => r.version)).toEqual([3, 2, 1]);

    const tombstone = await client.memory.facts.delete(written.id, { expectVersion: 3 });
    expect(tombstone).toMatchObject({ version: 4, invalidationReason: 'deleted' });
  });

  it('throws MnemoError with code, status, requestId and the envelope extras', async () => {
    const fact = await client.memory.facts.write({ type: 'acme.note', content: 'x' });
    await client.memory.facts.supersede(fact.id, { content: 'y' });
    const error = await client.memory.facts.supersede(fact.id, { content: 'z', expectVersion: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MnemoError);
    expect(error).toMatchObject({ code: 'fact-changed', status: 409, body: { currentVersion: 2 } });
    expect((error as MnemoError).requestId).toMatch(/^[0-9a-f-]{36}$/);

    const missing = await client.memory.facts.read('01890000-0000-7000-8000-000000000000').catch((e: unknown) => e);
    expect(missing).toMatchObject({ code: 'fact-not-found', status: 404 });

    const invalid = await client.memory.facts.write({ type: 'Not Valid', content: 1 }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ code: 'bad-input', status: 400, body: { details: [{ path: 'type' }] } });

    const stranger = createClient({ baseUrl: api.baseUrl, token: 'not-a-token' });
    await expect(stranger.memory.facts.list()).rejects.toMatchObject({ code: 'unauthenticated', status: 401 });
  });

  it('sends an Idempotency-Key on writes by default, so a retried call is replayed', async () => {
    const seen: (string | null)[] = [];
    const recording = createClient({
      baseUrl: api.baseUrl,
      token: () => tokenFor({ tid: tenantId, role: 'admin' }),
      fetch: async (input, init) => {
        seen.push(new Headers(init?.headers).get('idempotency-key'));
        return fetch(input, init);
      },
    });
    const first = await recording.memory.facts.write({ type: 'acme.note', content: 'once' }, { idempotencyKey: 'retry-me' });
    const again = await recording.memory.facts.write({ type: 'acme.note', content: 'once' }, { idempotencyKey: 'retry-me' });
    expect(again.id).toBe(first.id);
    await recording.memory.facts.write({ type: 'acme.note', content: 'fresh' });
    await recording.memory.facts.write({ type: 'acme.note', content: 'no key' }, { idempotencyKey: false });
    expect(seen[0]).toBe('retry-me');
    expect(seen[2]).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen[3]).toBeNull();
  });
  it('reports coverage, runs a background report, and erases a person', async () => {
    const { admin } = await api.newTenant('client-lifecycle');
    const own = createClient({ baseUrl: api.baseUrl, token: admin });
    const until = async <T extends { status: string }>(get: () => Promise<T>) => {
      for (let i = 0; i < 200; i++) {
        const current = await get();
        if (current.status === 'completed' || current.status === 'failed') return current;
        await sleep(50);
      }
      throw new Error('did not finish');
    };

    await own.memory.facts.write({ type: 'kiwi.page', content: { text: 'chat' }, memoryKind: 'episodic', episodeId: 'run-1', path: 'episodes/run-1.md' });
    expect(await own.memory.report({ episodesPrefix: 'episodes/', limit: 10 })).toMatchObject({ episodic_count: 1, unmerged_count: 1 });
    const queued = await own.memory.reports.request({ limit: 10 });
    expect(await until(() => own.memory.reports.get(queued.id))).toMatchObject({ status: 'completed', result: { unmerged_count: 1 } });
    expect((await own.memory.reports.list()).data.map((r) => r.id)).toEqual([queued.id]);

    const fact = await own.memory.facts.write({ type: 'acme.note', content: { text: 'about end-9' }, subjects: [{ kind: 'participant', id: 'end-9' }] });
    const erasure = await own.memory.erasures.request({ kind: 'participant', id: 'end-9' });
    expect(await until(() => own.memory.erasures.get(erasure.id))).toMatchObject({ status: 'completed', factsErased: 1 });
    expect((await own.memory.erasures.list()).data.map((e) => e.id)).toEqual([erasure.id]);
    await expect(own.memory.facts.read(fact.id)).rejects.toMatchObject({ code: 'fact-not-found', status: 404 });
    await expect(own.memory.erasures.resume(erasure.id)).rejects.toBeInstanceOf(MnemoError);
  });
});
