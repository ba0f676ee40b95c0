/**
 * The TypeScript client: `import { createClient } from 'mnemo/client'` inside this repository,
 * `@mnemo-memory/client` from another project (built by clients/typescript/). Its types come from
 * the same zod schemas the server validates with, so a field the server accepts is a field the
 * client offers. A refusal throws the `MnemoError` subclass of its code (./errors.ts).
 *
 * Retries (src/core/retrying-fetch.ts): a call is asked again, after the answer's Retry-After or a
 * jittered doubling backoff, when the failure may pass and asking again cannot do a thing twice:
 * - any call, after 429 (the rate limit refuses before the route runs) or a refused connection
 *   (nothing was sent);
 * - a call that may be repeated, after 502/503/504, no answer (reset, the timeout) or 409
 *   `idempotency-in-flight`: reads (GET, retrieve, context) and the writes the server replays
 *   under their `Idempotency-Key` (write, writeBatch, supersede, verify; DESIGN §7), which carry
 *   one unless told not to, and report and erasure requests, which carry one the same way.
 * Not repeated on an unclear failure: a request sent with `idempotencyKey: false`, and
 * DELETE, whose repeat after a delete that went through answers 404: a caller told "not found"
 * for its own successful delete would be misled, so it gets the connection error and may read
 * the fact to see.
 */
import { fetchWithRetry, NoAnswer, networkCause } from '../core/retrying-fetch.ts';
import type { z } from 'zod';
import type { CoverageReport } from '../kiwifs/coverage.ts';
import type { ReportRequest, ReportStatus, ReportSummary } from '../episodes/schemas.ts';
import type { ErasureStatus, ErasureTarget } from '../lifecycle/erasure.ts';
import type { Fact, FactList, ListQuerySchema, SupersedeBodySchema, VerifyBodySchema, WriteFactBodySchema } from '../memory/facts/schemas.ts';
import type { ContextBodySchema, ContextResult, RetrieveBodySchema, RetrieveResult } from '../memory/retrieval/schemas.ts';
import { errorFromAnswer, MnemoConnectionError, type MnemoError, MnemoTimeoutError } from './errors.ts';

export {
  BadInputError,
  ErasureInProgressError,
  type ErrorCode,
  FactChangedError,
  FactNotFoundError,
  IdempotencyInFlightError,
  IdempotencyKeyReusedError,
  InternalError,
  isMnemoError,
  type IssueDetail,
  LegalHoldError,
  MemoryOperationUnsupportedError,
  MnemoConnectionError,
  MnemoError,
  type MnemoErrorOf,
  MnemoTimeoutError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RateLimitedError,
  ScopeMismatchError,
  SemanticUnavailableError,
  UnauthenticatedError,
  UnavailableError,
} from './errors.ts';
export type { ContextResult, CoverageReport, ErasureStatus, ErasureTarget, Fact, FactList, ReportRequest, ReportStatus, ReportSummary, RetrieveResult };
/** Report filters: the episodes prefix, the page of each list, and scope keys. */
export type ReportQuery = { episodesPrefix?: string; limit?: number; offset?: number } & Partial<
  Record<'orgId' | 'projectId' | 'userId' | 'participantId' | 'threadId' | 'sessionId', string>
>;
export type Page<T> = { data: T[]; hasMore: boolean; nextCursor: string | null };
export type RetrieveInput = z.input<typeof RetrieveBodySchema>;
export type ContextInput = z.input<typeof ContextBodySchema>;
export type WriteFactInput = z.input<typeof WriteFactBodySchema>;
export type SupersedeInput = z.input<typeof SupersedeBodySchema>;
export type VerifyInput = z.input<typeof VerifyBodySchema>;
/** List filters; `types` is an array here (sent comma-separated), numbers are numbers. */
export type ListInput = Omit<z.input<typeof ListQuerySchema>, 'types' | 'limit'> & { types?: string[]; limit?: number };

const DEFAULTS = {
  maxRetries: 3,
  /** Retries wait 250–500 ms, 0.5–1 s, then 1–2 s: time for a restarting API to come back. */
  retryDelayMs: 500,
  maxRetryDelayMs: 30_000,
  timeoutMs: 30_000,
};

