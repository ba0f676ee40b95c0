/**
 * fetch for a client that asks again when the failure may pass: the embeddings provider
 * (`embeddings/openai-compat.ts`), `mnemo import` and the TypeScript client (`client/`, which is
 * bundled for other projects: so this file imports nothing). Each attempt reads the whole answer
 * within its timeout, so a body cut off mid-read is a failed attempt, not a broken answer. Asked
 * again:
 * - no answer at all (a connection error, the timeout, a body cut off), after the backoff, unless
 *   `retryableFailure` says otherwise (a request that must not be sent twice is asked again only
 *   when it cannot have arrived);
 * - an answer `retryable` picks (by default 408, 425, 429 and 5xx), after its Retry-After when it
 *   sends one, else after the backoff.
 * The backoff doubles from `baseDelayMs` with "equal jitter" (half fixed, half random), so clients
 * that failed together spread out; no wait is longer than `maxDelayMs`, 30 s by default (a longer
 * Retry-After is cut: the caller's own retry, such as a queued job's, takes over). A retried
 * answer is only ever one the server may answer again safely: the caller decides which, e.g. a
 * write under an idempotency key.
 */

const MAX_DELAY_MS = 30_000;

export interface RetryPolicy {
  /** Attempts after the first. */
  retries: number;
  baseDelayMs: number;
  /** Per attempt, from sending to the last byte of the answer; 0: no limit. */
  timeoutMs: number;
  /** The longest wait before a retry, backoff or Retry-After; default 30 s. */
  maxDelayMs?: number;
  /** Whether an answer is worth asking for again (its body is read, so `clone().text()` is cheap). */
  retryable?: (response: Response) => boolean | Promise<boolean>;
  /** Whether a failure without an answer is worth trying again; default every one. */
  retryableFailure?: (failure: NoAnswer) => boolean;
  /** Told of each retry before its wait, e.g. to log it. */
  onRetry?: (retry: Retry) => void | Promise<void>;
  fetch?: typeof globalThis.fetch;
}

export interface Retry {
  /** The attempt that failed, from 1. */
  attempt: number;
  delayMs: number;
  /** The answer asked for again (a copy, free to read); absent when there was none. */
  response?: Response;
  /** Why there was no answer, when there was none. */
  failure?: NoAnswer;
}

/** No answer, or not all of it: the timeout, a connection error, a body cut off mid-read. */
export class NoAnswer extends Error {
  constructor(
    message: string,
    readonly timedOut: boolean,
    /** Attempts made when this is thrown (each failed alike, the last like this). */
    readonly attempts: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'NoAnswer';
  }
}

export const isRetryableStatus = (status: number): boolean => status === 408 || status === 425 || status === 429 || status >= 500;

/**
 * fetch `input` under `policy`: the last answer (a success, a refusal, or a retryable answer once
 * the retries are spent), its body already read; or NoAnswer once the retries are spent on
 * failures without one. An abort of `init.signal` stops at once with its reason.
 */
export async function fetchWithRetry(input: string | URL | Request, init: RequestInit, policy: RetryPolicy): Promise<Response> {
  const {
    retries,
    baseDelayMs,
    timeoutMs,
    maxDelayMs = MAX_DELAY_MS,
    retryable = (response: Response) => isRetryableStatus(response.status),
    retryableFailure = () => true,
    onRetry,
  } = policy;
  const signal = init.signal ?? undefined;
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    const outcome = await attemptOnce(input, init, timeoutMs, policy.fetch ?? globalThis.fetch, attempt);
    let delayMs: number;
    if (outcome instanceof NoAnswer) {
      if (attempt > retries || !retryableFailure(outcome)) throw outcome;
      delayMs = backoffMs(attempt - 1, baseDelayMs, maxDelayMs);
      await onRetry?.({ attempt, delayMs, failure: outcome });
    } else {
      if (attempt > retries || !(await retryable(outcome))) return outcome;
      delayMs = retryAfterMs(outcome.headers.get('retry-after'), Date.now(), maxDelayMs) ?? backoffMs(attempt - 1, baseDelayMs, maxDelayMs);
      await onRetry?.({ attempt, delayMs, response: outcome.clone() });
    }
    await sleep(delayMs, signal);
  }
}

async function attemptOnce(
  input: string | URL | Request,
  init: RequestInit,
  timeoutMs: number,
  fetchImpl: typeof globalThis.fetch,
  attempt: number,
): Promise<Response | NoAnswer> {
  const signal = init.signal ?? undefined;
  const controller = new AbortController();
  let timedOut = false;
  const timer =
    timeoutMs > 0
      ? setTimeout(() => {
          timedOut = true;
          controller.abort();
        }, timeoutMs)
      : undefined;
  const forwardAbort = () => controller.abort(signal!.reason);
  signal?.addEventListener('abort', forwardAbort, { once: true });
  try {
    const response = await fetchImpl(input, { ...init, signal: controller.signal });
    const body = await response.arrayBuffer();
    // A body-less status (204, 304) takes no body, not even an empty one.
    return new Response(body.byteLength === 0 ? null : body, { status: response.status, statusText: response.statusText, headers: response.headers });
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    return timedOut
      ? new NoAnswer(`no complete answer within ${timeoutMs} ms`, true, attempt)
      : new NoAnswer(networkCause(error), false, attempt, { cause: error });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', forwardAbort);
  }
}

/** Node's fetch says only "fetch failed"; the useful part (ECONNREFUSED, ENOTFOUND…) is in its cause. */
export function networkCause(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string') return cause.message;
  return error instanceof Error ? error.message : String(error);
}

/** Retry-After in seconds or as an HTTP date, at most `maxMs` (30 s); undefined when absent or unreadable, so the backoff applies. */
export function retryAfterMs(header: string | null, now = Date.now(), maxMs = MAX_DELAY_MS): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  const ms = /^\d+(\.\d+)?$/.test(value) ? Number(value) * 1000 : Date.parse(value) - now;
  return Number.isNaN(ms) ? undefined : Math.min(Math.max(ms, 0), maxMs);
}

/** The wait before retry `retry` (0 for the first): `baseDelayMs` doubled each time, at most `maxMs` (30 s), half of it random. */
export function backoffMs(retry: number, baseDelayMs: number, maxMs = MAX_DELAY_MS): number {
  const delay = Math.min(baseDelayMs * 2 ** retry, maxMs);
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
