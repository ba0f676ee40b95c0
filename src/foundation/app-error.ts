/**
 * The error codes of the wire contract (DESIGN §7), shared by the domain and the HTTP layer.
 * The domain throws `AppError`s (or the subclasses in src/core/errors.ts); the HTTP layer
 * maps each code to its status in one table (src/http/errors.ts).
 */
export const errorCodes = [
  'bad-input',
  'unauthenticated',
  'permission-denied',
  'scope-mismatch',
  'fact-not-found',
  'not-found',
  'fact-changed',
  'legal-hold',
  'erasure-in-progress',
  'idempotency-in-flight',
  'payload-too-large',
  'semantic-unavailable',
  'idempotency-key-reused',
  'rate-limited',
  'internal',
  'memory-operation-unsupported',
  'unavailable',
] as const;

export type ErrorCode = (typeof errorCodes)[number];

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Extra fields of the error envelope, e.g. `currentVersion` or `details`. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}
