import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
// Through the package's own export, as a user imports it.
import {
  BadInputError,
  createClient,
  FactChangedError,
  FactNotFoundError,
  IdempotencyKeyReusedError,
  isMnemoError,
  MnemoConnectionError,
  MnemoError,
  MnemoTimeoutError,
  PermissionDeniedError,
  RateLimitedError,
  type RetryEvent,
  UnauthenticatedError,
  UnavailableError,
  type ClientOptions,
  type MnemoClient,
} from 'mnemo/client';
import { createRateLimiter } from '../../src/http/rate-limit.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { startTestApi, type TestApi, tokenFor } from '../helpers/api.ts';
import { freePort } from '../../support/ports.ts';
import { sleep } from '../../support/wait.ts';

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

  it("throws the MnemoError subclass of the envelope's code, with status, requestId and the envelope extras", async () => {
    const fact = await client.memory.facts.write({ type: 'acme.note', content: 'x' });
    await client.memory.facts.supersede(fact.id, { content: 'y' });
    const error = await client.memory.facts.supersede(fact.id, { content: 'z', expectVersion: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FactChangedError);
    expect(error).toBeInstanceOf(MnemoError);
    expect(error).toMatchObject({ name: 'FactChangedError', code: 'fact-changed', status: 409, currentVersion: 2, body: { currentVersion: 2 } });
    expect((error as MnemoError).requestId).toMatch(/^[0-9a-f-]{36}$/);
    // The helper narrows: `currentVersion` type-checks only on a FactChangedError.
    expect(isMnemoError(error, 'fact-changed') && error.currentVersion).toBe(2);
    expect(isMnemoError(error, 'legal-hold')).toBe(false);
    expect(isMnemoError(new Error('x'))).toBe(false);

    const missing = await client.memory.facts.read('01890000-0000-7000-8000-000000000000').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(FactNotFoundError);
    expect(missing).toMatchObject({ code: 'fact-not-found', status: 404 });

    const invalid = await client.memory.facts.write({ type: 'Not Valid', content: 1 }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(BadInputError);
    expect(invalid).toMatchObject({ code: 'bad-input', status: 400, details: [{ path: 'type' }], body: { details: [{ path: 'type' }] } });
    const batch = await client.memory.facts
      .writeBatch([{ type: 'acme.note', content: 1 }, { type: 'acme.note', content: 2, scope: { participantId: 'p-1' } }])
      .catch((e: unknown) => e);
    expect(batch).toMatchObject({ code: 'bad-input', item: 1, details: [{ path: 'facts.1.scope' }] });

    const reused = await client.memory.facts.write({ type: 'acme.note', content: 'other' }, { idempotencyKey: 'client-reused' }).then(() =>
      client.memory.facts.write({ type: 'acme.note', content: 'another' }, { idempotencyKey: 'client-reused' }).catch((e: unknown) => e),
    );
    expect(reused).toBeInstanceOf(IdempotencyKeyReusedError);
    expect(reused).toMatchObject({ status: 422 });

    const member = createClient({ baseUrl: api.baseUrl, token: await tokenFor({ tid: tenantId, sub: 'member-1', role: 'member' }) });
    await expect(member.memory.erasures.list()).rejects.toBeInstanceOf(PermissionDeniedError);
    // Any refusal caused by one fact of a batch says which, not only bad input: here a scope the member may not write.
    const denied = await member.memory.facts
      .writeBatch([{ type: 'acme.note', content: 1, scope: { userId: 'member-1' } }, { type: 'acme.note', content: 2 }])
      .catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(PermissionDeniedError);
    expect(denied).toMatchObject({ code: 'permission-denied', item: 1 });

    const stranger = createClient({ baseUrl: api.baseUrl, token: 'not-a-token' });
    const refused = await stranger.memory.facts.list().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnauthenticatedError);
    expect(refused).toMatchObject({ code: 'unauthenticated', status: 401 });
  });

  it('sends an Idempotency-Key on every write by default, so a retried call is replayed', async () => {
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

    seen.length = 0;
    await recording.memory.facts.writeBatch([{ type: 'acme.note', content: 'batch' }]);
    await recording.memory.facts.supersede(first.id, { content: 'twice' });
    await recording.memory.facts.verify(first.id);
    expect(seen).toEqual([expect.stringMatching(/^[0-9a-f-]{36}$/), expect.stringMatching(/^[0-9a-f-]{36}$/), expect.stringMatching(/^[0-9a-f-]{36}$/)]);
    expect(new Set(seen).size).toBe(3);
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

/**
 * What happens between the client and the API, played by a proxy in front of the real server:
 * each request does what the test planned for it, in order (then it is passed on):
 * `pass` it on; `drop` the answer after the API has done the request (a reset: the write happened,
 * the client cannot know); `answer` instead of the API (a 503, a proxy's 502 page); `hang` (no
 * answer at all).
 */
type Step = { do: 'pass' } | { do: 'drop' } | { do: 'hang' } | { do: 'answer'; status: number; body?: string; headers?: Record<string, string> };

async function proxyTo(target: string) {
  const plan: Step[] = [];
  const seen: { method: string; path: string; key: string | undefined }[] = [];
  const sockets = new Set<Socket>();
  const read = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  };
  const hopByHop = new Set(['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
  const server = createServer(async (req, res) => {
    const body = await read(req);
    seen.push({ method: req.method!, path: req.url!, key: req.headers['idempotency-key'] as string | undefined });
    const step = plan.shift() ?? { do: 'pass' };
    if (step.do === 'hang') return;
    if (step.do === 'answer') {
      res.writeHead(step.status, step.headers);
      res.end(step.body ?? '');
      return;
    }
    const headers = Object.entries(req.headers).filter(([name]) => !hopByHop.has(name)) as [string, string][];
    const answer = await fetch(`${target}${req.url}`, { method: req.method, headers, body: body.length > 0 ? body : undefined });
    const answerBody = Buffer.from(await answer.arrayBuffer());
    if (step.do === 'drop') {
      req.socket.destroy();
      return;
    }
    res.writeHead(answer.status, Object.fromEntries([...answer.headers].filter(([name]) => !hopByHop.has(name))));
    res.end(answerBody);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** The next requests' fates, in order. */
    plan: (...steps: Step[]) => void plan.splice(0, plan.length, ...steps),
    /** Requests that reached the proxy since the last call, and forgets them. */
    seen: () => seen.splice(0),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const failureOf = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error);

describe('TypeScript client: retries, timeouts and answers that are not the API', () => {
  let api: TestApi;
  let proxy: Awaited<ReturnType<typeof proxyTo>>;
  let token: string;
  const retries: RetryEvent[] = [];
  /** Through the proxy, retries without waiting (the waits' lengths are tested below). */
  const clientOf = (options: Partial<ClientOptions> = {}) =>
    createClient({ baseUrl: proxy.url, token, retryDelayMs: 1, onRetry: (retry) => void retries.push(retry), ...options });

  beforeAll(async () => {
    api = await startTestApi();
    proxy = await proxyTo(api.baseUrl);
    token = (await api.newTenant('client-retries')).admin;
  });
  afterAll(async () => {
    await proxy.close();
    await api.close();
  });
  beforeEach(() => {
    proxy.seen();
    retries.length = 0;
  });

  it('retries a write whose answer was lost under the same key: the server replays it, nothing is written twice', async () => {
    const client = clientOf();
    proxy.plan({ do: 'drop' });
    const fact = await client.memory.facts.write({ type: 'acme.lost', content: 'the answer was lost' });
    const [first, second] = proxy.seen();
    expect(first).toMatchObject({ method: 'POST', path: '/v1/memory/facts' });
    expect(second!.key).toBe(first!.key);
    expect(retries.splice(0).map((r) => r.error)).toEqual([expect.any(MnemoConnectionError)]);

    proxy.plan({ do: 'drop' });
    const v2 = await client.memory.facts.supersede(fact.id, { content: 'superseded once', expectVersion: 1 });
    expect(v2.version).toBe(2);
    proxy.plan({ do: 'drop' });
    await client.memory.facts.writeBatch([{ type: 'acme.lost', content: 'batch' }]);
    proxy.plan({ do: 'drop' }, { do: 'answer', status: 503, body: '{"error":{"code":"unavailable","message":"Not ready","requestId":"r"}}' });
    await client.memory.facts.verify(fact.id, { expectVersion: 2 });
    // The first request still running under the key: asked again once it may have finished.
    proxy.plan({ do: 'answer', status: 409, body: '{"error":{"code":"idempotency-in-flight","message":"still running","requestId":"r"}}' });
    await client.memory.facts.write({ type: 'acme.lost', content: 'in flight' });
    expect(proxy.seen().length).toBe(9);

    const written = await client.memory.facts.list({ type: 'acme.lost' });
    expect(written.data.map((f) => [f.content, f.version]).sort()).toEqual([
      ['batch', 1],
      ['in flight', 1],
      ['superseded once', 3],
    ]);

    // A report request is replayed the same way: one report, however many times it was sent.
    proxy.seen();
    proxy.plan({ do: 'drop' });
    const queued = await client.memory.reports.request({ episodesPrefix: 'episodes/' });
    const [sent, resent] = proxy.seen();
    expect(resent!.key).toBe(sent!.key);
    expect((await client.memory.reports.list()).data.map((r) => r.id)).toEqual([queued.id]);
  });

  it('does not repeat what must not arrive twice after an unclear failure: a write without a key, a DELETE, a report request without a key', async () => {
    const client = clientOf();
    proxy.plan({ do: 'drop' });
    const lost = await failureOf(client.memory.facts.write({ type: 'acme.once', content: 'no key' }, { idempotencyKey: false }));
    expect(lost).toBeInstanceOf(MnemoConnectionError);
    expect(lost).toMatchObject({ attempts: 1 });
    expect((lost as Error).message).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/v1\/memory\/facts: no answer: /);
    expect(proxy.seen().length).toBe(1);
    const [written] = (await client.memory.facts.list({ type: 'acme.once' })).data;
    expect(written!.content).toBe('no key');

    proxy.plan({ do: 'drop' });
    await expect(client.memory.facts.delete(written!.id)).rejects.toMatchObject({ name: 'MnemoConnectionError', attempts: 1 });
    await expect(client.memory.facts.read(written!.id)).rejects.toBeInstanceOf(FactNotFoundError);

    proxy.plan({ do: 'answer', status: 503, body: '{"error":{"code":"unavailable","message":"Not ready","requestId":"r"}}' });
    await expect(client.memory.reports.request({}, { idempotencyKey: false })).rejects.toBeInstanceOf(UnavailableError);
    expect(proxy.seen().map((r) => r.method)).toEqual(['GET', 'DELETE', 'GET', 'POST']);
    expect(retries.splice(0)).toEqual([]);
  });

  it('retries reads after 502/503/504 and no answer, and any call after 429 (refused before it ran), waiting Retry-After up to the cap', async () => {
    const client = clientOf({ maxRetryDelayMs: 20 });
    const fact = await client.memory.facts.write({ type: 'acme.read', content: 'read me' });
    proxy.plan(
      { do: 'answer', status: 503, headers: { 'retry-after': '120' } },
      { do: 'answer', status: 502, body: '<html><h1>Bad Gateway</h1></html>' },
      { do: 'drop' },
      { do: 'answer', status: 504 },
    );
    expect((await client.memory.facts.read(fact.id, {}, { maxRetries: 4 })).id).toBe(fact.id);
    const events = retries.splice(0);
    expect(events.map((r) => [r.method, r.path, r.attempt, r.error.name])).toEqual([
      ['GET', `/v1/memory/facts/${fact.id}`, 1, 'UnavailableError'],
      ['GET', `/v1/memory/facts/${fact.id}`, 2, 'UnavailableError'],
      ['GET', `/v1/memory/facts/${fact.id}`, 3, 'MnemoConnectionError'],
      ['GET', `/v1/memory/facts/${fact.id}`, 4, 'UnavailableError'],
    ]);
    // Retry-After: 120 waits the cap, not two minutes.
    expect(events[0]).toMatchObject({ delayMs: 20, error: { retryAfter: 120, status: 503 } });

    proxy.plan({ do: 'answer', status: 429, headers: { 'retry-after': '0' } });
    expect(await client.memory.facts.delete(fact.id)).toMatchObject({ invalidationReason: 'deleted' });
    expect(proxy.seen().map((r) => r.method)).toEqual(['POST', 'GET', 'GET', 'GET', 'GET', 'GET', 'DELETE', 'DELETE']);
    expect(retries.splice(0)).toEqual([expect.objectContaining({ delayMs: 0, error: expect.any(RateLimitedError) })]);

    // Retries spent: the last refusal.
    proxy.plan(...Array.from({ length: 3 }, () => ({ do: 'answer', status: 503 }) as const));
    await expect(client.memory.facts.list({}, { maxRetries: 2 })).rejects.toMatchObject({ code: 'unavailable', status: 503 });
    expect(proxy.seen().length).toBe(3);
  });

  it("turns a refusal that is not the API's (a proxy's page) into the error of its status, with the page's words", async () => {
    const client = clientOf({ maxRetries: 0 });
    proxy.plan({ do: 'answer', status: 502, body: '<html>\n<head><title>502 Bad Gateway</title></head>\n<body><h1>Bad Gateway</h1></body></html>', headers: { 'content-type': 'text/html' } });
    const error = await failureOf(client.memory.facts.list());
    expect(error).toBeInstanceOf(UnavailableError);
    expect(error).toMatchObject({ code: 'unavailable', status: 502, body: {}, message: 'HTTP 502 Bad Gateway, without the Mnemo error envelope: 502 Bad Gateway Bad Gateway' });
    proxy.plan({ do: 'answer', status: 404, body: 'nothing here' });
    await expect(client.memory.facts.list()).rejects.toMatchObject({ name: 'NotFoundError', code: 'not-found', status: 404 });
    proxy.plan({ do: 'answer', status: 500, body: '{"not":"an envelope"}' });
    await expect(client.memory.facts.list()).rejects.toMatchObject({ name: 'InternalError', message: 'HTTP 500 Internal Server Error, without the Mnemo error envelope: {"not":"an envelope"}' });
  });

  it('gives up on a connection refused after its retries (even for a DELETE: nothing was sent), with the cause', async () => {
    const client = createClient({ baseUrl: `http://127.0.0.1:${await freePort()}`, token, retryDelayMs: 1, maxRetries: 2 });
    const error = await failureOf(client.memory.facts.delete('01890000-0000-7000-8000-000000000000'));
    expect(error).toBeInstanceOf(MnemoConnectionError);
    expect(error).not.toBeInstanceOf(MnemoTimeoutError);
    expect(error).toMatchObject({ attempts: 3, message: expect.stringContaining('no answer: ECONNREFUSED (3 attempts)') });
    expect((error as Error).cause).toBeInstanceOf(TypeError);
  });

  it('times out each attempt (client default, per call), stops at the caller’s abort, and lets its own fetch’s errors through', async () => {
    const client = clientOf({ timeoutMs: 100, maxRetries: 1 });
    proxy.plan({ do: 'hang' }, { do: 'hang' });
    const started = Date.now();
    const error = await failureOf(client.memory.facts.list());
    expect(error).toBeInstanceOf(MnemoTimeoutError);
    expect(error).toBeInstanceOf(MnemoConnectionError);
    expect(error).toMatchObject({ attempts: 2, message: expect.stringContaining('no complete answer within 100 ms (2 attempts)') });
    expect(Date.now() - started).toBeLessThan(2_000);

    proxy.plan({ do: 'hang' });
    await expect(clientOf().memory.facts.list({}, { timeoutMs: 50, maxRetries: 0 })).rejects.toMatchObject({ name: 'MnemoTimeoutError', attempts: 1 });

    proxy.plan({ do: 'hang' });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    await expect(clientOf().memory.facts.list({}, { signal: controller.signal })).rejects.toMatchObject({ name: 'AbortError' });
    proxy.plan({ do: 'hang' });
    await expect(clientOf().memory.facts.list({}, { signal: AbortSignal.timeout(50) })).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(proxy.seen().length).toBe(5);

    const own = new RangeError('my fetch says no');
    let calls = 0;
    const custom = clientOf({
      fetch: async () => {
        calls++;
        throw own;
      },
    });
    await expect(custom.memory.facts.list()).rejects.toBe(own);
    expect(calls).toBe(1);
  });

  it('meets a real rate limit: waits its Retry-After and goes on, or throws RateLimitedError with retryAfter when retries are off', async () => {
    const limited = await startTestApi({
      rateLimiter: createRateLimiter({
        limits: { writes: { perCaller: 1, perTenant: 1 }, searches: undefined, reports: undefined, reads: undefined },
        keyPrefix: 'client-test',
        logger: createLogger('error', {}),
        windowSeconds: 1,
      }),
    });
    try {
      const { admin } = await limited.newTenant('client-limited');
      const events: RetryEvent[] = [];
      const client = createClient({ baseUrl: limited.baseUrl, token: admin, onRetry: (retry) => void events.push(retry) });
      await client.memory.facts.write({ type: 'acme.note', content: 'first' });
      const refused = await failureOf(client.memory.facts.write({ type: 'acme.note', content: 'refused' }, { maxRetries: 0 }));
      expect(refused).toBeInstanceOf(RateLimitedError);
      expect(refused).toMatchObject({ code: 'rate-limited', status: 429, retryAfter: 1 });

      const started = Date.now();
      await client.memory.facts.write({ type: 'acme.note', content: 'after the wait' });
      expect(events.map((r) => [r.error.name, r.delayMs])).toEqual([['RateLimitedError', 1000]]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    } finally {
      await limited.close();
    }
  });
});
