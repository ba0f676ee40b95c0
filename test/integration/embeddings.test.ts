import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LOCAL_MODEL, startLocalEmbeddingsServer, type LocalEmbeddingsServer } from '../../src/embeddings/local-server.ts';
import { createOpenAICompatProvider, type OpenAICompatOptions } from '../../src/embeddings/openai-compat.ts';
import { createLogger } from '../../src/foundation/log.ts';
import {
  EmbeddingDimensionChanged,
  EmbeddingModelNotFound,
  embeddingText,
  EmbeddingRequestRejected,
  EmbeddingsUnavailable,
} from '../../src/embeddings/provider.ts';
import { failFastOnPermanent } from '../../workers/embed.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { runProcess, startProcess } from '../helpers/process.ts';
import { stopProcess } from '../../support/processes.ts';
import { removeQueuePrefix } from '../../support/redis.ts';
import { needs } from '../helpers/needs.ts';

const cosine = (a: readonly number[], b: readonly number[]) => {
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(aa * bb);
};

const failure = async (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);

describe('embeddingText', () => {
  it('joins the type (separators as spaces) and every string of the content in document order', () => {
    const content = { title: 'Spare parts', order: { id: 7, lines: ['drain pump', { part: 'door seal', qty: 2 }], urgent: true }, note: null, by: 'end-7' };
    expect(embeddingText('order.spare_parts-request', content)).toBe('order spare parts request\nSpare parts\ndrain pump\ndoor seal\nend-7');
  });

  it('takes a plain string, and skips numbers, booleans and null', () => {
    expect(embeddingText('note', 'the blender is broken')).toBe('note\nthe blender is broken');
    expect(embeddingText('metric', { value: 3, ok: false, none: null, list: [1, 2] })).toBe('metric');
  });

  it('truncates to 8000 characters, never splitting a surrogate pair', () => {
    expect(embeddingText('note', { text: 'x'.repeat(20_000) })).toHaveLength(8000);
    // 'note\n' is 5 units; 7994 'a' brings it to 7999, so the 8000th unit is the first half of 🙂.
    const text = embeddingText('note', `${'a'.repeat(7994)}🙂`);
    expect(text).toHaveLength(7999);
    expect(text.endsWith('a')).toBe(true);
  });
});

