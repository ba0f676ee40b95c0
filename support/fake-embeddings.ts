/**
 * A stand-in for a third-party OpenAI-compatible embeddings endpoint (`POST <url>/embeddings`)
 * that answers at once, so what a test or a bench measures is Mnemo's side, not a model. The
 * fault suite can take it down, slow it down, or make it answer vectors of the wrong length.
 * Its vectors are a deterministic function of the text (by default a hash; the bench's clustered
 * ones through `vectorOf`), so the same text always gets the same vector; it counts requests and
 * how many times each text was embedded.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { sleep } from './wait.ts';

export type FakeMode = { kind: 'ok' } | { kind: 'slow'; delayMs: number } | { kind: 'wrong-dims'; dims: number };

export interface FakeEmbeddings {
  /** Base URL, e.g. http://127.0.0.1:41234/v1 (the client posts to `<url>/embeddings`). */
  url: string;
  model: string;
  dims: number;
  port: number;
  setMode(mode: FakeMode): void;
  /** Answers nothing at all: the port is closed (connection refused), open sockets are cut. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  /** Requests answered or in flight since start. */
  requests(): number;
  /** Requests being answered right now (a slow one holds its request open). */
  inFlight(): number;
  /** How many times each text was embedded with the configured dimension. */
  embedCount(text: string): number;
  close(): Promise<void>;
}

/** A unit vector made from the text's hash: equal texts, equal vectors; different texts, different ones. */
export function fakeVector(text: string, dims: number): number[] {
  const digest = createHash('sha256').update(text).digest();
  const vector = Array.from({ length: dims }, (_, i) => digest[i % digest.length]! / 255 - 0.5 + i * 1e-3);
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));
  return vector.map((x) => x / norm);
}

export interface FakeEmbeddingsOptions {
  model?: string;
  dims?: number;
  port?: number;
  /** The vector of a text at `dims` dimensions; default fakeVector. */
  vectorOf?: (text: string) => number[];
}

export async function startFakeEmbeddings(options: FakeEmbeddingsOptions = {}): Promise<FakeEmbeddings> {
  const model = options.model ?? 'fake-embed-8';
  const dims = options.dims ?? 8;
  const vectorOf = options.vectorOf ?? ((text: string) => fakeVector(text, dims));
  let mode: FakeMode = { kind: 'ok' };
  let requests = 0;
  let inFlight = 0;
  const counts = new Map<string, number>();
  const sockets = new Set<Socket>();

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests++;
      inFlight++;
      void (async () => {
        try {
          if (req.method !== 'POST' || !req.url?.endsWith('/embeddings')) {
            res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
            return;
          }
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { input: string | string[] };
          const input = typeof body.input === 'string' ? [body.input] : body.input;
          const current = mode;
          if (current.kind === 'slow') await sleep(current.delayMs);
          const length = current.kind === 'wrong-dims' ? current.dims : dims;
          if (length === dims) for (const text of input) counts.set(text, (counts.get(text) ?? 0) + 1);
          const vector = (text: string) => (length === dims ? vectorOf(text) : fakeVector(text, length));
          const data = input.map((text, index) => ({ object: 'embedding', index, embedding: vector(text) }));
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', model, data }));
        } catch (error) {
          if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: String(error) } }));
        } finally {
          inFlight--;
        }
      })();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const port = await listen(options.port ?? 0);
  let listening = true;

  const down = async () => {
    if (!listening) return;
    listening = false;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };

  return {
    url: `http://127.0.0.1:${port}/v1`,
    model,
    dims,
    port,
    setMode: (next) => (mode = next),
    down,
    up: async () => {
      if (listening) return;
      await listen(port);
      listening = true;
    },
    requests: () => requests,
    inFlight: () => inFlight,
    embedCount: (text) => counts.get(text) ?? 0,
    close: down,
  };
}
