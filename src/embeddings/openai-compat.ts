import { redactUrl } from '../redact.ts';
import type { Logger } from '../log.ts';
import {
  EmbeddingDimensionChanged,
  EmbeddingModelNotFound,
  type EmbeddingProvider,
  EmbeddingRequestRejected,
  EmbeddingsUnavailable,
} from './provider.ts';

/**
 * The client for any OpenAI-compatible `POST <url>/embeddings` (OpenAI, Ollama, vLLM, TEI, and
 * `mnemo embeddings-server`), DESIGN §2.
 *
 * What is retried and what is not decides whether a job waits or stops, so:
 * - retried (then EmbeddingsUnavailable): network errors, the per-request timeout, 408, 425,
 *   429 and 5xx, and a body cut off mid-read;
 * - not retried (EmbeddingRequestRejected): any other non-2xx status (EmbeddingModelNotFound when
 *   a 404 says the model is unknown, so a typo in the model name is named as one), and a 2xx whose body is
 *   not an embeddings response (not JSON, wrong count, bad indices, non-numeric vectors). Such a
 *   body means a wrong URL or an incompatible server: the same request would get it again, and
 *   retrying would only hide the misconfiguration behind "unavailable".
 */
export interface OpenAICompatOptions {
  /** Base URL, e.g. http://127.0.0.1:11434/v1; the client posts to `<url>/embeddings`. */
  url: string;
  model: string;
  apiKey?: string | undefined;
  /** Inputs per request; requests go one after another. */
  batchSize?: number;
  /** Per request, from sending to the last byte of the answer. */
  timeoutMs?: number;
  /** Retries after the first attempt of each request. */
  maxRetries?: number;
  baseDelayMs?: number;
  fetch?: typeof globalThis.fetch;
  /** Retries are logged here (warn); without it they are silent. */
  logger?: Logger;
}

/** A Retry-After longer than this is not waited for in full: the job's own retry takes over. */
const MAX_DELAY_MS = 30_000;
/** How much of an endpoint's error text goes into an error message. */
const MAX_ERROR_TEXT = 300;

type Attempt = { ok: true; vectors: number[][] } | { ok: false; reason: string; retryAfterMs?: number; cause?: unknown };

export function createOpenAICompatProvider(options: OpenAICompatOptions): EmbeddingProvider {
  const {
    url,
    model,
    apiKey,
    batchSize = 64,
    timeoutMs = 30_000,
    maxRetries = 4,
    baseDelayMs = 250,
    fetch: fetchImpl = globalThis.fetch,
    logger,
  } = options;
  checkUrl(url);
  for (const [name, value, min] of [['batchSize', batchSize, 1], ['timeoutMs', timeoutMs, 1], ['maxRetries', maxRetries, 0], ['baseDelayMs', baseDelayMs, 0]] as const) {
    if (!Number.isInteger(value) || value < min) throw new RangeError(`${name} must be a whole number of at least ${min}, got ${value}`);
  }
  const endpoint = embeddingsEndpoint(url);
  // What logs and error messages name: the endpoint without the query string a key may sit in.
  const shownEndpoint = redactUrl(endpoint);
  const describe = `openai-compat ${model} at ${redactUrl(url)}`;
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;

  async function attempt(input: readonly string[], signal: AbortSignal | undefined): Promise<Attempt> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const forwardAbort = () => controller.abort(signal!.reason);
    signal?.addEventListener('abort', forwardAbort, { once: true });
    // A failure to connect, the timeout, or a body cut off mid-read: all retryable, unless the caller aborted.
    const transportFailure = (error: unknown): Attempt => {
      if (signal?.aborted) throw signal.reason;
      return timedOut
        ? { ok: false, reason: `no complete answer within ${timeoutMs} ms` }
        : { ok: false, reason: `could not reach the endpoint: ${describeNetworkError(error)}`, cause: error };
    };
    try {
      let response: Response;
      let text: string;
      try {
        response = await fetchImpl(endpoint, { method: 'POST', headers, body: JSON.stringify({ model, input }), signal: controller.signal });
        text = await response.text();
      } catch (error) {
        return transportFailure(error);
      }
      if (response.ok) return { ok: true, vectors: parseEmbeddings(text, input.length, shownEndpoint) };
      const detail = `${shownEndpoint} answered ${response.status}: ${errorText(text) || response.statusText}`;
      if (isRetryableStatus(response.status)) {
        return { ok: false, reason: detail, retryAfterMs: parseRetryAfter(response.headers.get('retry-after')) };
      }
      if (response.status === 404 && isModelNotFound(text)) {
        throw new EmbeddingModelNotFound(
          `The embeddings endpoint has no model "${model}" (check KINDGI_MEMORY_EMBEDDINGS_MODEL, or the model's name on the endpoint): ${detail}`,
          { status: response.status },
        );
      }
      throw new EmbeddingRequestRejected(detail, { status: response.status });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', forwardAbort);
    }
  }

  async function request(input: readonly string[], signal: AbortSignal | undefined): Promise<number[][]> {
    for (let retry = 0; ; retry++) {
      signal?.throwIfAborted();
      const outcome = await attempt(input, signal);
      if (outcome.ok) return outcome.vectors;
      if (retry >= maxRetries) {
        throw new EmbeddingsUnavailable(`Embeddings endpoint unavailable (${describe}) after ${retry + 1} attempts: ${outcome.reason}`, { cause: outcome.cause });
      }
      const delayMs = outcome.retryAfterMs ?? backoff(retry, baseDelayMs);
      logger?.warn('embeddings request failed, retrying', { endpoint: shownEndpoint, attempt: retry + 1, delayMs, reason: outcome.reason });
      await sleep(delayMs, signal);
    }
  }

  return {
    model,
    describe,
    async embed(texts, embedOptions = {}) {
      const { signal } = embedOptions;
      let dims = embedOptions.expectedDims;
      const vectors: number[][] = [];
      for (let start = 0; start < texts.length; start += batchSize) {
        const batch = await request(texts.slice(start, start + batchSize), signal);
        // Checked per batch, so a changed model fails on the first request, not after all of them.
        const got = batch[0]!.length;
        if (dims !== undefined && got !== dims) {
          throw new EmbeddingDimensionChanged(model, got, dims, embedOptions.expectedDims === undefined ? 'same-call' : 'database');
        }
        dims = got;
        vectors.push(...batch);
      }
      return vectors;
    },
  };
}

