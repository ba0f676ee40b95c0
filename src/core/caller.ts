import type { Principal } from '../auth/permissions.ts';
import { type Db, type TenantTransactionOptions, type TransactionConfig, type Tx, withTenant } from '../db/client.ts';

/**
 * What every domain verb receives: the database, who is acting, and optionally a transaction
 * that is already open for the principal's tenant (the idempotency layer runs the verb inside
 * its own transaction, so the stored response commits together with the write).
 */
export interface Caller {
  db: Db;
  principal: Principal;
  tx?: Tx;
}

/** Runs `fn` in the caller's transaction, or in a new one for the principal's tenant. */
export function inTenantTransaction<T>(
  caller: Caller,
  fn: (tx: Tx) => Promise<T>,
  config?: TransactionConfig,
  options?: TenantTransactionOptions,
): Promise<T> {
  return caller.tx ? fn(caller.tx) : withTenant(caller.db, caller.principal.tenantId, fn, config, options);
}
