import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate as applyMigrations } from 'drizzle-orm/postgres-js/migrator';
import postgres, { type Sql } from 'postgres';
import type { DistributionSetting } from '../foundation/config.ts';
import { type DistributionResult, distributeTables } from './distribute.ts';

export const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url));

/** Any fixed number: every node that migrates at once waits on this one advisory lock. */
const MIGRATION_LOCK_KEY = 7_291_400_113;

export interface MigrateOptions {
  /** The owner connection that runs the migrations. */
  adminUrl: string;
  /** The app's connection (DATABASE_URL); when given, its login role is provisioned. */
  appUrl?: string | undefined;
  /** A Unix socket file to connect through instead of adminUrl's host and port (the embedded database). */
  socketPath?: string | undefined;
  log?: (message: string) => void;
  /** What to do on a Citus coordinator (MNEMO_DISTRIBUTED; src/db/distribute.ts): `auto` by default. */
  distribution?: DistributionSetting | undefined;
}

export interface MigrateResult {
  applied: number;
  total: number;
  /** The login role of appUrl, provisioned; undefined without appUrl. */
  appRole: string | undefined;
  /** This database's app group (mnemo_app_<database>), which holds the app's privileges. */
  appGroup: string;
  /** The tables' distribution on a Citus coordinator; undefined on a single PostgreSQL. */
  distribution: DistributionResult | undefined;
}

/**
 * Applies drizzle/ migrations under a Postgres advisory lock, so several nodes starting at once
 * apply them exactly once; a database already up to date is left untouched. Errors surface with
 * the database's own message (drizzle-kit's CLI would swallow it). Then makes this database's
 * app group its own (drizzle/0007) and grants it to the login role of appUrl.
 */
export async function migrate({ adminUrl, appUrl, socketPath, log = () => {}, distribution = 'auto' }: MigrateOptions): Promise<MigrateResult> {
  // One connection: the advisory lock is held by a session, and the migrations run on it.
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {}, ...(socketPath ? { path: socketPath } : {}) });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
    try {
      const login = appUrl ? await provisionLoginRole(sql, appUrl) : undefined;
      // Read by drizzle/0007 on an upgrade, so the login role gains the new group in the same
      // transaction that takes the privileges from mnemo_app: the running app never lacks them.
      await sql`select set_config('mnemo.app_login_role', ${login?.role ?? ''}, false)`;
      const before = await countApplied(sql);
      // On Citus, a migration that adds a trigger to a distributed table needs this (see distribute.ts).
      await sql`select set_config('citus.enable_unsafe_triggers', 'on', false) from pg_extension where extname = 'citus'`;
      await applyMigrations(drizzle(sql), { migrationsFolder });
      const total = await countApplied(sql);
      log(
        total === before
          ? `migrations: up to date (${total} applied)`
          : `migrations: applied ${total - before}, ${total} in all`,
      );
      // Again on every run: a database copied or renamed since takes a group named after itself.
      // On Citus its grants on distributed tables go to the shards over one connection per worker:
      // after a parallel one, Citus refuses the function the adoption creates in the same statement.
      await sql`select set_config('citus.multi_shard_modify_mode', 'sequential', false) from pg_extension where extname = 'citus'`;
      const [adopted] = await sql<{ group: string }[]>`select mnemo_adopt_app_group(${login?.role ?? null}) as group`;
      const appGroup = adopted!.group;
      if (login) {
        log(`migrations: app role "${login.role}" ${login.existed ? 'updated' : 'created'} and granted "${appGroup}"`);
        await warnOfOtherGroups(sql, login.role, appGroup, log);
      } else {
        log(`migrations: the app's login role needs GRANT "${appGroup}" (set DATABASE_ADMIN_URL to have migrate do it)`);
      }
      await noteUnusedLegacyGroup(sql, log);
      const distributed = await distributeTables(sql, distribution, log);
      if (distributed && login) await grantGroupOnWorkers(sql, appGroup, login.role);
      if (distributed) {
        log(
          distributed.changed.length === 0
            ? `citus: up to date (${distributed.distributed.length} tables distributed by tenant_id, ${distributed.reference.length} reference tables)`
            : `citus: distributed ${distributed.changed.length} tables (${distributed.distributed.length} by tenant_id, ${distributed.reference.length} reference tables in all)`,
        );
      }
      return { applied: total - before, total, appRole: login?.role, appGroup, distribution: distributed };
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`;
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function countApplied(sql: Sql): Promise<number> {
  const [table] = await sql<{ exists: boolean }[]>`
    select to_regclass('drizzle.__drizzle_migrations') is not null as exists`;
  if (!table?.exists) return 0;
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from drizzle.__drizzle_migrations`;
  return row?.n ?? 0;
}

/**
 * Creates or updates the login role of DATABASE_URL (with the URL's password), refusing one that
 * would bypass row-level security or through which other roles would act too.
 */