export interface ClientOptions {
  baseUrl: string;
  /** A bearer JWT, or a function returning one (for tokens that rotate), asked once per call. */
  token: string | (() => string | Promise<string>);
  /** Defaults to the global fetch. An error it throws that is not fetch's own network failure (a TypeError) passes through as is. */
  fetch?: typeof fetch;
  /**
   * Retries after the first attempt; 0 turns them off. Default 3. Any call is retried after 429 or
   * a refused connection; reads and writes under an Idempotency-Key also after 502/503/504, no
   * answer, or 409 idempotency-in-flight. Not after an unclear failure: a request without a key,
   * and DELETE.
   */
  maxRetries?: number;
  /** The first retry waits between half of this and this; each next one twice as long. Default 500 ms. */
  retryDelayMs?: number;
  /** The longest wait before a retry, a longer Retry-After included (the retry then comes early). Default 30 s. */
  maxRetryDelayMs?: number;
  /** Each attempt's limit, from sending to the last byte of the answer; 0: none. Default 30 s. */
  timeoutMs?: number;
  /** Told of each retry before its wait, e.g. to log it. */
  onRetry?: (retry: RetryEvent) => void;
}

/** Where Mnemo is and who calls it, as the adapters' tools take it (they call Mnemo's MCP tools). */
export type MnemoConnection = Pick<ClientOptions, 'baseUrl' | 'token' | 'fetch'>;

export interface RetryEvent {
  method: string;
  /** The path asked, without the query. */
  path: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  delayMs: number;
  /** Why: the refusal (429, 503, …) or the missing answer. */
  error: MnemoError | MnemoConnectionError;
}

/** What every call takes last. */
export interface CallOptions {
  /** Aborts the call, retries and waits included; it then rejects with the signal's reason. For a limit on the whole call, `AbortSignal.timeout(ms)`. */
  signal?: AbortSignal;
  /** This call's per-attempt limit, instead of the client's. */
  timeoutMs?: number;
  /** This call's retries, instead of the client's. */
  maxRetries?: number;
}

/** Options of a POST the server replays under its `Idempotency-Key` (writes, report and erasure requests). */
export interface KeyedOptions extends CallOptions {
  /**
   * Sent as `Idempotency-Key`: a repeat within 24 h replays the first answer instead of writing
   * again, which is what makes a write safe to retry. A fresh key is made per call unless you pass
   * one (to make a retry of your own safe too), or `false` (then an unclear failure is not retried).
   */
  idempotencyKey?: string | false;
}

export interface WriteOptions extends KeyedOptions {
  /** `X-Provenance: type:id`, appended to the fact's derivedFrom. */
  provenance?: { type: string; id: string; actor?: string };
}

interface RequestSpec {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  /** Whether the request may reach the server twice without doing anything twice: a read, or a write under an Idempotency-Key. */
  repeatable: boolean;
}

function writeHeaders(options: WriteOptions = {}): Record<string, string> {
  const headers: Record<string, string> = {};
  if (options.idempotencyKey !== false) headers['Idempotency-Key'] = options.idempotencyKey ?? crypto.randomUUID();
  if (options.provenance) {
    headers['X-Provenance'] = `${options.provenance.type}:${options.provenance.id}`;
    if (options.provenance.actor) headers['X-Actor'] = options.provenance.actor;
  }
  return headers;
}

/** A write's request: repeatable when it carries a key, since the server then replays it. */
const writeRequest = (spec: Omit<RequestSpec, 'repeatable' | 'headers'>, options?: WriteOptions): RequestSpec => ({
  ...spec,
  headers: writeHeaders(options),
  repeatable: options?.idempotencyKey !== false,
});

/** Worth asking again: 429 always; for a repeatable request also a gateway or server that is away, or the same key still running. */
async function retryableAnswer(response: Response, repeatable: boolean): Promise<boolean> {
  if (response.status === 429) return true;
  if (!repeatable) return false;
  if (response.status === 502 || response.status === 503 || response.status === 504) return true;
  return response.status === 409 && (await response.clone().text()).includes('"idempotency-in-flight"');
}

/**
 * A failure of the transport: the timeout, or fetch's TypeError (a connection refused or reset, a
 * body cut off). Anything else a custom `fetch` throws is its own, and passes through.
 */
const isTransportFailure = (failure: NoAnswer) => failure.timedOut || failure.cause instanceof TypeError;