/**
 * `<url>/embeddings`, keeping the URL's query string where it belongs (some gateways take
 * `?api-version=`): `http://h/v1?x=1` → `http://h/v1/embeddings?x=1`.
 */
export function embeddingsEndpoint(url: string): string {
  const parsed = new URL(url);
  parsed.pathname = `${parsed.pathname.replace(/\/+$/, '')}/embeddings`;
  return parsed.toString();
}

function checkUrl(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError('Embeddings URL is not a URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError(`Embeddings URL must be http or https: ${redactUrl(url)}`);
  // fetch refuses such URLs on every request; saying so once, at startup, is clearer.
  if (parsed.username || parsed.password) throw new TypeError('Embeddings URL must not contain credentials; the key goes in KINDGI_MEMORY_EMBEDDINGS_API_KEY');
}

function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

/** Retry-After in seconds or as an HTTP date; undefined when absent or unreadable, so backoff applies. */
function parseRetryAfter(header: string | null, now = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  let ms: number;
  if (/^\d+$/.test(value)) ms = Number(value) * 1000;
  else {
    const date = Date.parse(value);
    if (Number.isNaN(date)) return undefined;
    ms = date - now;
  }
  return Math.min(Math.max(ms, 0), MAX_DELAY_MS);
}

/** Exponential with "equal jitter": half the delay fixed, half random, so clients that failed together spread out. */
function backoff(retry: number, baseDelayMs: number): number {
  const delay = Math.min(baseDelayMs * 2 ** retry, MAX_DELAY_MS);
  return delay / 2 + Math.random() * (delay / 2);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Node's fetch says only "fetch failed"; the useful part (ECONNREFUSED, ENOTFOUND…) is in its cause. */
function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined;
  const detail = typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : undefined;
  return detail ? `${error.message} (${detail})` : error.message;
}

/** The message out of an OpenAI-style `{error: {message}}`, Ollama/TEI `{error: "…"}` or vLLM `{message}` body, else the raw text; one line, truncated. */
function errorText(body: string): string {
  let text = body;
  try {
    const json = JSON.parse(body) as { error?: unknown; message?: unknown };
    const nested = json.error as { message?: unknown } | undefined;
    if (typeof nested?.message === 'string') text = nested.message;
    else if (typeof json.error === 'string') text = json.error;
    else if (typeof json.message === 'string') text = json.message;
  } catch {
    // Not JSON: an HTML error page or plain text, shown as it is.
  }
  return excerpt(text);
}

/**
 * Whether a 404's body says the model is unknown rather than the path: OpenAI's (and `mnemo
 * embeddings-server`'s) code model_not_found, or a message such as Ollama's `model "x" not found`.
 */
function isModelNotFound(body: string): boolean {
  try {
    const json = JSON.parse(body) as { error?: { code?: unknown } };
    if (json.error?.code === 'model_not_found') return true;
  } catch {
    return false;
  }
  return /\bmodel\b.*\b(not found|does not exist)\b/i.test(errorText(body));
}

function excerpt(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_ERROR_TEXT ? `${line.slice(0, MAX_ERROR_TEXT)}…` : line;
}

/** `{data: [{embedding, index}]}` in `index` order, with one vector per input, all of one length. */
function parseEmbeddings(text: string, count: number, endpoint: string): number[][] {
  const malformed = (what: string) =>
    new EmbeddingRequestRejected(`${endpoint} answered with ${what}, not an OpenAI-compatible embeddings response; check the URL: ${excerpt(text)}`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw malformed('a body that is not JSON');
  }
  const data = (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw malformed('no "data" array');
  if (data.length !== count) throw malformed(`${data.length} embeddings for ${count} inputs`);
  const vectors = new Array<number[] | undefined>(count);
  data.forEach((item: unknown, position) => {
    const { embedding, index = position } = (item ?? {}) as { embedding?: unknown; index?: unknown };
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= count || vectors[index]) {
      throw malformed(`a missing, repeated or out-of-range index (${String(index)})`);
    }
    if (!Array.isArray(embedding) || embedding.length === 0 || !embedding.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      throw malformed('an embedding that is not a list of numbers');
    }
    vectors[index] = embedding as number[];
  });
  const result = vectors as number[][];
  if (result.some((vector) => vector.length !== result[0]!.length)) throw malformed('vectors of different lengths');
  return result;
}
