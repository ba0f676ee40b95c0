import { fetchWithRetry, isRetryableStatus, NoAnswer } from '../core/retrying-fetch.ts';
import { redactUrl } from '../foundation/redact.ts';
import type { Logger } from '../foundation/log.ts';
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

/** How much of an endpoint's error text goes into an error message. */
const MAX_ERROR_TEXT = 300;

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

  const answered = (response: Response, text: string) => `${shownEndpoint} answered ${response.status}: ${errorText(text) || response.statusText}`;

  async function request(input: readonly string[], signal: AbortSignal | undefined): Promise<number[][]> {
    let response: Response;
    try {
      response = await fetchWithRetry(
        endpoint,
        { method: 'POST', headers, body: JSON.stringify({ model, input }), signal },
        {
          retries: maxRetries,
          baseDelayMs,
          timeoutMs,
          fetch: fetchImpl,
          onRetry: async (retry) => {
            const reason = retry.response ? answered(retry.response, await retry.response.text()) : noAnswer(retry.failure!);
            logger?.warn('embeddings request failed, retrying', { endpoint: shownEndpoint, attempt: retry.attempt, delayMs: retry.delayMs, reason });
          },
        },
      );
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error;
      throw new EmbeddingsUnavailable(`Embeddings endpoint unavailable (${describe}) after ${error.attempts} attempts: ${noAnswer(error)}`, { cause: error.cause });
    }
    const text = await response.text();
    if (response.ok) return parseEmbeddings(text, input.length, shownEndpoint);
    const detail = answered(response, text);
    if (isRetryableStatus(response.status)) {
      throw new EmbeddingsUnavailable(`Embeddings endpoint unavailable (${describe}) after ${maxRetries + 1} attempts: ${detail}`);
    }
    if (response.status === 404 && isModelNotFound(text)) {
      throw new EmbeddingModelNotFound(
        `The embeddings endpoint has no model "${model}" (check KINDGI_MEMORY_EMBEDDINGS_MODEL, or the model's name on the endpoint): ${detail}`,
        { status: response.status },
      );
    }
    throw new EmbeddingRequestRejected(detail, { status: response.status });
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

/** A failure to connect, the timeout, or a body cut off mid-read, in the words of the error messages. */
const noAnswer = (failure: NoAnswer) => (failure.timedOut ? failure.message : `could not reach the endpoint: ${failure.message}`);

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
