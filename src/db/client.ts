import { sql as drizzleSql } from 'drizzle-orm';
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres, { type Sql } from 'postgres';
import { type PoolName, type PoolTracker, trackPool } from '../foundation/metrics.ts';
import { addToPhase } from '../foundation/request-timing.ts';
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
  /**
   * How long opening a connection (TCP connect through authentication) may take before the
   * queries waiting on it fail with CONNECT_TIMEOUT. Without it postgres.js waits 30 s, and a
   * request hangs that long when the server does not answer.
   */
  connectTimeoutMs?: number;
  /**
   * `statement_timeout` of every transaction `withTenant` opens, so no single request can occupy
   * the database; 0 or absent leaves the server's setting.
   */
  statementTimeoutMs?: number;
  /**
   * Whether statements may be prepared on the server (default true): `withTenant(..., { prepared:
   * true })`'s, and postgres.js's own, which prepares every tagged-template query by default. Off
   * (MNEMO_DB_PREPARED_STATEMENTS=false) behind a pooler that cannot keep them: PgBouncer in
   * transaction mode before 1.21, or with `max_prepared_statements = 0`, hands each transaction
   * whichever server connection is free, where a statement prepared on another one does not exist.
   */
  preparedStatements?: boolean;
  /** A Unix socket file to connect through instead of the URL's host and port (the embedded database). */
  socketPath?: string;
  /**
   * Seconds before a connection is replaced (postgres.js: 30-60 min by default); 0 keeps it for
   * the life of the pool. The embedded database has one backend that every connection shares, so
   * a replaced connection's prepared statements would stay behind in it.
   */
  maxLifetimeSeconds?: number;
  /** The pool's name in the metrics (`mnemo_db_*{pool}`): `primary` (default), or `read` for a replica's. */
  pool?: PoolName;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 3000;

/**
 * Seconds before a connection that failed tries again. postgres.js's default grows with every
 * failure across the pool, up to 20 s, and is reset only by a successful connect: after an outage
 * of a few seconds, requests queued behind it hung 10-15 s, and the first ones after the database
 * came back waited as long. Capped at 1 s: a down database costs a refused connect per attempt,
 * which is cheap, and recovery is noticed within a second.
 */
export function reconnectDelaySeconds(failures: number): number {
  return Math.min(0.05 * 2 ** failures, 1) * (0.5 + Math.random() / 2);
}

/** Per-client settings that `withTenant` applies, keyed by the drizzle handle it is given. */
const tenantSettings = new WeakMap<Db, { statementTimeoutMs?: number | undefined }>();
/** Whether each client's database runs Citus (see `setLocal`), learned on its first tenant transaction. */
const citusDetections = new WeakMap<Db, Promise<boolean>>();
/** The same pool as a drizzle handle whose statements are prepared, keyed by the plain handle. */
const preparedHandles = new WeakMap<Db, Db>();
/** Each client's count of tenant transactions in flight, for the pool metrics (src/foundation/metrics.ts). */
const poolTrackers = new WeakMap<Db, PoolTracker>();

/**
 * The client with every statement prepared, inside transactions and savepoints too. drizzle hands
 * postgres.js its statements with `prepare: false`, and postgres.js then sends each one with
 * parameters in two round trips (parse and describe, then bind and execute); a prepared statement
 * costs one round trip from its second use on that connection, and no parse or plan on the server.
 */
function preparing(sql: Sql): Sql {
  return new Proxy(sql, {
    get(target, property, receiver) {
      if (property === 'unsafe') {
        return (query: string, args?: unknown[], options?: object) => target.unsafe(query, args as never, { ...options, prepare: true });
      }
      if (property === 'begin' || property === 'savepoint') {
        return (...args: unknown[]) => {
          const fn = args.pop() as (inner: Sql) => unknown;
          return (Reflect.get(target, property) as (...a: unknown[]) => unknown)(...args, (inner: Sql) => fn(preparing(inner)));
        };
      }
      return Reflect.get(target, property, receiver);
    },
  });
}

