import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Context } from 'hono';
import type { Principal } from '../auth/permissions.ts';
import { type Db, type Tx, withTenant } from '../db/client.ts';
import { idempotencyKeys } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { AppEnv } from './context.ts';
import { errorBody, errorStatus } from './errors.ts';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
const KEEP_HOURS = 24;

export interface Outcome<T = unknown> {
  status: number;
  /** The response body, serialized once: stored and replayed byte for byte. */
  body: string;
  replayed: boolean;
  /**
   * What `run` returned, typed, when this request ran it and it succeeded (its writes commit):
   * absent for a replay and for a domain error, so it also says whether there is work to hand on.
   */
  result?: T;
}

/** A stored record as read with raw SQL (NULLs when there is none). */
interface StoredRow {
  request_hash: string | null;
  response_status: number | null;
  response_body: string | null;
  locked?: boolean | null;
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

/** The first request committed its record after this one looked: this one's run is undone. */
class RecordedMeanwhile extends Error {}

/**
 * Runs a POST with `Idempotency-Key` semantics (DESIGN §7), per tenant and key, kept 24 h:
 * - the first request runs, and its response is stored in the same transaction as its writes,
 *   so a crash leaves neither the write nor the key;
 * - a repeat by the same caller with the same body replays the stored response; another body,
 *   or another caller, → 422;
 * - a repeat while the first is still running → 409 (a transaction-scoped advisory lock tells);
 *   a repeat once it has finished always replays, however many arrive at once.
 * A domain error (4xx) is stored and replayed like a success, its writes rolled back to a
 * savepoint; an unexpected error (5xx) stores nothing, so the client may retry.
 * Without the header, `run` simply runs in its own transaction.
 *
 * What a keyed write costs beyond the write: one statement that looks the key up and takes its
 * lock (sent together with the savepoint, one round trip), and the insert of the record.
 */
export async function idempotent<T>(
  c: Context<AppEnv>,
  db: Db,
  principal: Principal,
  body: unknown,
  run: (tx?: Tx) => Promise<{ status: number; body: T }>,
): Promise<Outcome<T>> {
  const key = c.req.header('idempotency-key');
  if (key === undefined) {
    const outcome = await run();
    return { status: outcome.status, body: JSON.stringify(outcome.body), replayed: false, result: outcome.body };
  }
  if (!KEY_PATTERN.test(key)) {
    throw new AppError('bad-input', 'Idempotency-Key: must be 1 to 255 visible ASCII characters');
  }
  // The caller is part of the request: a key reused by anyone else in the tenant (or by the same
  // subject with other grants) is another request (422), never a replay of what it may not see.
  const requestHash = createHash('sha256')
    .update(`${c.req.method}\n${c.req.path}\n${canonical(principal)}\n${canonical(body)}`)
    .digest('hex');
  const replay = (stored: StoredRow): Outcome<T> => {
    if (stored.request_hash !== requestHash) {
      throw new AppError('idempotency-key-reused', 'This Idempotency-Key was used with another request');
    }
    return { status: stored.response_status!, body: stored.response_body!, replayed: true };
  };

  try {
    return await withTenant(
      db,
      principal.tenantId,
      async (tx) => {
        const lockKey = `idempotency\n${principal.tenantId}\n${key}`;
        // The stored response is looked up before any lock, so parallel retries of a finished request
        // all replay it instead of locking each other out (issue 10, defect 7). Only when there is no
        // record is the key's lock tried, in the same statement: a replay costs this one round trip.
        // The savepoint a domain error rolls back to is sent with it (pipelined, same round trip).
        const [[found]] = (await Promise.all([
          tx.execute(sql`
            select k.request_hash, k.response_status, k.response_body,
                   case when k.key is null then pg_try_advisory_xact_lock(hashtextextended(${lockKey}, 0)) end as locked
            from (select 1) as one
            left join idempotency_keys k
              on k.tenant_id = ${principal.tenantId} and k.key = ${key} and k.expires_at > now()`),
          tx.execute(sql`savepoint idempotent_run`),
        ])) as unknown as [[StoredRow], unknown];
        if (found.request_hash !== null) return replay(found);
        if (!found.locked) {
          throw new AppError('idempotency-in-flight', 'A request with this Idempotency-Key is still running; retry shortly');
        }

        let outcome: { status: number; body: string; result?: T };
        try {
          const result = await run(tx);
          outcome = { status: result.status, body: JSON.stringify(result.body), result: result.body };
        } catch (error) {
          if (!(error instanceof AppError) || errorStatus[error.code] >= 500) throw error;
          await tx.execute(sql`rollback to savepoint idempotent_run`);
          outcome = {
            status: errorStatus[error.code],
            body: JSON.stringify(errorBody(error.code, error.message, c.get('requestId'), error.extra)),
          };
        }
        const expiresAt = sql`now() + make_interval(hours => ${KEEP_HOURS})`;
        const stored = await tx
          .insert(idempotencyKeys)
          .values({ tenantId: principal.tenantId, key, requestHash, responseStatus: outcome.status, responseBody: outcome.body, expiresAt })
          // An expired record of the same key is replaced; a live one means the first request
          // committed (and let go of the lock) between the lookup's snapshot and the lock.
          .onConflictDoUpdate({
            target: [idempotencyKeys.tenantId, idempotencyKeys.key],
            set: { requestHash, responseStatus: outcome.status, responseBody: outcome.body, createdAt: sql`now()`, expiresAt },
            setWhere: sql`${idempotencyKeys.expiresAt} <= now()`,
          })
          .returning({ key: idempotencyKeys.key });
        if (stored.length === 0) throw new RecordedMeanwhile();
        return { ...outcome, replayed: false };
      },
      undefined,
      { prepared: true },
    );
  } catch (error) {
    if (!(error instanceof RecordedMeanwhile)) throw error;
    // Rare: this run was rolled back with its transaction; the first request's record answers.
    const [stored] = await withTenant(db, principal.tenantId, (tx) =>
      tx.execute(sql`
        select request_hash, response_status, response_body from idempotency_keys
        where tenant_id = ${principal.tenantId} and key = ${key} and expires_at > now()`),
    ) as unknown as StoredRow[];
    if (!stored) throw new AppError('idempotency-in-flight', 'A request with this Idempotency-Key is still running; retry shortly');
    return replay(stored);
  }
}
