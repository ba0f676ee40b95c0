/**
 * What the TypeScript client throws. An answer that refuses the request throws the `MnemoError`
 * subclass of its code (DESIGN §7): `catch (e) { if (e instanceof FactChangedError) … }`, or
 * `isMnemoError(e, 'fact-changed')`, which narrows to the same class. No answer at all (refused,
 * reset, the timeout) throws `MnemoConnectionError` (`MnemoTimeoutError` for the timeout), once the
 * retries allowed are spent. The caller's own abort rejects with the signal's reason, as fetch does.
 */
import { retryAfterMs } from '../core/retrying-fetch.ts';
import type { ErrorCode } from '../foundation/app-error.ts';

export type { ErrorCode };

const numberOr = (value: unknown): number | undefined => (typeof value === 'number' ? value : undefined);

/** The answer's error envelope, as its fields; a refusal without one (a proxy's page) gets the code of its status. */
export class MnemoError extends Error {
  override name = 'MnemoError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly status: number,
    readonly requestId: string | undefined,
    /** The rest of the envelope: `details`, `currentVersion`, … */
    readonly body: Record<string, unknown>,
    /** Seconds the server asked to wait before asking again (`Retry-After` of a 429 or 503), when it said. */
    readonly retryAfter?: number,
  ) {
    super(message);
    this.item = numberOr(body.item);
  }
  /** In a batch write refused because of one fact (bad input, a scope it may not write, an erasure), that fact's index. */
  readonly item: number | undefined;
}

type MnemoErrorArgs = ConstructorParameters<typeof MnemoError>;

/** A field the request got wrong. */
export interface IssueDetail {
  path: string;
  message: string;
}

export class BadInputError extends MnemoError {
  declare readonly code: 'bad-input';
  override name = 'BadInputError';
  /** Every field at fault, the first one named in the message too. */
  readonly details: IssueDetail[] = Array.isArray(this.body.details) ? (this.body.details as IssueDetail[]) : [];
}
export class UnauthenticatedError extends MnemoError {
  declare readonly code: 'unauthenticated';
  override name = 'UnauthenticatedError';
}
export class PermissionDeniedError extends MnemoError {
  declare readonly code: 'permission-denied';
  override name = 'PermissionDeniedError';
}
export class ScopeMismatchError extends MnemoError {
  declare readonly code: 'scope-mismatch';
  override name = 'ScopeMismatchError';
}
export class FactNotFoundError extends MnemoError {
  declare readonly code: 'fact-not-found';
  override name = 'FactNotFoundError';
}
export class NotFoundError extends MnemoError {
  declare readonly code: 'not-found';
  override name = 'NotFoundError';
}
export class FactChangedError extends MnemoError {
  declare readonly code: 'fact-changed';
  override name = 'FactChangedError';
  /** The fact's version now: read it, and supersede with this `expectVersion` if the change still holds. */
  readonly currentVersion: number | undefined = numberOr(this.body.currentVersion);
}
export class LegalHoldError extends MnemoError {
  declare readonly code: 'legal-hold';
  override name = 'LegalHoldError';
}
export class ErasureInProgressError extends MnemoError {
  declare readonly code: 'erasure-in-progress';
  override name = 'ErasureInProgressError';
  /** The erasure the write waits for. */
  readonly erasureId: string | undefined = typeof this.body.erasureId === 'string' ? this.body.erasureId : undefined;
}
export class IdempotencyInFlightError extends MnemoError {
  declare readonly code: 'idempotency-in-flight';
  override name = 'IdempotencyInFlightError';
}
export class PayloadTooLargeError extends MnemoError {
  declare readonly code: 'payload-too-large';
  override name = 'PayloadTooLargeError';
}
export class SemanticUnavailableError extends MnemoError {
  declare readonly code: 'semantic-unavailable';
  override name = 'SemanticUnavailableError';
}
export class IdempotencyKeyReusedError extends MnemoError {
  declare readonly code: 'idempotency-key-reused';
  override name = 'IdempotencyKeyReusedError';
}
/** Over a rate limit; `retryAfter` says for how many seconds. */
export class RateLimitedError extends MnemoError {
  declare readonly code: 'rate-limited';
  override name = 'RateLimitedError';
}
export class InternalError extends MnemoError {
  declare readonly code: 'internal';
  override name = 'InternalError';
}
export class MemoryOperationUnsupportedError extends MnemoError {
  declare readonly code: 'memory-operation-unsupported';
  override name = 'MemoryOperationUnsupportedError';
}
/** The server (or a proxy in front of it: 502, 503, 504) cannot serve now; `retryAfter` when it said. */
export class UnavailableError extends MnemoError {
  declare readonly code: 'unavailable';
  override name = 'UnavailableError';
}