/** The real model (USE lite), loaded once, served over HTTP and reached through the provider. */
describe('local embeddings server through the OpenAI-compatible provider', () => {
  let server: LocalEmbeddingsServer;
  const provider = (options: Partial<OpenAICompatOptions> = {}) => createOpenAICompatProvider({ url: server.url, model: LOCAL_MODEL, ...options });

  beforeAll(async () => {
    server = await startLocalEmbeddingsServer({ port: 0 });
  });
  afterAll(() => server?.close());

  it('loads when compiling its WebAssembly is slower than reading its weights (a busy machine): the backend is awaited first', async () => {
    // A fresh process: the backend is global, and this one's is already up.
    const { code, stdout, stderr } = await runProcess('test/helpers/local-model-slow-wasm.ts', [], { WASM_DELAY_MS: '1000' });
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual({ dims: 512 });
  });

  it('ranks a related fact above an unrelated one, with 512 dimensions', async () => {
    const [query, related, unrelated] = await provider().embed([
      'appliance parts',
      'end-7 orders spare parts for a washing machine.',
      'The quarterly tax filing is due in April.',
    ]);
    expect(query).toHaveLength(512);
    expect(cosine(query!, related!)).toBeGreaterThan(cosine(query!, unrelated!));
  });

  it('lowercases inside the server, so case does not change the vector', async () => {
    const [mixed, lower] = await provider().embed(['End-7 Orders SPARE Parts for a Washing Machine', 'end-7 orders spare parts for a washing machine']);
    expect(cosine(mixed!, lower!)).toBeGreaterThan(0.99999);
  });

  it('sends 150 texts as 3 batches of at most 64 and returns the vectors in input order', async () => {
    const subjects = ['a refund for the blender', 'the office moves to Lyon', 'a bug in the login page', 'the dentist on Friday', 'rain all week'];
    const texts = Array.from({ length: 150 }, (_, i) => `note ${i} about ${subjects[i % subjects.length]}`);
    const before = server.requests();
    const vectors = await provider({ batchSize: 64 }).embed(texts, { expectedDims: 512 });
    expect(server.requests() - before).toBe(3);
    expect(vectors).toHaveLength(150);
    for (const i of [0, 63, 64, 65, 128, 149]) {
      const [alone] = await provider().embed([texts[i]!]);
      expect(cosine(vectors[i]!, alone!)).toBeGreaterThan(0.9999);
      // Its neighbour is about another subject: a shifted batch would match it instead.
      expect(cosine(vectors[i === 149 ? 148 : i + 1]!, alone!)).toBeLessThan(0.99);
    }
  });

  it('sends nothing for no texts', async () => {
    const before = server.requests();
    expect(await provider().embed([])).toEqual([]);
    expect(server.requests()).toBe(before);
  });

  it('refuses an empty string with 400, which the provider reports as rejected, not unavailable', async () => {
    const error = await failure(provider().embed(['fine', '']));
    expect(error).toBeInstanceOf(EmbeddingRequestRejected);
    expect(error).toMatchObject({ status: 400, message: expect.stringContaining('input[1] is empty') });
  });

  it('speaks the OpenAI wire format: a single string, base64, /v1/models, errors and 404', async () => {
    const post = (body: unknown) => fetch(`${server.url}/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const single = await post({ input: 'hello there' });
    expect(single.status).toBe(200);
    const json = (await single.json()) as { object: string; model: string; data: { object: string; index: number; embedding: number[] }[]; usage: unknown };
    expect(json).toMatchObject({ object: 'list', model: LOCAL_MODEL, usage: { prompt_tokens: 0, total_tokens: 0 } });
    expect(json.data).toHaveLength(1);
    expect(json.data[0]).toMatchObject({ object: 'embedding', index: 0 });

    const base64 = (await (await post({ input: ['hello there'], encoding_format: 'base64' })).json()) as { data: { embedding: string }[] };
    const decoded = Array.from(new Float32Array(Uint8Array.from(Buffer.from(base64.data[0]!.embedding, 'base64')).buffer));
    expect(cosine(decoded, json.data[0]!.embedding)).toBeGreaterThan(0.99999);

    for (const body of [{ input: [] }, { input: [1, 2, 3] }, { model: 5, input: 'x' }, { input: 'x'.repeat(10_001) }, 'just a string']) {
      const response = await post(body);
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: { type: 'invalid_request_error', message: expect.any(String) } });
    }
    const models = await fetch(`${server.url}/models`);
    expect(await models.json()).toMatchObject({ object: 'list', data: [{ id: LOCAL_MODEL, object: 'model' }] });
    const missing = await fetch(`${server.url}/chat/completions`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 'not_found' } });
  });

  it("answers a model it does not serve with OpenAI's 404 model_not_found, not with its own vectors", async () => {
    const before = server.requests();
    const response = await fetch(`${server.url}/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'use-lite-521', input: ['hello'] }),
    });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({
      error: { message: 'The model `use-lite-521` does not exist', type: 'invalid_request_error', param: null, code: 'model_not_found' },
    });
    expect(server.requests() - before).toBe(1);
  });

  it('has the provider name the unknown model and the setting, once, without retrying; the embed job stops for good with that message', async () => {
    const before = server.requests();
    const error = await failure(provider({ model: 'use-lite-521', maxRetries: 3, baseDelayMs: 1 }).embed(['hello']));
    expect(server.requests() - before).toBe(1);
    expect(error).toBeInstanceOf(EmbeddingModelNotFound);
    expect(error).toBeInstanceOf(EmbeddingRequestRejected);
    expect(error).toMatchObject({ status: 404 });
    expect((error as Error).message).toBe(
      `The embeddings endpoint has no model "use-lite-521" (check KINDGI_MEMORY_EMBEDDINGS_MODEL, or the model's name on the endpoint): ` +
        `${server.url}/embeddings answered 404: The model \`use-lite-521\` does not exist`,
    );
    // What the worker makes of it: an unrecoverable job failure whose reason is that message.
    expect(() => failFastOnPermanent(error)).toThrow(expect.objectContaining({ name: 'UnrecoverableError', message: (error as Error).message }));
  });

  it('a worker configured with a model the server does not have says so in its first log lines', { ...needs('redis'), timeout: 60_000 }, async () => {
    const db = await createTestDatabase();
    const prefix = `mnemo-typo-${db.name}`;
    const worker = startProcess('workers/index.ts', [], {
      DATABASE_URL: db.appUrl,
      REDIS_URL: inject('redisUrl'),
      MNEMO_QUEUE_PREFIX: prefix,
      KINDGI_MEMORY_EMBEDDINGS: 'openai-compat',
      KINDGI_MEMORY_EMBEDDINGS_URL: server.url,
      KINDGI_MEMORY_EMBEDDINGS_MODEL: 'use-lite-521',
    });
    try {
      await worker.waitFor('has no model \\"use-lite-521\\" (check KINDGI_MEMORY_EMBEDDINGS_MODEL', 30_000);
    } finally {
      await stopProcess(worker);
      await removeQueuePrefix(prefix, inject('redisUrl'));
      await db.drop();
    }
  });

  it('answers to its aliases with the same model, and lists them', async () => {
    const aliased = await startLocalEmbeddingsServer({ port: 0, aliases: ['use-lite-512-b'] });
    try {
      const models = (await (await fetch(`${aliased.url}/models`)).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toEqual([LOCAL_MODEL, 'use-lite-512-b']);
      const [viaAlias] = await createOpenAICompatProvider({ url: aliased.url, model: 'use-lite-512-b' }).embed(['penicillin allergy']);
      const [direct] = await provider().embed(['penicillin allergy']);
      expect(cosine(viaAlias!, direct!)).toBeGreaterThan(0.99999);
      const refused = await failure(createOpenAICompatProvider({ url: aliased.url, model: 'use-lite-512-c', maxRetries: 0 }).embed(['x']));
      expect(refused).toBeInstanceOf(EmbeddingModelNotFound);
    } finally {
      await aliased.close();
    }
  });
});