/** Refused: the request was never sent, so even a request that must not arrive twice may be tried again. */
const neverSent = (failure: NoAnswer) => networkCause(failure.cause) === 'ECONNREFUSED';

function connectionError(failure: NoAnswer, spec: RequestSpec, origin: string): MnemoConnectionError {
  const what = `${spec.method} ${origin}${spec.path}`;
  const attempts = `${failure.attempts} attempt${failure.attempts === 1 ? '' : 's'}`;
  return failure.timedOut
    ? new MnemoTimeoutError(`${what}: ${failure.message} (${attempts})`, failure.attempts)
    : new MnemoConnectionError(`${what}: no answer: ${failure.message} (${attempts})`, failure.attempts, { cause: failure.cause });
}

export function createClient(options: ClientOptions): MnemoClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');

  async function request<T>(spec: RequestSpec, call: CallOptions = {}): Promise<T> {
    const url = new URL(`${baseUrl}${spec.path}`);
    for (const [key, value] of Object.entries(spec.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const token = typeof options.token === 'function' ? await options.token() : options.token;
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json', ...spec.headers };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';
    const init: RequestInit = { method: spec.method, headers, body: spec.body === undefined ? undefined : JSON.stringify(spec.body), signal: call.signal };

    let response: Response;
    try {
      response = await fetchWithRetry(url, init, {
        retries: call.maxRetries ?? options.maxRetries ?? DEFAULTS.maxRetries,
        baseDelayMs: options.retryDelayMs ?? DEFAULTS.retryDelayMs,
        maxDelayMs: options.maxRetryDelayMs ?? DEFAULTS.maxRetryDelayMs,
        timeoutMs: call.timeoutMs ?? options.timeoutMs ?? DEFAULTS.timeoutMs,
        fetch: options.fetch,
        retryable: (answer) => retryableAnswer(answer, spec.repeatable),
        retryableFailure: (failure) => isTransportFailure(failure) && (spec.repeatable || neverSent(failure)),
        onRetry:
          options.onRetry &&
          (async ({ attempt, delayMs, response: answer, failure }) =>
            options.onRetry!({
              method: spec.method,
              path: spec.path,
              attempt,
              delayMs,
              error: answer ? errorFromAnswer(answer, await answer.text()) : connectionError(failure!, spec, url.origin),
            })),
      });
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error; // the caller's abort
      throw isTransportFailure(error) ? connectionError(error, spec, url.origin) : error.cause;
    }
    const text = await response.text();
    if (!response.ok) throw errorFromAnswer(response, text);
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return parsed as T;
  }

  const factPath = (id: string) => `/v1/memory/facts/${encodeURIComponent(id)}`;
  const get = <T>(path: string, query: RequestSpec['query'], call: CallOptions | undefined) => request<T>({ method: 'GET', path, query, repeatable: true }, call);

  return {
    memory: {
      retrieve: (input, call) => request({ method: 'POST', path: '/v1/memory/retrieve', body: input, repeatable: true }, call),
      context: (input, call) => request({ method: 'POST', path: '/v1/memory/context', body: input, repeatable: true }, call),
      report: (query = {}, call) => get('/v1/memory/report', query, call),
      reports: {
        request: (input = {}, opts) => request(writeRequest({ method: 'POST', path: '/v1/memory/reports', body: input }, opts), opts),
        get: (id, call) => get(`/v1/memory/reports/${encodeURIComponent(id)}`, {}, call),
        list: (page = {}, call) => get('/v1/memory/reports', page, call),
      },
      erasures: {
        request: (target, opts) =>
          request(
            writeRequest(
              {
                method: 'POST',
                path: '/v1/memory/erasures',
                body:
                  target.kind === 'fact'
                    ? { factId: target.id }
                    : target.kind === 'conversation'
                      ? { conversationId: target.id }
                      : { subject: { kind: target.kind, id: target.id } },
              },
              opts,
            ),
            opts,
          ),
        get: (id, call) => get(`/v1/memory/erasures/${encodeURIComponent(id)}`, {}, call),
        list: (page = {}, call) => get('/v1/memory/erasures', page, call),
        resume: (id, opts) => request(writeRequest({ method: 'POST', path: `/v1/memory/erasures/${encodeURIComponent(id)}/resume` }, opts), opts),
      },
      facts: {
        write: (input, opts) => request(writeRequest({ method: 'POST', path: '/v1/memory/facts', body: input }, opts), opts),
        writeBatch: async (inputs, opts) =>
          (await request<{ data: Fact[] }>(writeRequest({ method: 'POST', path: '/v1/memory/facts:batch', body: { facts: inputs } }, opts), opts)).data,
        read: (id, at = {}, call) => get(factPath(id), { version: at.version, asOf: at.asOf instanceof Date ? at.asOf.toISOString() : at.asOf }, call),
        list: (filters = {}, call) => get('/v1/memory/facts', { ...filters, types: filters.types?.join(',') }, call),
        supersede: (id, input, opts) => request(writeRequest({ method: 'POST', path: `${factPath(id)}/supersede`, body: input }, opts), opts),
        verify: (id, input = {}, opts) => request(writeRequest({ method: 'POST', path: `${factPath(id)}/verify`, body: input }, opts), opts),
        delete: (id, at = {}, call) => request({ method: 'DELETE', path: factPath(id), query: { expectVersion: at.expectVersion }, repeatable: false }, call),
        revisions: (id, call) => get(`${factPath(id)}/revisions`, {}, call),
      },
    },
  };
}

/** What `createClient` returns. Every method takes `CallOptions` last (`WriteOptions` for writes). */
export interface MnemoClient {
  memory: {
    /** Find facts by keyword, by meaning, or both (the default). */
    retrieve(input: RetrieveInput, call?: CallOptions): Promise<RetrieveResult>;
    /** The system text and the `<memory>` message to put in front of a model. */
    context(input: ContextInput, call?: CallOptions): Promise<ContextResult>;
    /** Which episodes no consolidated fact has merged yet (DESIGN §6). */
    report(query?: ReportQuery, call?: CallOptions): Promise<CoverageReport>;
    /** The same report as a background job, kept for the history. A request carries an Idempotency-Key, so a retry queues no second report. */
    reports: {
      request(input?: ReportRequest, opts?: KeyedOptions): Promise<{ id: string; status: ReportStatus['status'] }>;
      get(id: string, call?: CallOptions): Promise<ReportStatus>;
      list(page?: { limit?: number; cursor?: string }, call?: CallOptions): Promise<Page<ReportSummary>>;
    };
    /** Erasure of a fact, a person or a conversation (tenant admins, DESIGN §10). A request carries an Idempotency-Key, so a retry starts no second erasure. */
    erasures: {
      request(target: ErasureTarget, opts?: KeyedOptions): Promise<{ id: string; status: ErasureStatus['status'] }>;
      get(id: string, call?: CallOptions): Promise<ErasureStatus>;
      list(page?: { limit?: number; cursor?: string }, call?: CallOptions): Promise<Page<ErasureStatus>>;
      /** Runs a failed erasure again, e.g. after a legal hold was lifted. */
      resume(id: string, opts?: KeyedOptions): Promise<{ id: string; status: ErasureStatus['status'] }>;
    };
    facts: {
      write(input: WriteFactInput, opts?: WriteOptions): Promise<Fact>;
      /**
       * Writes 1 to 1,000 facts all or nothing (`POST /v1/memory/facts:batch`), in order; one
       * Idempotency-Key covers the batch. A refused item refuses the batch: the error's `item`
       * is its index. Split larger sets yourself, a key per batch.
       */
      writeBatch(inputs: readonly WriteFactInput[], opts?: WriteOptions): Promise<Fact[]>;
      /** The fact now, or as it was: at a `version`, or `asOf` a time. */
      read(id: string, at?: { version?: number; asOf?: string | Date }, call?: CallOptions): Promise<Fact>;
      list(filters?: ListInput, call?: CallOptions): Promise<FactList>;
      supersede(id: string, input: SupersedeInput, opts?: WriteOptions): Promise<Fact>;
      verify(id: string, input?: VerifyInput, opts?: WriteOptions): Promise<Fact>;
      /** Not repeated after an unclear failure: a repeat of a delete that went through answers 404 (read the fact to see). */
      delete(id: string, at?: { expectVersion?: number }, call?: CallOptions): Promise<Fact>;
      /** Every version, newest first. */
      revisions(id: string, call?: CallOptions): Promise<{ data: Fact[] }>;
    };
  };
}
