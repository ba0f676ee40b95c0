import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** Every error code of the wire contract (DESIGN §7) and its HTTP status: the one table. */
export const errorStatus = {
  'bad-input': 400,
  unauthenticated: 401,
  'permission-denied': 403,
  'scope-mismatch': 403,
  'fact-not-found': 404,
  'not-found': 404,
  'fact-changed': 409,
  'legal-hold': 409,
  'erasure-in-progress': 409,
  'idempotency-in-flight': 409,
  'payload-too-large': 413,
  'semantic-unavailable': 422,
  'idempotency-key-reused': 422,
  'rate-limited': 429,
  internal: 500,
  'memory-operation-unsupported': 501,
  unavailable: 503,
} as const satisfies Record<string, ContentfulStatusCode>;

export type ErrorCode = keyof typeof errorStatus;

/** An error that answers with the envelope `{error: {code, message, requestId, ...extra}}`. */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  get status(): ContentfulStatusCode {
    return errorStatus[this.code];
  }
}

export interface ErrorBody {
  error: { code: ErrorCode; message: string; requestId: string } & Record<string, unknown>;
}

export function errorBody(code: ErrorCode, message: string, requestId: string, extra: Record<string, unknown> = {}): ErrorBody {
  return { error: { ...extra, code, message, requestId } };
}

export function respondWithError(c: Context, error: ApiError) {
  return c.json(errorBody(error.code, error.message, c.get('requestId') ?? 'unknown', error.extra), error.status);
}