export function connect(url: string, options: ConnectOptions = {}): Database {
  const prepared = options.preparedStatements ?? true;
  const max = options.max ?? 10;
  const sql = postgres(url, {
    max,
    connection: { application_name: options.applicationName ?? 'mnemo' },
    connect_timeout: (options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS) / 1000,
    backoff: reconnectDelaySeconds,
    onnotice: () => {},
    // Dates come back as Date; bigint counts as numbers (counts here never pass 2^53).
    types: { bigint: postgres.BigInt },
    prepare: prepared,
    ...(options.socketPath ? { path: options.socketPath } : {}),
    ...(options.maxLifetimeSeconds !== undefined ? { max_lifetime: options.maxLifetimeSeconds } : {}),
  });
  const db = drizzle(sql, { schema });
  const tracker = trackPool(options.pool ?? 'primary', max);
  poolTrackers.set(db, tracker);
  if (prepared) preparedHandles.set(db, drizzle(preparing(sql), { schema }));
  if (options.statementTimeoutMs) tenantSettings.set(db, { statementTimeoutMs: options.statementTimeoutMs });
  return {
    db,
    sql,
    close: ({ timeoutSeconds = 5 } = {}) => sql.end({ timeout: timeoutSeconds }).finally(() => tracker.close()),
  };
}

const TENANT_ID_MAX = 128;

/**
 * Runs `fn` in one transaction acting for `tenantId`: row-level security then shows and accepts
 * only that tenant's rows. The setting is transaction-local (`set_config(..., true)`), so nothing
 * outlives the transaction and the API works through PgBouncer in transaction mode.
 */
export type TransactionConfig = Parameters<Db['transaction']>[1];

export interface TenantTransactionOptions {
  /**
   * Prepare the transaction's statements (when the client allows it, see ConnectOptions): for
   * hot paths whose statements are the same every time, e.g. writes. Left off for searches, whose
   * plans depend on their parameters (a tenant's size, a term's frequency) more than a generic
   * plan would know.
   */
  prepared?: boolean | undefined;
}

export async function withTenant<T>(
  db: Db,
  tenantId: string,
  fn: (tx: Tx) => Promise<T>,
  config?: TransactionConfig,
  options: TenantTransactionOptions = {},
): Promise<T> {
  if (typeof tenantId !== 'string' || tenantId.length === 0 || tenantId.length > TENANT_ID_MAX) {
    throw new TypeError(`withTenant needs a tenant id of 1 to ${TENANT_ID_MAX} characters`);
  }
  const { statementTimeoutMs } = tenantSettings.get(db) ?? {};
  const citus = await runsCitus(db);
  const handle = (options.prepared && preparedHandles.get(db)) || db;
  // Request timing (src/foundation/request-timing.ts): from asking for the transaction to its first
  // statement (a free connection, BEGIN), and from the work's end to the commit's answer.
  let asked = 0;
  let worked = 0;
  const transaction = () => handle.transaction(async (tx) => {
    addToPhase('db-begin', performance.now() - asked);
    // JIT compilation costs 30-50 ms once a plan crosses jit_above_cost, more than our queries
    // run; off for the transaction, in the same round trip as the tenant. So is the statement
    // timeout: a statement past it is cancelled by the server (57014, answered 503), so a slow
    // query or a lock wait cannot hold a connection and the database for long. Transaction-local,
    // like the tenant, so it works through PgBouncer in transaction mode.
    const settings = setLocal(tx, [
      ['app.tenant_id', tenantId],
      ['jit', 'off'],
      ...(statementTimeoutMs ? ([['statement_timeout', String(statementTimeoutMs)]] as const) : []),
    ], citus);
    if (!options.prepared) {
      const set = performance.now();
      await settings;
      addToPhase('db-settings', performance.now() - set);
      const result = await fn(tx);
      worked = performance.now();
      return result;
    }
    // Hot paths do not wait for the settings: postgres.js sends a transaction's statements in the
    // order they are started (each one microtask after it is made), and the settings are started
    // before `fn` runs, so they travel ahead of its first statement, in the same write to the
    // socket. When they fail, the transaction is aborted and their error is the one thrown.
    const [, result] = await pipelined([settings, fn(tx)] as const);
    worked = performance.now();
    return result;
  }, config);
  const committed = async () => {
    asked = performance.now();
    const result = await transaction();
    addToPhase('db-commit', performance.now() - worked);
    return result;
  };
  const tracker = poolTrackers.get(db);
  return tracker ? tracker.track(committed) : committed();
}

