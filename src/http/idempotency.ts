import { createHash } from 'node:crypto';
import type { Context } from 'hono';
import type { Principal } from '../auth/permissions.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { lookUpKey, readStoredResponse, type StoredResponse, storeResponse, undoRun } from '../core/idempotency.ts';
import { type Db, type Tx, withTenant } from '../db/client.ts';
import { AppError } from '../foundation/app-error.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { OutboxRow } from '../jobs/outbox.ts';
import type { AppEnv } from './app-env.ts';
import { phase } from '../foundation/request-timing.ts';
import { errorBody, errorStatus } from './errors.ts';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

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

/**
 * Sends an idempotent outcome. Its body is already serialized JSON (stored for replays), of the
 * route's declared response or of the error envelope, so it is typed for the route as such.
 */
export function sendOutcome(c: Context<AppEnv>, outcome: Outcome): never {
  if (outcome.replayed) c.header('Idempotent-Replayed', 'true');
  return c.body(outcome.body, outcome.status as 200, { 'Content-Type': 'application/json' }) as never;
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
    .update(`${c.req.method}\n${c.req.path}\n${canonicalJson(principal)}\n${canonicalJson(body)}`)
    .digest('hex');
  const replay = (stored: StoredResponse): Outcome<T> => {
    if (stored.requestHash !== requestHash) {
      throw new AppError('idempotency-key-reused', 'This Idempotency-Key was used with another request');
    }
    return { status: stored.status, body: stored.body, replayed: true };
  };

  try {
    return await withTenant(
      db,
      principal.tenantId,
      async (tx) => {
        // A finished request's record replays at once; no record: the key's lock, tried in the same
        // round trip (with the savepoint a domain error rolls back to).
        const found = await phase('idempotency-key', () => lookUpKey(tx, principal.tenantId, key));
        if (found.stored) return replay(found.stored);
        if (!found.locked) {
          throw new AppError('idempotency-in-flight', 'A request with this Idempotency-Key is still running; retry shortly');
        }

        let outcome: { status: number; body: string; result?: T };
        try {
          const result = await run(tx);
          outcome = { status: result.status, body: JSON.stringify(result.body), result: result.body };
        } catch (error) {
          if (!(error instanceof AppError) || errorStatus[error.code] >= 500) throw error;
          await undoRun(tx);
          outcome = {
            status: errorStatus[error.code],
            body: JSON.stringify(errorBody(error.code, error.message, c.get('requestId'), error.extra)),
          };
        }
        // Not stored: the first request committed its record meanwhile.
        if (!(await phase('idempotency-key', () => storeResponse(tx, principal.tenantId, key, { requestHash, status: outcome.status, body: outcome.body })))) {
          throw new RecordedMeanwhile();
        }
        return { ...outcome, replayed: false };
      },
      undefined,
      { prepared: true },
    );
  } catch (error) {
    if (!(error instanceof RecordedMeanwhile)) throw error;
    // Rare: this run was rolled back with its transaction; the first request's record answers.
    const stored = await readStoredResponse(db, principal.tenantId, key);
    if (!stored) throw new AppError('idempotency-in-flight', 'A request with this Idempotency-Key is still running; retry shortly');
    return replay(stored);
  }
}

/**
 * A POST that records a background job (a report, an erasure) with its outbox row, under the
 * request's Idempotency-Key, and answers 202 `{id, status}`: the row goes to the queue once the
 * record has committed, and a replay hands nothing on (the first request did, or the reconciler
 * will), so a retried request queues one job.
 */
export async function queueIdempotently(
  c: Context<AppEnv>,
  { db, dispatch, what }: { db: Db; dispatch: Dispatcher; what: string },
  principal: Principal,
  body: unknown,
  record: (tx?: Tx) => Promise<{ job: { id: string; status: string }; outbox: OutboxRow }>,
): Promise<never> {
  let outbox: OutboxRow | undefined;
  const outcome = await idempotent(c, db, principal, body, async (tx) => {
    const recorded = await record(tx);
    outbox = recorded.outbox;
    return { status: 202, body: { id: recorded.job.id, status: recorded.job.status } };
  });
  if (outcome.result !== undefined && outbox) await dispatch.outbox([outbox], what);
  return sendOutcome(c, outcome);
}
