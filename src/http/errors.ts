import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { AppError, type ErrorCode } from '../foundation/app-error.ts';

/** Every error code of the wire contract and its HTTP status: the one table. */
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
} as const satisfies Record<ErrorCode, ContentfulStatusCode>;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; requestId: string } & Record<string, unknown>;
}

export function errorBody(code: ErrorCode, message: string, requestId: string, extra: Record<string, unknown> = {}): ErrorBody {
  return { error: { code, message, requestId, ...extra } };
}

export function respondWithError(c: Context, error: AppError) {
  return c.json(errorBody(error.code, error.message, c.get('requestId') ?? 'unknown', error.extra), errorStatus[error.code]);
}