async function provisionLoginRole(sql: Sql, appUrl: string): Promise<{ role: string; existed: boolean }> {
  const url = new URL(appUrl);
  const role = decodeURIComponent(url.username);
  const password = url.password ? decodeURIComponent(url.password) : undefined;
  if (!role) throw new Error('DATABASE_URL names no user; it must name the app\'s login role (e.g. mnemo_api)');

  if (role === 'mnemo_app') {
    // Older versions grant mnemo_app to every app role on the cluster: all of them would inherit this database.
    throw new Error('DATABASE_URL connects as "mnemo_app", the group older Mnemo versions share across databases; use a login role of its own (e.g. mnemo_api)');
  }
  const [current] = await sql<{ name: string }[]>`select current_user as name`;
  if (current?.name === role) {
    throw new Error(`DATABASE_URL and DATABASE_ADMIN_URL both connect as "${role}"; the app needs its own role`);
  }
  const [existing] = await sql<{ superuser: boolean; bypassrls: boolean; members: string[] }[]>`
    select rolsuper as superuser, rolbypassrls as bypassrls,
           array(select m.rolname::text from pg_auth_members am join pg_roles m on m.oid = am.member
                 where am.roleid = r.oid order by 1) as members
    from pg_roles r where rolname = ${role}`;
  if (existing?.superuser || existing?.bypassrls) {
    throw new Error(`DATABASE_URL connects as "${role}", which bypasses row-level security; use a separate role`);
  }
  // Members inherit what the login role is granted: they would reach this database's tenants too.
  if (existing && existing.members.length > 0) {
    throw new Error(
      `DATABASE_URL connects as "${role}", which roles ${existing.members.map((m) => `"${m}"`).join(', ')} are members of; ` +
        'they would act on this database too: use a login role of its own (no members)',
    );
  }

  const statement = existing
    ? password
      ? sql`select format('ALTER ROLE %I LOGIN PASSWORD %L', ${role}::text, ${password}::text) as ddl`
      : sql`select format('ALTER ROLE %I LOGIN', ${role}::text) as ddl`
    : password
      ? sql`select format('CREATE ROLE %I LOGIN PASSWORD %L', ${role}::text, ${password}::text) as ddl`
      : sql`select format('CREATE ROLE %I LOGIN', ${role}::text) as ddl`;
  const [{ ddl }] = (await statement) as unknown as [{ ddl: string }];
  await sql.unsafe(ddl);
  return { role, existed: Boolean(existing) };
}

/**
 * Citus propagates `GRANT group TO login` only when it created both roles from this database;
 * a login role made from another database of the cluster (or before Citus) stays out of the
 * group on the workers, and the coordinator's connections to them are refused (no CONNECT).
 * So the membership is granted on every worker explicitly; a grant already there is a no-op.
 */
async function grantGroupOnWorkers(sql: Sql, appGroup: string, login: string): Promise<void> {
  const [statement] = await sql<{ grant: string }[]>`select format('GRANT %I TO %I', ${appGroup}::text, ${login}::text) as grant`;
  const results = await sql<{ node: string; success: boolean; result: string }[]>`
    select nodename || ':' || nodeport as node, success, result from run_command_on_workers(${statement!.grant})`;
  const failed = results.find((row) => !row.success);
  if (failed) throw new Error(`citus: could not grant "${appGroup}" to "${login}" on worker ${failed.node}: ${failed.result}`);
}

/** A login role shared by two deployments reads both: say so, since migrate cannot tell whose it is. */
async function warnOfOtherGroups(sql: Sql, role: string, appGroup: string, log: (message: string) => void): Promise<void> {
  const others = await sql<{ group: string }[]>`
    select g.rolname as group from pg_auth_members am
    join pg_roles g on g.oid = am.roleid join pg_roles l on l.oid = am.member
    where l.rolname = ${role} and starts_with(g.rolname, 'mnemo_app_') and g.rolname <> ${appGroup}
    order by 1`;
  if (others.length > 0) {
    log(
      `migrations: warning: "${role}" is also a member of ${others.map((o) => `"${o.group}"`).join(', ')} ` +
        '(app groups of other databases) and can read those databases too; give each deployment its own login role',
    );
  }
}

/** Once no database on the cluster uses the shared group of 0002 any more, the operator may drop it. */
async function noteUnusedLegacyGroup(sql: Sql, log: (message: string) => void): Promise<void> {
  const [legacy] = await sql<{ used: boolean; members: number }[]>`
    select exists (select from pg_shdepend d where d.refclassid = 'pg_authid'::regclass and d.refobjid = r.oid) as used,
           (select count(*)::int from pg_auth_members am where am.roleid = r.oid) as members
    from pg_roles r where r.rolname = 'mnemo_app'`;
  if (legacy && !legacy.used && legacy.members === 0) {
    log('migrations: the shared role mnemo_app is no longer used by any database on this cluster; DROP ROLE mnemo_app once every deployment is upgraded');
  }
}
