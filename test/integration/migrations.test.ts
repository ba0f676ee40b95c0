import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, migrationsFolder } from '../../src/db/migrate.ts';
import { createEmptyDatabase } from '../helpers/database.ts';
import { TEST_APP_ROLE } from '../helpers/urls.ts';

const journal = JSON.parse(readFileSync(join(migrationsFolder, 'meta/_journal.json'), 'utf8')) as { entries: unknown[] };
const migrationCount = journal.entries.length;

/** Everything a migration could change, as one comparable text. */
async function schemaFingerprint(sql: Sql): Promise<string> {
  const parts = await Promise.all([
    sql`select table_name, column_name, data_type, is_nullable, column_default, generation_expression
        from information_schema.columns where table_schema = 'public' order by 1, 2`,
    sql`select indexname, indexdef from pg_indexes where schemaname = 'public' order by 1`,
    sql`select tablename, policyname, qual, with_check from pg_policies order by 1, 2`,
    sql`select conname, pg_get_constraintdef(oid) as def from pg_constraint
        where connamespace = 'public'::regnamespace order by 1`,
    sql`select extname, extversion from pg_extension order by 1`,
    sql`select relname, relrowsecurity, relforcerowsecurity from pg_class
        where relnamespace = 'public'::regnamespace and relkind = 'r' order by 1`,
  ]);
  return JSON.stringify(parts);
}

describe('migrations', () => {
  let target: Awaited<ReturnType<typeof createEmptyDatabase>>;
  let sql: Sql;

  beforeAll(async () => {
    target = await createEmptyDatabase();
    sql = postgres(target.adminUrl, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql.end();
    await target.drop();
  });

  it('apply to an empty database', async () => {
    const result = await migrate({ adminUrl: target.adminUrl, appUrl: target.appUrl });
    expect(result).toEqual({ applied: migrationCount, total: migrationCount, appRole: TEST_APP_ROLE });

    const tables = await sql<{ name: string }[]>`
      select tablename as name from pg_tables where schemaname = 'public' order by 1`;
    expect(tables.map((t) => t.name)).toEqual([
      'coverage_report_schedules',
      'coverage_reports',
      'embedding_models',
      'erasures',
      'fact_embeddings',
      'fact_revisions',
      'facts',
      'idempotency_keys',
      'outbox',
      'tenants',
    ]);
    const extensions = await sql<{ extname: string }[]>`select extname from pg_extension order by 1`;
    expect(extensions.map((e) => e.extname)).toEqual(expect.arrayContaining(['btree_gin', 'vector']));
  });

  it('re-apply as a no-op', async () => {
    const before = await schemaFingerprint(sql);
    const result = await migrate({ adminUrl: target.adminUrl, appUrl: target.appUrl });
    expect(result.applied).toBe(0);
    expect(result.total).toBe(migrationCount);
    expect(await schemaFingerprint(sql)).toBe(before);
  });

  it('apply exactly once when several nodes migrate at the same time', async () => {
    const fresh = await createEmptyDatabase();
    try {
      const results = await Promise.all(
        Array.from({ length: 4 }, () => migrate({ adminUrl: fresh.adminUrl, appUrl: fresh.appUrl })),
      );
      expect(results.map((r) => r.applied).sort()).toEqual([0, 0, 0, migrationCount]);
      const check = postgres(fresh.adminUrl, { max: 1 });
      const [row] = await check<{ n: number }[]>`select count(*)::int as n from drizzle.__drizzle_migrations`;
      await check.end();
      expect(row!.n).toBe(migrationCount);
    } finally {
      await fresh.drop();
    }
  });

  it('provision the app role as a login member of mnemo_app that cannot bypass RLS', async () => {
    const [role] = await sql<{ login: boolean; superuser: boolean; bypassrls: boolean; member: boolean }[]>`
      select rolcanlogin as login, rolsuper as superuser, rolbypassrls as bypassrls,
             pg_has_role(rolname, 'mnemo_app', 'MEMBER') as member
      from pg_roles where rolname = ${TEST_APP_ROLE}`;
    expect(role).toEqual({ login: true, superuser: false, bypassrls: false, member: true });
  });

  it('refuse an app URL that connects as the migration owner', async () => {
    await expect(migrate({ adminUrl: target.adminUrl, appUrl: target.adminUrl })).rejects.toThrow(
      /both connect as .* the app needs its own role/,
    );
  });

  it('surface the database error of a failing migration', async () => {
    const bogus = new URL(target.adminUrl);
    bogus.pathname = '/no_such_database_here';
    await expect(migrate({ adminUrl: bogus.toString() })).rejects.toThrow(/no_such_database_here/);
  });
});
