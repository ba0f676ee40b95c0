import { sql as drizzleSql } from 'drizzle-orm';
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres, { type Sql } from 'postgres';
import * as schema from './schema.ts';

export type Db = PostgresJsDatabase<typeof schema>;
/** A transaction handle, as domain verbs receive it. */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

export interface Database {
  db: Db;
  /** The raw postgres.js client, for what drizzle cannot say. */
  sql: Sql;
  close(options?: { timeoutSeconds?: number }): Promise<void>;
}

export interface ConnectOptions {
  /** Pool size. */
  max?: number;
  /** Shown in pg_stat_activity. */
  applicationName?: string;
}

export function connect(url: string, options: ConnectOptions = {}): Database {
  const sql = postgres(url, {
    max: options.max ?? 10,
    connection: { application_name: options.applicationName ?? 'mnemo' },
    onnotice: () => {},
    // Dates come back as Date; bigint counts as numbers (counts here never pass 2^53).
    types: { bigint: postgres.BigInt },
  });
  const db = drizzle(sql, { schema });
  return {
    db,
    sql,
    close: ({ timeoutSeconds = 5 } = {}) => sql.end({ timeout: timeoutSeconds }),
  };
}

const TENANT_ID_MAX = 128;

/**
 * Runs `fn` in one transaction acting for `tenantId`: row-level security then shows and accepts
 * only that tenant's rows. The setting is transaction-local (`set_config(..., true)`), so nothing
 * outlives the transaction and the API works through PgBouncer in transaction mode.
 */
export type TransactionConfig = Parameters<Db['transaction']>[1];

export async function withTenant<T>(db: Db, tenantId: string, fn: (tx: Tx) => Promise<T>, config?: TransactionConfig): Promise<T> {
  if (typeof tenantId !== 'string' || tenantId.length === 0 || tenantId.length > TENANT_ID_MAX) {
    throw new TypeError(`withTenant needs a tenant id of 1 to ${TENANT_ID_MAX} characters`);
  }
  return db.transaction(async (tx) => {
    // JIT compilation costs 30-50 ms once a plan crosses jit_above_cost, more than our queries
    // run; off for the transaction, in the same round trip as the tenant.
    await tx.execute(drizzleSql`select set_config('app.tenant_id', ${tenantId}, true), set_config('jit', 'off', true)`);
    return fn(tx);
  }, config);
}

export class UnsafeDatabaseRoleError extends Error {
  constructor(role: string, reason: string) {
    super(
      `DATABASE_URL connects as "${role}", which ${reason}, so row-level security would not isolate tenants; ` +
        'connect as a role granted mnemo_app (npm run migrate with DATABASE_ADMIN_URL provisions it)',
    );
    this.name = 'UnsafeDatabaseRoleError';
  }
}

/**
 * Refuses a connection whose role could see across tenants: a superuser, a BYPASSRLS role, or
 * the owner of the tenant tables (an owner can switch RLS off). The API and workers call this at
 * startup, so a misconfigured deployment fails loudly instead of silently losing isolation.
 */
export async function assertRestrictedRole(sql: Sql): Promise<void> {
  const [role] = await sql<{ name: string; superuser: boolean; bypassrls: boolean; owner: boolean }[]>`
    select r.rolname as name, r.rolsuper as superuser, r.rolbypassrls as bypassrls,
           coalesce(pg_has_role(current_user, c.relowner, 'USAGE'), false) as owner
    from pg_roles r
    left join pg_class c on c.oid = to_regclass('public.facts')
    where r.rolname = current_user`;
  if (!role) throw new Error('could not read the current database role');
  if (role.superuser) throw new UnsafeDatabaseRoleError(role.name, 'is a superuser');
  if (role.bypassrls) throw new UnsafeDatabaseRoleError(role.name, 'has BYPASSRLS');
  if (role.owner) throw new UnsafeDatabaseRoleError(role.name, 'owns the tenant tables');
}
