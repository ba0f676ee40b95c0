import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate as applyMigrations } from 'drizzle-orm/postgres-js/migrator';
import postgres, { type Sql } from 'postgres';

export const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url));

/** Any fixed number: every node that migrates at once waits on this one advisory lock. */
const MIGRATION_LOCK_KEY = 7_291_400_113;

export interface MigrateOptions {
  /** The owner connection that runs the migrations. */
  adminUrl: string;
  /** The app's connection (DATABASE_URL); when given, its login role is provisioned. */
  appUrl?: string | undefined;
  log?: (message: string) => void;
}

export interface MigrateResult {
  applied: number;
  total: number;
  appRole: string | undefined;
}

/**
 * Applies drizzle/ migrations under a Postgres advisory lock, so several nodes starting at once
 * apply them exactly once; a database already up to date is left untouched. Errors surface with
 * the database's own message (drizzle-kit's CLI would swallow it).
 */
export async function migrate({ adminUrl, appUrl, log = () => {} }: MigrateOptions): Promise<MigrateResult> {
  // One connection: the advisory lock is held by a session, and the migrations run on it.
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
    try {
      const before = await countApplied(sql);
      await applyMigrations(drizzle(sql), { migrationsFolder });
      const total = await countApplied(sql);
      log(
        total === before
          ? `migrations: up to date (${total} applied)`
          : `migrations: applied ${total - before}, ${total} in all`,
      );
      const appRole = appUrl ? await provisionAppRole(sql, appUrl, log) : undefined;
      return { applied: total - before, total, appRole };
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
 * Makes the login role of DATABASE_URL able to act as mnemo_app: creates it if missing (with the
 * URL's password), grants it mnemo_app, and refuses a role that would bypass row-level security.
 */
async function provisionAppRole(sql: Sql, appUrl: string, log: (message: string) => void): Promise<string> {
  const url = new URL(appUrl);
  const role = decodeURIComponent(url.username);
  const password = url.password ? decodeURIComponent(url.password) : undefined;
  if (!role) throw new Error('DATABASE_URL names no user; it must name the app role (e.g. mnemo_app)');

  const [current] = await sql<{ name: string }[]>`select current_user as name`;
  if (current?.name === role) {
    throw new Error(`DATABASE_URL and DATABASE_ADMIN_URL both connect as "${role}"; the app needs its own role`);
  }
  const [existing] = await sql<{ superuser: boolean; bypassrls: boolean }[]>`
    select rolsuper as superuser, rolbypassrls as bypassrls from pg_roles where rolname = ${role}`;
  if (existing?.superuser || existing?.bypassrls) {
    throw new Error(`DATABASE_URL connects as "${role}", which bypasses row-level security; use a separate role`);
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
  if (role !== 'mnemo_app') {
    const [{ grant }] = (await sql`select format('GRANT mnemo_app TO %I', ${role}::text) as grant`) as unknown as [
      { grant: string },
    ];
    await sql.unsafe(grant);
  }
  log(`migrations: app role "${role}" ${existing ? 'updated' : 'created'} and granted mnemo_app`);
  return role;
}
