import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate as applyMigrations } from 'drizzle-orm/postgres-js/migrator';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertRestrictedRole } from '../../src/db/client.ts';
import { migrate, migrationsFolder } from '../../src/db/migrate.ts';
import { appLogin, createEmptyDatabase } from '../helpers/database.ts';
import { databaseUrl, TEST_APP_PASSWORD } from '../../support/urls.ts';
import { needs } from '../helpers/needs.ts';

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
    expect(result).toEqual({ applied: migrationCount, total: migrationCount, appRole: appLogin().user, appGroup: `mnemo_app_${target.name}` });

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
      'keyword_corpus_stats',
      'keyword_stat_changes',
      'keyword_term_stats',
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

  it('apply exactly once when several nodes migrate at the same time', needs('postgres-server'), async () => {
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

  it("provision the app role as a login member of the database's own group, not of mnemo_app, that cannot bypass RLS", async () => {
    const [role] = await sql<{ login: boolean; superuser: boolean; bypassrls: boolean; member: boolean; shared: boolean }[]>`
      select rolcanlogin as login, rolsuper as superuser, rolbypassrls as bypassrls,
             pg_has_role(rolname, mnemo_app_group(), 'MEMBER') as member,
             pg_has_role(rolname, 'mnemo_app', 'MEMBER') as shared
      from pg_roles where rolname = ${appLogin().user}`;
    expect(role).toEqual({ login: true, superuser: false, bypassrls: false, member: true, shared: false });
    const [group] = await sql<{ name: string }[]>`select mnemo_app_group() as name`;
    expect(group!.name).toBe(`mnemo_app_${target.name}`);
  });

  it('leave mnemo_app no privilege in the database, and PUBLIC no CONNECT', async () => {
    expect(await privilegesOf(sql, 'mnemo_app')).toEqual([]);
    expect(await privilegesOf(sql, `mnemo_app_${target.name}`)).not.toEqual([]);
    const [database] = await sql<{ publicConnect: boolean }[]>`
      select has_database_privilege('public', current_database(), 'CONNECT') as "publicConnect"`;
    expect(database!.publicConnect).toBe(false);
  });

  it('name the group within the 63-byte limit, distinct for long names sharing a prefix', async () => {
    const names = await sql<{ name: string; bytes: number }[]>`
      select n as name, octet_length(n) as bytes from (values
        (mnemo_group_role_name(repeat('é', 40) || 'a')), (mnemo_group_role_name(repeat('é', 40) || 'b')),
        (mnemo_group_role_name(repeat('x', 53)))) v(n)`;
    for (const { name, bytes } of names) expect(bytes, name).toBeLessThanOrEqual(63);
    expect(new Set(names.map((n) => n.name)).size).toBe(3);
    expect(names[2]!.name).toBe(`mnemo_app_${'x'.repeat(53)}`);
  });

  it('refuse an app URL that connects as the migration owner', async () => {
    await expect(migrate({ adminUrl: target.adminUrl, appUrl: target.adminUrl })).rejects.toThrow(
      /both connect as .* the app needs its own role/,
    );
  });

  it('refuse mnemo_app, the group older versions share, as the login role', async () => {
    await expect(
      migrate({ adminUrl: target.adminUrl, appUrl: databaseUrl(target.adminUrl, target.name, { user: 'mnemo_app', password: 'x' }) }),
    ).rejects.toThrow(/"mnemo_app", the group older Mnemo versions share across databases/);
  });

  it('surface the database error of a failing migration', async () => {
    const bogus = new URL(target.adminUrl);
    bogus.pathname = '/no_such_database_here';
    await expect(migrate({ adminUrl: bogus.toString() })).rejects.toThrow(/no_such_database_here/);
  });
});

/** What `role` is granted in the database of `sql`, as the catalog's dependency records say. */
async function privilegesOf(sql: Sql, role: string): Promise<string[]> {
  const rows = await sql<{ on: string }[]>`
    select d.classid::regclass::text || ':' || d.objid as on
    from pg_shdepend d join pg_roles r on r.oid = d.refobjid
    where r.rolname = ${role} and d.refclassid = 'pg_authid'::regclass
      and (d.dbid = (select oid from pg_database where datname = current_database())
           or (d.classid = 'pg_database'::regclass and d.objid = (select oid from pg_database where datname = current_database())))
    order by 1`;
  return rows.map((r) => r.on);
}

/** A login role of this run (dropped with the run's roles), and its URL for `database`. */
function loginOfRun(suffix: string, adminUrl: string, database: string) {
  const user = `${appLogin().user}_${suffix}`;
  return { user, url: databaseUrl(adminUrl, database, { user, password: TEST_APP_PASSWORD }) };
}

