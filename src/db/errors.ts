import { AppError } from '../foundation/app-error.ts';

/**
 * Which database failures mean "the database cannot serve right now, retry shortly" rather than
 * a bug: the one mapping the API uses to answer 503 `unavailable` with `Retry-After` instead of
 * 500 (issue 10, defects 4 and 10). The request did not commit (its transaction never reached
 * COMMIT, or the connection died before the server acknowledged it), so a retry is safe with an
 * Idempotency-Key and harmless for reads.
 */

/** Node socket errors and postgres.js's own connection errors. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);

/**
 * SQLSTATEs of a server that is going away, starting up or full: 57P01 admin_shutdown (also what
 * backends say when their postmaster dies), 57P02 crash_shutdown, 57P03 cannot_connect_now
 * (starting up, in recovery), 53300 too_many_connections. Class 08 (connection exception) is
 * matched as a class.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/** 57014 query_canceled: statement_timeout (or an operator's pg_cancel_backend) stopped it. */
const CANCELED = '57014';

/**
 * Concurrent transactions got in each other's way and the server rolled this one back: 40P01
 * deadlock_detected, 40001 serialization_failure, 55P03 lock_not_available. Nothing committed,
 * and the same request run again normally succeeds.
 */
const CONTENTION_SQLSTATES = new Set(['40P01', '40001', '55P03']);

export type UnavailableReason = 'connection' | 'timeout' | 'contention';

/** Seconds a client should wait before retrying, by reason: a restart takes seconds; a timeout or a deadlock may clear at once. */
export const RETRY_AFTER_SECONDS: Record<UnavailableReason, number> = { connection: 2, timeout: 1, contention: 1 };

/**
 * Why `error` (or any error in its `cause` chain: drizzle wraps the driver's error in a
 * DrizzleQueryError) means the database is unavailable, or undefined when it means something else.
 */
export function databaseUnavailableReason(error: unknown): UnavailableReason | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (code === CANCELED) return 'timeout';
      if (CONTENTION_SQLSTATES.has(code)) return 'contention';
      if (CONNECTION_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return 'connection';
    }
    current = current.cause;
  }
  return undefined;
}

/** The database is unavailable: 503 `unavailable`, with the seconds for `Retry-After`. */
export class DatabaseUnavailable extends AppError {
  constructor(
    readonly reason: UnavailableReason,
    readonly retryAfterSeconds = RETRY_AFTER_SECONDS[reason],
  ) {
    super(
      'unavailable',
      reason === 'timeout'
        ? 'The database did not answer in time; retry shortly'
        : reason === 'contention'
          ? 'The request collided with a concurrent one and was rolled back; retry it'
          : 'The database is unavailable; retry shortly',
    );
    this.name = 'DatabaseUnavailable';
  }
}

/** The AppError to answer for a database failure, or undefined when it is not one of unavailability. */
export function databaseUnavailable(error: unknown): DatabaseUnavailable | undefined {
  if (error instanceof DatabaseUnavailable) return error;
  const reason = databaseUnavailableReason(error);
  return reason ? new DatabaseUnavailable(reason) : undefined;
}
