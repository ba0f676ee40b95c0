/**
 * src/core/retrying-fetch.ts against a real HTTP server on a free local port: what is asked
 * again (no answer, a cut-off body, the retryable statuses), how long it waits (Retry-After,
 * else the backoff), and when it stops (retries spent, a final refusal, the caller's abort).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { backoffMs, fetchWithRetry, NoAnswer, type Retry, type RetryPolicy, retryAfterMs } from '../../src/core/retrying-fetch.ts';

type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => void;

const servers: { close(): Promise<void> }[] = [];
afterAll(() => Promise.all(servers.map((server) => server.close())));

/** Answers the n-th request (from 1) with `handler`, and counts them. */
async function serve(handler: Handler) {
  let count = 0;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(req, res, ++count));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const handle = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/thing`,
    requests: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  servers.push(handle);
  return handle;
}

const reply = (res: ServerResponse, status: number, body = '', headers: Record<string, string> = {}) => {
  res.writeHead(status, headers);
  res.end(body);
};

const fast: RetryPolicy = { retries: 3, baseDelayMs: 1, timeoutMs: 5_000 };
const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error);

describe('fetchWithRetry', () => {
  it('asks again after 503 and 429 and returns the first success, its body read', async () => {
    const server = await serve((_req, res, n) => (n === 1 ? reply(res, 503) : n === 2 ? reply(res, 429) : reply(res, 200, 'hello')));
    const retries: Retry[] = [];
    const response = await fetchWithRetry(server.url, {}, { ...fast, onRetry: (retry) => void retries.push(retry) });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('hello');
    expect(server.requests()).toBe(3);
    expect(retries.map((retry) => [retry.attempt, retry.response?.status])).toEqual([
      [1, 503],
      [2, 429],
    ]);
  });

  it('sends the same method, headers and body on every attempt', async () => {
    const seen: string[] = [];
    const server = await serve((req, res, n) => {
      seen.push(`${req.method} ${req.headers['x-key']}`);
      reply(res, n === 1 ? 502 : 201);
    });
    const response = await fetchWithRetry(server.url, { method: 'POST', headers: { 'x-key': 'k-1' }, body: '{"a":1}' }, fast);
    expect(response.status).toBe(201);
    expect(seen).toEqual(['POST k-1', 'POST k-1']);
  });

  it('does not ask again after a refusal (400, 404) by default', async () => {
    for (const status of [400, 404]) {
      const server = await serve((_req, res) => reply(res, status, '{"error":"no"}'));
      const response = await fetchWithRetry(server.url, {}, fast);
      expect(response.status).toBe(status);
      expect(await response.json()).toEqual({ error: 'no' });
      expect(server.requests()).toBe(1);
    }
  });

  it('returns the last retryable answer once the retries are spent', async () => {
    const server = await serve((_req, res, n) => reply(res, 500, `failure ${n}`));
    const response = await fetchWithRetry(server.url, {}, { ...fast, retries: 2 });
    expect(response.status).toBe(500);
    expect(await response.text()).toBe('failure 3');
    expect(server.requests()).toBe(3);
  });

  it('asks again only what `retryable` picks, and may read the body to decide', async () => {
    const server = await serve((_req, res, n) => (n === 1 ? reply(res, 409, '{"code":"in-flight"}') : reply(res, 500)));
    const retryable = async (response: Response) => response.status === 409 && (await response.clone().text()).includes('in-flight');
    const response = await fetchWithRetry(server.url, {}, { ...fast, retryable });
    expect(response.status).toBe(500);
    expect(server.requests()).toBe(2);
  });

  it('waits Retry-After (seconds or an HTTP date) instead of its own backoff', async () => {
    for (const retryAfter of ['0', new Date(Date.now() - 60_000).toUTCString()]) {
      const server = await serve((_req, res, n) => (n === 1 ? reply(res, 429, '', { 'retry-after': retryAfter }) : reply(res, 200)));
      const delays: number[] = [];
      const started = performance.now();
      // A 20 s backoff would time the test out: only Retry-After makes it quick.
      await fetchWithRetry(server.url, {}, { ...fast, baseDelayMs: 20_000, onRetry: (retry) => void delays.push(retry.delayMs) });
      expect(delays).toEqual([0]);
      expect(performance.now() - started).toBeLessThan(2_000);
    }
    const server = await serve((_req, res, n) => (n === 1 ? reply(res, 503, '', { 'retry-after': '0.2' }) : reply(res, 200)));
    const started = performance.now();
    await fetchWithRetry(server.url, {}, fast);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  });

  it('throws NoAnswer with the cause when nothing listens, after every attempt', async () => {
    const closed = await serve(() => {});
    await closed.close();
    const retries: Retry[] = [];
    const error = await failure(fetchWithRetry(closed.url, {}, { ...fast, retries: 2, onRetry: (retry) => void retries.push(retry) }));
    expect(error).toBeInstanceOf(NoAnswer);
    expect(error).toMatchObject({ message: 'ECONNREFUSED', timedOut: false, attempts: 3 });
    expect(retries.map((retry) => [retry.attempt, retry.failure?.message])).toEqual([
      [1, 'ECONNREFUSED'],
      [2, 'ECONNREFUSED'],
    ]);
  });

  it('times out an attempt whose answer does not come, and asks again', async () => {
    const server = await serve((_req, res, n) => (n === 1 ? undefined : reply(res, 200, 'late but whole')));
    const response = await fetchWithRetry(server.url, {}, { ...fast, timeoutMs: 100 });
    expect(await response.text()).toBe('late but whole');
    expect(server.requests()).toBe(2);

    const silent = await serve(() => {});
    const error = await failure(fetchWithRetry(silent.url, {}, { ...fast, timeoutMs: 100, retries: 1 }));
    expect(error).toMatchObject({ name: 'NoAnswer', message: 'no complete answer within 100 ms', timedOut: true, attempts: 2 });
    expect(silent.requests()).toBe(2);
  });

  it('counts a body cut off mid-read as no answer, and asks again', async () => {
    const server = await serve((_req, res, n) => {
      if (n > 1) return reply(res, 200, 'whole');
      res.writeHead(200, { 'content-length': '100' });
      res.write('half');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const response = await fetchWithRetry(server.url, {}, fast);
    expect(await response.text()).toBe('whole');
    expect(server.requests()).toBe(2);
  });

  it('passes a body-less answer through', async () => {
    const server = await serve((_req, res) => reply(res, 204));
    const response = await fetchWithRetry(server.url, { method: 'DELETE' }, fast);
    expect(response.status).toBe(204);
    expect(await response.text()).toBe('');
  });

  it("stops at once with the abort's reason, in the middle of a backoff", async () => {
    const server = await serve((_req, res) => reply(res, 503));
    const controller = new AbortController();
    const pending = failure(fetchWithRetry(server.url, { signal: controller.signal }, { ...fast, baseDelayMs: 20_000 }));
    setTimeout(() => controller.abort(new Error('shutting down')), 50);
    expect(await pending).toMatchObject({ message: 'shutting down' });
    expect(server.requests()).toBe(1);
  });

  it("stops at once with the abort's reason while an answer is awaited", async () => {
    const server = await serve(() => {});
    const controller = new AbortController();
    const pending = failure(fetchWithRetry(server.url, { signal: controller.signal }, fast));
    setTimeout(() => controller.abort(new Error('shutting down')), 50);
    expect(await pending).toMatchObject({ message: 'shutting down' });
    expect(server.requests()).toBe(1);
  });
});

describe('retryAfterMs', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');

  it('reads seconds (whole or not) and HTTP dates, at most 30 s, never below 0', () => {
    expect(retryAfterMs('2', now)).toBe(2_000);
    expect(retryAfterMs(' 1.5 ', now)).toBe(1_500);
    expect(retryAfterMs('120', now)).toBe(30_000);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:10 GMT', now)).toBe(10_000);
    expect(retryAfterMs('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
  });

  it('is undefined when absent or unreadable, so the backoff applies', () => {
    expect(retryAfterMs(null, now)).toBeUndefined();
    expect(retryAfterMs('', now)).toBeUndefined();
    expect(retryAfterMs('soon', now)).toBeUndefined();
  });
});

describe('backoffMs', () => {
  it('doubles from the base, half fixed and half random, up to 30 s', () => {
    for (let i = 0; i < 200; i++) {
      for (const [retry, full] of [
        [0, 250],
        [1, 500],
        [2, 1_000],
        [10, 30_000],
      ] as const) {
        const delay = backoffMs(retry, 250);
        expect(delay).toBeGreaterThanOrEqual(full / 2);
        expect(delay).toBeLessThanOrEqual(full);
      }
    }
    const spread = new Set(Array.from({ length: 20 }, () => backoffMs(3, 1_000)));
    expect(spread.size).toBeGreaterThan(1);
  });
});