/** SQLSTATE 25P02: the statement ran in a transaction an earlier statement had already aborted. */
const IN_FAILED_TRANSACTION = '25P02';

/** The SQLSTATE of a query's error, drizzle's wrapper or postgres.js's own. */
const sqlState = (error: unknown): string | undefined => {
  const e = error as { code?: unknown; cause?: { code?: unknown } } | undefined;
  const code = typeof e?.code === 'string' ? e.code : e?.cause?.code;
  return typeof code === 'string' ? code : undefined;
};

/**
 * Waits for statements sent together in one transaction (pipelined: started in order, without
 * awaiting each) and, when any failed, throws the error that aborted the transaction. The others
 * then fail with "current transaction is aborted" (25P02), which says nothing, and may reject
 * first, since an error reaches a caller after a different number of async hops.
 */
export async function pipelined<T extends readonly unknown[]>(statements: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(statements);
  const failures = settled.filter((result): result is PromiseRejectedResult => result.status === 'rejected').map((result) => result.reason);
  // The cause, not its echo: a statement sent after it (as a conditional one is) fails with 25P02.
  const cause = failures.find((error) => sqlState(error) !== IN_FAILED_TRANSACTION) ?? failures[0];
  if (cause !== undefined) throw cause;
  return settled.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Transactions of clients whose database runs Citus (see `setLocal`). */
const citusTransactions = new WeakSet<object>();

/** Whether `tx` (a `withTenant` transaction) runs on a Citus coordinator. */
export const onCitus = (tx: Tx): boolean => citusTransactions.has(tx);

/**
 * Sets configuration parameters for the rest of the transaction, wherever its statements run, and
 * returns at once with the statements started, so that any statement started after the call
 * follows them (await it, or let it travel pipelined ahead of those, as `withTenant` does).
 *
 * On one PostgreSQL that is one `select set_config(…, true), …`. On Citus the settings must reach
 * the worker nodes too, where a distributed statement runs in the worker's own session: the
 * tenant that each shard's row-level-security policy reads, a search's HNSW settings, a report's
 * work_mem. `set_config()` is a function call Citus does not forward; `SET LOCAL` is forwarded to
 * every worker the transaction touches once `citus.propagate_set_commands` is `local` (and stays
 * transaction-local, so PgBouncer in transaction mode still works). SET takes no parameters, so
 * the values are literals here: quoted (standard_conforming_strings is on, so only ' is special;
 * a NUL is refused), and the names are this code's own.
 */
export function setLocal(tx: Tx, settings: readonly (readonly [name: string, value: string])[], citus = citusTransactions.has(tx)): Promise<unknown> {
  for (const [name] of settings) {
    if (!/^[a-z_]+(\.[a-z_]+)?$/.test(name)) throw new TypeError(`setLocal: not a parameter name: ${name}`);
  }
  if (!citus) {
    // The names are part of the statement's text (one text per set of names, prepared once; the
    // tenant's is the statement pg_stat_statements counts tenant transactions by), the values
    // parameters. then() starts it now: drizzle's query is lazy, and the caller's next statement
    // must follow it.
    return tx
      .execute(drizzleSql`select ${drizzleSql.join(settings.map(([name, value]) => drizzleSql`set_config(${drizzleSql.raw(`'${name}'`)}, ${value}, true)`), drizzleSql`, `)}`)
      .then((rows) => rows);
  }
  citusTransactions.add(tx);
  const statements = [`set local citus.propagate_set_commands to 'local'`];
  for (const [name, value] of settings) {
    if (value.includes('\0')) throw new TypeError(`setLocal: ${name} must not contain NUL characters`);
    statements.push(`set local ${name} to '${value.replaceAll("'", "''")}'`);
  }
  return pipelined(statements.map((statement) => tx.execute(drizzleSql.raw(statement))));
}

/**
 * Whether the client's database has the Citus extension, asked once per client (the first tenant
 * transaction waits for the answer); a failed question is asked again next time. Nothing to
 * configure: the same processes run on one PostgreSQL and on a Citus coordinator.
 */
function runsCitus(db: Db): Promise<boolean> {
  let detection = citusDetections.get(db);
  if (!detection) {
    detection = db
      .execute(drizzleSql`select exists (select from pg_extension where extname = 'citus') as citus`)
      .then((rows) => Boolean((rows as unknown as { citus: boolean }[])[0]?.citus));
    citusDetections.set(db, detection);
    detection.catch(() => citusDetections.delete(db));
  }
  return detection;
}

/** The role DATABASE_URL connects as must not run the app: one line saying why and what to do. */
export class UnsafeDatabaseRoleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeDatabaseRoleError';
  }
}