describe('app groups per database', needs('postgres-server'), () => {
  it("keep a second database's app role out of the first database's tables", async () => {
    const first = await createEmptyDatabase();
    const second = await createEmptyDatabase();
    const firstLogin = loginOfRun('first', first.adminUrl, first.name);
    const secondLogin = loginOfRun('second', second.adminUrl, second.name);
    const owner = postgres(first.adminUrl, { max: 1, onnotice: () => {} });
    try {
      await migrate({ adminUrl: first.adminUrl, appUrl: firstLogin.url });
      await migrate({ adminUrl: second.adminUrl, appUrl: secondLogin.url });
      await owner`insert into tenants (id) values ('tenant-of-first')`;

      const [privileges] = await owner<{ first: boolean; second: boolean }[]>`
        select has_table_privilege(${firstLogin.user}, 'tenants', 'SELECT') as first,
               has_table_privilege(${secondLogin.user}, 'tenants', 'SELECT') as second`;
      expect(privileges).toEqual({ first: true, second: false });

      // The second app's credentials pointed at the first database: no connection ...
      const intruderUrl = databaseUrl(first.adminUrl, first.name, { user: secondLogin.user, password: TEST_APP_PASSWORD });
      const intruder = postgres(intruderUrl, { max: 1, onnotice: () => {} });
      try {
        await expect(intruder`select count(*) from tenants`).rejects.toMatchObject({ code: '42501' });
        // ... and, were CONNECT given back to everyone, no rows either.
        await owner.unsafe(`grant connect on database "${first.name}" to public`);
        await expect(intruder`select count(*) from tenants`).rejects.toThrow(/permission denied for table tenants/);
      } finally {
        await intruder.end();
      }
    } finally {
      await owner.end();
      await first.drop();
      await second.drop();
    }
  });

  it('give a database copied from a migrated one a group of its own when it is migrated', async () => {
    const original = await createEmptyDatabase();
    const copy = await createEmptyDatabase();
    const originalLogin = loginOfRun('original', original.adminUrl, original.name);
    const copyLogin = loginOfRun('copy', copy.adminUrl, copy.name);
    await migrate({ adminUrl: original.adminUrl, appUrl: originalLogin.url });
    const maintenance = postgres(databaseUrl(original.adminUrl, 'postgres'), { max: 1, onnotice: () => {} });
    await maintenance.unsafe(`drop database "${copy.name}"`);
    await maintenance.unsafe(`create database "${copy.name}" template "${original.name}"`);
    await maintenance.end();
    const owner = postgres(copy.adminUrl, { max: 1, onnotice: () => {} });
    try {
      expect(await privilegesOf(owner, `mnemo_app_${original.name}`)).not.toEqual([]);
      const result = await migrate({ adminUrl: copy.adminUrl, appUrl: copyLogin.url });
      expect(result.appGroup).toBe(`mnemo_app_${copy.name}`);
      expect(await privilegesOf(owner, `mnemo_app_${original.name}`)).toEqual([]);
      const [privileges] = await owner<{ original: boolean; copy: boolean }[]>`
        select has_table_privilege(${originalLogin.user}, 'facts', 'SELECT') as original,
               has_table_privilege(${copyLogin.user}, 'facts', 'SELECT') as copy`;
      expect(privileges).toEqual({ original: false, copy: true });
    } finally {
      await owner.end();
      await original.drop();
      await copy.drop();
    }
  });

  it('upgrade a database of the shared mnemo_app without a moment where the running app lacks privileges', async () => {
    const target = await createEmptyDatabase();
    const login = loginOfRun('upgraded', target.adminUrl, target.name);
    // The database as the previous version left it: migrations up to 0006, the login role in mnemo_app.
    const previousVersion = mkdtempSync(join(tmpdir(), 'mnemo-migrations-'));
    cpSync(migrationsFolder, previousVersion, { recursive: true });
    const journalPath = join(previousVersion, 'meta/_journal.json');
    const fullJournal = JSON.parse(readFileSync(journalPath, 'utf8')) as { entries: { tag: string }[] };
    const upTo = fullJournal.entries.findIndex((e) => e.tag === '0006_episode_coverage');
    writeFileSync(journalPath, JSON.stringify({ ...fullJournal, entries: fullJournal.entries.slice(0, upTo + 1) }));
    const owner = postgres(target.adminUrl, { max: 1, onnotice: () => {} });
    let app: Sql | undefined;
    try {
      await applyMigrations(drizzle(owner), { migrationsFolder: previousVersion });
      await owner.unsafe(`create role "${login.user}" login password '${TEST_APP_PASSWORD}'`);
      await owner.unsafe(`grant mnemo_app to "${login.user}"`);
      await owner`insert into tenants (id) values ('t-upgrade')`;
      app = postgres(login.url, { max: 1, onnotice: () => {} });
      await expect(assertRestrictedRole(app)).rejects.toThrow(/has no app group yet: run npm run migrate/);

      // The running app reads all along while the new version migrates.
      let reading = true;
      const failures: unknown[] = [];
      let reads = 0;
      const reader = (async () => {
        while (reading) {
          await app!`select count(*) from tenants`.then(() => reads++, (error: unknown) => failures.push(error));
        }
      })();
      const result = await migrate({ adminUrl: target.adminUrl, appUrl: login.url });
      reading = false;
      await reader;
      expect(result).toMatchObject({ applied: migrationCount - (upTo + 1), appRole: login.user, appGroup: `mnemo_app_${target.name}` });
      expect(failures).toEqual([]);
      expect(reads).toBeGreaterThan(0);

      const [membership] = await owner<{ group: boolean; shared: boolean }[]>`
        select pg_has_role(${login.user}, mnemo_app_group(), 'MEMBER') as group,
               pg_has_role(${login.user}, 'mnemo_app', 'MEMBER') as shared`;
      expect(membership).toEqual({ group: true, shared: false });
      expect(await privilegesOf(owner, 'mnemo_app')).toEqual([]);
      await expect(assertRestrictedRole(app)).resolves.toBeUndefined();
      const [row] = await app<{ n: number }[]>`select count(*)::int as n from tenants`;
      expect(row!.n).toBe(1);
    } finally {
      await app?.end();
      await owner.end();
      rmSync(previousVersion, { recursive: true, force: true });
      await target.drop();
    }
  });
});
