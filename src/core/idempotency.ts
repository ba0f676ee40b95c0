import { sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/client.ts';
import { withTenant } from '../db/client.ts';
import { idempotencyKeys } from '../db/schema.ts';

/**
 * The records behind `Idempotency-Key` (DESIGN §7): a stored response per tenant and key, kept
 * 24 h, and the transaction-scoped lock a running request holds. src/http/idempotency.ts decides
 * when each statement runs; this module only says how.
 */
export const KEEP_HOURS = 24;

/** A stored response, as read with raw SQL. */
export interface StoredResponse {
  requestHash: string;
  status: number;
  body: string;
}

/** A stored record as read with raw SQL (NULLs when there is none). */
interface StoredRow {
  request_hash: string | null;
  response_status: number | null;
  response_body: string | null;
  locked?: boolean | null;
}

const storedOf = (row: StoredRow | undefined): StoredResponse | undefined =>
  row && row.request_hash !== null ? { requestHash: row.request_hash, status: row.response_status!, body: row.response_body! } : undefined;

/**
 * The key's live record, or, when there is none, whether its lock was taken; the savepoint a
 * domain error rolls back to is set too. The stored response is looked up before any lock, so
 * parallel retries of a finished request all replay it instead of locking each other out (issue
 * 10, defect 7). Only when there is no record is the key's lock tried, in the same statement: a
 * replay costs this one round trip. The savepoint is sent with it (pipelined, same round trip).
 */
export async function lookUpKey(tx: Tx, tenantId: string, key: string): Promise<{ stored: StoredResponse } | { stored?: undefined; locked: boolean }> {
  const lockKey = `idempotency\n${tenantId}\n${key}`;
  const [[found]] = (await Promise.all([
    tx.execute(sql`
      select k.request_hash, k.response_status, k.response_body,
             case when k.key is null then pg_try_advisory_xact_lock(hashtextextended(${lockKey}, 0)) end as locked
      from (select 1) as one
      left join idempotency_keys k
        on k.tenant_id = ${tenantId} and k.key = ${key} and k.expires_at > now()`),
    tx.execute(sql`savepoint idempotent_run`),
  ])) as unknown as [[StoredRow], unknown];
  const stored = storedOf(found);
  return stored ? { stored } : { locked: Boolean(found.locked) };
}

/** Undoes the run's writes (to the savepoint `lookUpKey` set); the transaction goes on. */
export async function undoRun(tx: Tx): Promise<void> {
  await tx.execute(sql`rollback to savepoint idempotent_run`);
}

/**
 * Stores the response, replacing an expired record of the same key. False when a live one is
 * there: the first request committed (and let go of the lock) between the lookup's snapshot and
 * the lock.
 */
export async function storeResponse(tx: Tx, tenantId: string, key: string, response: StoredResponse): Promise<boolean> {
  const { requestHash, status, body } = response;
  const expiresAt = sql`now() + make_interval(hours => ${KEEP_HOURS})`;
  const stored = await tx
    .insert(idempotencyKeys)
    .values({ tenantId, key, requestHash, responseStatus: status, responseBody: body, expiresAt })
    .onConflictDoUpdate({
      target: [idempotencyKeys.tenantId, idempotencyKeys.key],
      // The new row's own times (excluded.*) instead of now(): Citus refuses a volatile function in
      // DO UPDATE, and its routing needs the statement's functions evaluated before it is sent.
      set: { requestHash, responseStatus: status, responseBody: body, createdAt: sql`excluded.created_at`, expiresAt: sql`excluded.expires_at` },
      setWhere: sql`${idempotencyKeys.expiresAt} <= excluded.created_at`,
    })
    .returning({ key: idempotencyKeys.key });
  return stored.length > 0;
}

/** The key's live record, read in a transaction of its own. */
export async function readStoredResponse(db: Db, tenantId: string, key: string): Promise<StoredResponse | undefined> {
  const [row] = (await withTenant(db, tenantId, (tx) =>
    tx.execute(sql`
      select request_hash, response_status, response_body from idempotency_keys
      where tenant_id = ${tenantId} and key = ${key} and expires_at > now()`),
  )) as unknown as StoredRow[];
  return storedOf(row);
}

/**
 * Drops up to `batch` of the tenant's records past their 24 hours (the retention sweep calls it
 * until it drops fewer). A record is only ever replaced by a new request with the same key, so
 * without this the table would keep every response, and the content in it, for good.
 */
export async function dropExpiredRecords(tx: Tx, tenantId: string, batch: number): Promise<number> {
  const dropped = (await tx.execute(sql`
    delete from idempotency_keys
    where tenant_id = ${tenantId}
      and key in (select key from idempotency_keys where tenant_id = ${tenantId} and expires_at <= now() limit ${batch})
    returning key`)) as unknown as unknown[];
  return dropped.length;
}

/**
 * Drops the tenant's records whose stored response shows a fact whose content is gone (erased,
 * or purged by retention): a replay would hand back what the erasure removed. Facts are found by
 * the ids in the response text, any shape (a fact, a batch's list, a supersede), through the
 * facts' primary key. A retry with such a key afterwards runs again, as a new request would: the
 * erasure guard no longer holds then, and what it writes is the client's to answer for.
 */
export async function dropRecordsShowingRemovedFacts(tx: Tx, tenantId: string): Promise<number> {
  const dropped = (await tx.execute(sql`
    delete from idempotency_keys k
    where k.tenant_id = ${tenantId}
      and k.response_body is not null
      and exists (
        select 1
        from regexp_matches(k.response_body, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', 'g') as shown(id)
        join facts f on f.tenant_id = ${tenantId} and f.id = shown.id[1]::uuid
        where f.content is null and f.invalidation_reason in ('erased', 'deleted', 'expired'))
    returning k.key`)) as unknown as unknown[];
  return dropped.length;
}