type Handler = (req: IncomingMessage, res: ServerResponse, attempt: number, body: string) => void;

/** A stand-in for a third-party endpoint: answers each request with `handler`, counting them. */
async function fakeEndpoint(handler: Handler) {
  let count = 0;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => handler(req, res, ++count, Buffer.concat(chunks).toString('utf8')));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/`,
    requests: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** An embeddings answer with `dims`-long vectors, item i starting with i, listed in reverse to exercise `index`. */
const answer = (res: ServerResponse, body: string, dims = 3) => {
  const { input } = JSON.parse(body) as { input: string[] };
  const data = input.map((_, index) => ({ object: 'embedding', index, embedding: [index, ...Array<number>(dims - 1).fill(0.5)] })).reverse();
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ object: 'list', data }));
};
const status = (res: ServerResponse, code: number, body: unknown = { error: { message: `failure ${code}` } }, headers: Record<string, string> = {}) => {
  res.writeHead(code, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

describe('openai-compat provider: retries, timeouts and errors', () => {
  const fakes: { close(): Promise<void> }[] = [];
  const fake = async (handler: Handler) => {
    const endpoint = await fakeEndpoint(handler);
    fakes.push(endpoint);
    return endpoint;
  };
  afterAll(() => Promise.all(fakes.map((f) => f.close())));
  const fast = { model: 'fake-model', baseDelayMs: 1, maxRetries: 3 };

  it('posts {model, input} to <url>/embeddings with the bearer key, and orders the answer by index', async () => {
    const seen: { path?: string; auth?: string; body?: unknown } = {};
    const endpoint = await fake((req, res, _n, body) => {
      Object.assign(seen, { path: req.url, auth: req.headers.authorization, body: JSON.parse(body) });
      answer(res, body);
    });
    const vectors = await createOpenAICompatProvider({ ...fast, url: endpoint.url, apiKey: 'sk-test' }).embed(['a', 'b', 'c']);
    expect(seen).toEqual({ path: '/v1/embeddings', auth: 'Bearer sk-test', body: { model: 'fake-model', input: ['a', 'b', 'c'] } });
    expect(vectors.map((v) => v[0])).toEqual([0, 1, 2]);
  });

  it('keeps the URL\'s query string on the request, and out of every log line and error message', async () => {
    const seen: string[] = [];
    const endpoint = await fake((req, res, n, body) => {
      seen.push(req.url!);
      return n === 1 ? status(res, 503) : status(res, 400, { error: { message: 'bad input' } });
    });
    const logged: string[] = [];
    const url = `${endpoint.url.replace(/\/$/, '')}?api-version=2024&api_key=sk-secret`;
    const error = await failure(
      createOpenAICompatProvider({ ...fast, url, logger: createLogger('debug', {}, (line) => logged.push(line)) }).embed(['a']),
    );
    expect(seen).toEqual(['/v1/embeddings?api-version=2024&api_key=sk-secret', '/v1/embeddings?api-version=2024&api_key=sk-secret']);
    expect(error).toBeInstanceOf(EmbeddingRequestRejected);
    expect((error as Error).message).toContain('/v1/embeddings answered 400: bad input');
    expect(logged.length).toBeGreaterThan(0);
    expect([(error as Error).message, ...logged].join('\n')).not.toContain('sk-secret');
  });

  it("reads Ollama's unknown-model 404 as a missing model, and a 404 of the path as a plain rejection", async () => {
    const ollama = await fake((_req, res) => status(res, 404, { error: 'model "nomic-embed-txt" not found, try pulling it first' }));
    const unknown = await failure(createOpenAICompatProvider({ ...fast, url: ollama.url, model: 'nomic-embed-txt' }).embed(['a']));
    expect(unknown).toBeInstanceOf(EmbeddingModelNotFound);
    expect((unknown as Error).message).toContain('has no model "nomic-embed-txt" (check KINDGI_MEMORY_EMBEDDINGS_MODEL');
    expect(ollama.requests()).toBe(1);

    const wrongPath = await fake((_req, res) => status(res, 404, { error: { message: 'Not Found' } }));
    const rejected = await failure(createOpenAICompatProvider({ ...fast, url: wrongPath.url }).embed(['a']));
    expect(rejected).toBeInstanceOf(EmbeddingRequestRejected);
    expect(rejected).not.toBeInstanceOf(EmbeddingModelNotFound);
  });

  it('retries 503 twice and succeeds on the third request', async () => {
    const endpoint = await fake((_req, res, n, body) => (n <= 2 ? status(res, 503) : answer(res, body)));
    expect(await createOpenAICompatProvider({ ...fast, url: endpoint.url }).embed(['a'])).toHaveLength(1);
    expect(endpoint.requests()).toBe(3);
  });

  it('retries 429 after its Retry-After rather than its own backoff', async () => {
    const endpoint = await fake((_req, res, n, body) => (n === 1 ? status(res, 429, { error: { message: 'slow down' } }, { 'retry-after': '0' }) : answer(res, body)));
    const started = performance.now();
    // A 20 s backoff would time the test out: only Retry-After: 0 makes it quick.
    await createOpenAICompatProvider({ ...fast, url: endpoint.url, baseDelayMs: 20_000 }).embed(['a']);
    expect(endpoint.requests()).toBe(2);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('gives up with EmbeddingsUnavailable after maxRetries + 1 requests of 500', async () => {
    const endpoint = await fake((_req, res) => status(res, 500, { error: { message: 'model crashed' } }));
    const error = await failure(createOpenAICompatProvider({ ...fast, url: endpoint.url, maxRetries: 2 }).embed(['a']));
    expect(error).toBeInstanceOf(EmbeddingsUnavailable);
    expect((error as Error).message).toMatch(/after 3 attempts: .* answered 500: model crashed/);
    expect(endpoint.requests()).toBe(3);
  });

  it('times out a silent endpoint and reports it unavailable', async () => {
    const endpoint = await fake(() => {}); // never answers
    const error = await failure(createOpenAICompatProvider({ ...fast, url: endpoint.url, timeoutMs: 100, maxRetries: 1 }).embed(['a']));
    expect(error).toBeInstanceOf(EmbeddingsUnavailable);
    expect((error as Error).message).toContain('no complete answer within 100 ms');
    expect(endpoint.requests()).toBe(2);
  });

  it.each([400, 401, 404])('does not retry %i, and says what the endpoint said', async (code) => {
    const endpoint = await fake((_req, res) => status(res, code, { error: { message: `nope ${code}`, type: 'invalid_request_error' } }));
    const error = await failure(createOpenAICompatProvider({ ...fast, url: endpoint.url }).embed(['a']));
    expect(error).toBeInstanceOf(EmbeddingRequestRejected);
    expect(error).toMatchObject({ status: code, message: expect.stringContaining(`answered ${code}: nope ${code}`) });
    expect(endpoint.requests()).toBe(1);
  });

  it('rejects, without retrying, a 200 that is not an embeddings response', async () => {
    for (const body of ['<html>login</html>', JSON.stringify({ data: [] }), JSON.stringify({ data: [{ index: 0, embedding: ['x'] }] })]) {
      const endpoint = await fake((_req, res) => res.end(body));
      const error = await failure(createOpenAICompatProvider({ ...fast, url: endpoint.url }).embed(['a']));
      expect(error).toBeInstanceOf(EmbeddingRequestRejected);
      expect((error as Error).message).toContain('not an OpenAI-compatible embeddings response');
      expect(endpoint.requests()).toBe(1);
    }
  });

  it('throws EmbeddingDimensionChanged when the vectors differ from expectedDims, or change within a call', async () => {
    // 'b' comes back with 4 dimensions, anything else with 3.
    const endpoint = await fake((_req, res, _n, body) => answer(res, body, body.includes('"b"') ? 4 : 3));
    const error = await failure(createOpenAICompatProvider({ ...fast, url: endpoint.url }).embed(['a'], { expectedDims: 768 }));
    expect(error).toBeInstanceOf(EmbeddingDimensionChanged);
    expect((error as Error).message).toBe('Model "fake-model" returned 3 dimensions, the database holds 768 for it; a new model name is needed to switch dimension');
    const midCall = await failure(createOpenAICompatProvider({ ...fast, url: endpoint.url, batchSize: 1 }).embed(['a', 'b']));
    expect(midCall).toMatchObject({ dims: 4, expectedDims: 3 });
  });

  it('reports nothing listening on the port as unavailable', async () => {
    const closed = await fakeEndpoint(() => {});
    await closed.close();
    const error = await failure(createOpenAICompatProvider({ ...fast, url: closed.url, maxRetries: 1 }).embed(['a']));
    expect(error).toBeInstanceOf(EmbeddingsUnavailable);
    expect((error as Error).message).toContain('ECONNREFUSED');
  });

  it('stops at once, without retrying, when the caller aborts', async () => {
    const endpoint = await fake((_req, res) => status(res, 503));
    const controller = new AbortController();
    const provider = createOpenAICompatProvider({ ...fast, url: endpoint.url, baseDelayMs: 20_000 });
    const pending = failure(provider.embed(['a'], { signal: controller.signal }));
    setTimeout(() => controller.abort(new Error('shutting down')), 50);
    expect(await pending).toMatchObject({ message: 'shutting down' });
    expect(endpoint.requests()).toBe(1);
  });
});