function bypassesRowLevelSecurity(variable: string, role: string, reason: string): UnsafeDatabaseRoleError {
  return new UnsafeDatabaseRoleError(
    `${variable} connects as "${role}", which ${reason}, so row-level security would not isolate tenants; ` +
      "connect as the app's own login role (npm run migrate with DATABASE_ADMIN_URL provisions it)",
  );
}

/**
 * Refuses a connection whose role could see across tenants: a superuser, a BYPASSRLS role, or
 * the owner of the tenant tables (an owner can switch RLS off); and one that is not in this
 * database's app group (drizzle/0007), which holds the app's privileges. The API and workers
 * call this at startup, so a misconfigured deployment fails loudly instead of at its first query;
 * the API also for its read replica's connection (`variable` names the setting the errors blame).
 */
export async function assertRestrictedRole(sql: Sql, variable = 'DATABASE_URL'): Promise<void> {
  const [role] = await sql<{ name: string; superuser: boolean; bypassrls: boolean; owner: boolean; migrated: boolean }[]>`
    select r.rolname as name, r.rolsuper as superuser, r.rolbypassrls as bypassrls,
           coalesce(pg_has_role(current_user, c.relowner, 'USAGE'), false) as owner,
           to_regprocedure('public.mnemo_app_group()') is not null as migrated
    from pg_roles r
    left join pg_class c on c.oid = to_regclass('public.facts')
    where r.rolname = current_user`;
  if (!role) throw new Error('could not read the current database role');
  if (role.superuser) throw bypassesRowLevelSecurity(variable, role.name, 'is a superuser');
  if (role.bypassrls) throw bypassesRowLevelSecurity(variable, role.name, 'has BYPASSRLS');
  if (role.owner) throw bypassesRowLevelSecurity(variable, role.name, 'owns the tenant tables');
  if (!role.migrated) {
    throw new UnsafeDatabaseRoleError(`the database at ${variable} has no app group yet: run npm run migrate (with DATABASE_ADMIN_URL)`);
  }
  const [group] = await sql<{ name: string; member: boolean }[]>`
    select public.mnemo_app_group() as name,
           exists (select from pg_roles g where g.rolname = public.mnemo_app_group()
                   and pg_has_role(current_user, g.oid, 'USAGE')) as member`;
  if (!group?.member) {
    throw new UnsafeDatabaseRoleError(
      `${variable} connects as "${role.name}", which is not a member of "${group?.name}", this database's app group; ` +
        `npm run migrate with DATABASE_ADMIN_URL grants it (or GRANT "${group?.name}" TO "${role.name}")`,
    );
  }
}