/** One class per code: a code added to DESIGN §7 (src/foundation/app-error.ts) fails the type check here until it has its class. */
const errorClasses = {
  'bad-input': BadInputError,
  unauthenticated: UnauthenticatedError,
  'permission-denied': PermissionDeniedError,
  'scope-mismatch': ScopeMismatchError,
  'fact-not-found': FactNotFoundError,
  'not-found': NotFoundError,
  'fact-changed': FactChangedError,
  'legal-hold': LegalHoldError,
  'erasure-in-progress': ErasureInProgressError,
  'idempotency-in-flight': IdempotencyInFlightError,
  'payload-too-large': PayloadTooLargeError,
  'semantic-unavailable': SemanticUnavailableError,
  'idempotency-key-reused': IdempotencyKeyReusedError,
  'rate-limited': RateLimitedError,
  internal: InternalError,
  'memory-operation-unsupported': MemoryOperationUnsupportedError,
  unavailable: UnavailableError,
} satisfies { [C in ErrorCode]: new (...args: MnemoErrorArgs) => MnemoError & { readonly code: C } };

/** The error class of a code: `MnemoErrorOf<'fact-changed'>` is `FactChangedError`. */
export type MnemoErrorOf<C extends ErrorCode> = InstanceType<(typeof errorClasses)[C]>;

/** Whether `error` is a refusal by the API, or one with this code; narrows to its class. */
export function isMnemoError(error: unknown): error is MnemoError;
export function isMnemoError<C extends ErrorCode>(error: unknown, code: C): error is MnemoErrorOf<C>;
export function isMnemoError(error: unknown, code?: ErrorCode): boolean {
  return error instanceof MnemoError && (code === undefined || error.code === code);
}

/** The code a refusal without the envelope gets: most likely a proxy in front of the API answered. */
function codeOfStatus(status: number): ErrorCode {
  if (status === 401) return 'unauthenticated';
  if (status === 403) return 'permission-denied';
  if (status === 404) return 'not-found';
  if (status === 413) return 'payload-too-large';
  if (status === 429) return 'rate-limited';
  if (status === 502 || status === 503 || status === 504) return 'unavailable';
  return status >= 500 ? 'internal' : 'bad-input';
}

/** The error a refusal (`response`, its body read as `text`) throws. */
export function errorFromAnswer(response: Response, text: string): MnemoError {
  let envelope: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    const error = (parsed as { error?: unknown } | null)?.error;
    if (error && typeof error === 'object' && typeof (error as { code?: unknown }).code === 'string') envelope = error as Record<string, unknown>;
  } catch {
    // not JSON: a proxy's page, or no body
  }
  const retryAfterHeader = retryAfterMs(response.headers.get('retry-after'), Date.now(), Number.POSITIVE_INFINITY);
  const retryAfter = retryAfterHeader === undefined ? undefined : retryAfterHeader / 1000;
  const headerRequestId = response.headers.get('x-request-id') ?? undefined;
  if (envelope) {
    const { code, message, requestId, ...rest } = envelope;
    // A code this client does not know yet (a newer server) is still a MnemoError.
    const ErrorClass: new (...args: MnemoErrorArgs) => MnemoError = errorClasses[code as ErrorCode] ?? MnemoError;
    const id = typeof requestId === 'string' ? requestId : headerRequestId;
    return new ErrorClass(code as ErrorCode, String(message), response.status, id, rest, retryAfter);
  }
  const code = codeOfStatus(response.status);
  // Tags and runs of white space out: a proxy's HTML page, shortened to its words.
  const words = text.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
  const shown = words.length > 200 ? `${words.slice(0, 200)}…` : words;
  const message = `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}, without the Mnemo error envelope${shown ? `: ${shown}` : ''}`;
  const ErrorClass: new (...args: MnemoErrorArgs) => MnemoError = errorClasses[code];
  return new ErrorClass(code, message, response.status, headerRequestId, {}, retryAfter);
}

/** No answer, or not all of it, after every attempt allowed: refused, reset, a name that does not resolve. */
export class MnemoConnectionError extends Error {
  override name = 'MnemoConnectionError';
  constructor(
    message: string,
    /** Attempts made, each failed alike. */
    readonly attempts: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** No complete answer within the timeout (`timeoutMs`, per attempt). */
export class MnemoTimeoutError extends MnemoConnectionError {
  override name = 'MnemoTimeoutError';
}
