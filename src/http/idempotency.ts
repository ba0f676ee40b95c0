import { createHash } from 'node:crypto';
import { and, eq, gt, sql } from 'drizzle-orm';
import type { Context } from 'hono';
import type { Principal } from '../auth/permissions.ts';
import { type Db, type Tx, withTenant } from '../db/client.ts';
import { idempotencyKeys } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { AppEnv } from './context.ts';
import { errorBody, errorStatus } from './errors.ts';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
const KEEP_HOURS = 24;

export interface Outcome {
  status: number;
  /** The response body, serialized once: stored and replayed byte for byte. */
  body: string;
  replayed: boolean;
}

/** Stable JSON (sorted keys), so the same body hashes the same whatever its key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Runs a POST with `Idempotency-Key` semantics (DESIGN §7), per tenant and key, kept 24 h:
 * - the first request runs, and its response is stored in the same transaction as its writes,
 *   so a crash leaves neither the write nor the key;
 * - a repeat by the same caller with the same body replays the stored response; another body,
 *   or another caller, → 422;
 * - a repeat while the first is still running → 409 (a transaction-scoped advisory lock tells).
 * A domain error (4xx) is stored and replayed like a success, its writes rolled back to a
 * savepoint; an unexpected error (5xx) stores nothing, so the client may retry.
 * Without the header, `run` simply runs in its own transaction.
 */
export async function idempotent(
  c: Context<AppEnv>,
  db: Db,
  principal: Principal,
  body: unknown,
  run: (tx?: Tx) => Promise<{ status: number; body: unknown }>,
): Promise<Outcome> {
  const key = c.req.header('idempotency-key');
  if (key === undefined) {
    const outcome = await run();
    return { status: outcome.status, body: JSON.stringify(outcome.body), replayed: false };
  }
  if (!KEY_PATTERN.test(key)) {
    throw new AppError('bad-input', 'Idempotency-Key: must be 1 to 255 visible ASCII characters');
  }
  // The caller is part of the request: a key reused by anyone else in the tenant (or by the same
  // subject with other grants) is another request (422), never a replay of what it may not see.
  const requestHash = createHash('sha256')
    .update(`${c.req.method}\n${c.req.path}\n${canonical(principal)}\n${canonical(body)}`)
    .digest('hex');

  return withTenant(db, principal.tenantId, async (tx) => {
    const [lock] = (await tx.execute(
      sql`select pg_try_advisory_xact_lock(hashtextextended(${`idempotency\n${principal.tenantId}\n${key}`}, 0)) as locked`,
    )) as unknown as [{ locked: boolean }];
    if (!lock.locked) {
      throw new AppError('idempotency-in-flight', 'A request with this Idempotency-Key is still running; retry shortly');
    }

    const [stored] = await tx
      .select()
      .from(idempotencyKeys)
      .where(and(eq(idempotencyKeys.key, key), gt(idempotencyKeys.expiresAt, sql`now()`)));
    if (stored) {
      if (stored.requestHash !== requestHash) {
        throw new AppError('idempotency-key-reused', 'This Idempotency-Key was used with another request');
      }
      return { status: stored.responseStatus!, body: stored.responseBody!, replayed: true };
    }

    let outcome: { status: number; body: string };
    try {
      const result = await tx.transaction((savepoint) => run(savepoint));
      outcome = { status: result.status, body: JSON.stringify(result.body) };
    } catch (error) {
      if (!(error instanceof AppError) || errorStatus[error.code] >= 500) throw error;
      outcome = {
        status: errorStatus[error.code],
        body: JSON.stringify(errorBody(error.code, error.message, c.get('requestId'), error.extra)),
      };
    }
    const expiresAt = sql`now() + make_interval(hours => ${KEEP_HOURS})`;
    await tx
      .insert(idempotencyKeys)
      .values({ tenantId: principal.tenantId, key, requestHash, responseStatus: outcome.status, responseBody: outcome.body, expiresAt })
      // An expired record of the same key is replaced.
      .onConflictDoUpdate({
        target: [idempotencyKeys.tenantId, idempotencyKeys.key],
        set: { requestHash, responseStatus: outcome.status, responseBody: outcome.body, createdAt: sql`now()`, expiresAt },
      });
    return { ...outcome, replayed: false };
  });
}
