import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertRestrictedRole, connect, withTenant } from '../../src/db/client.ts';
import { factEmbeddings, factRevisions, facts, outbox } from '../../src/db/schema.ts';
import { appLogin, createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { insertFact, uniqueTenant } from '../helpers/factories.ts';
import { tenantTablesIn } from '../helpers/tenant-tables.ts';
import { databaseUrl } from '../../support/urls.ts';

describe('row-level security', () => {
  let t: TestDatabase;
  const tenantA = uniqueTenant('a');
  const tenantB = uniqueTenant('b');

  beforeAll(async () => {
    t = await createTestDatabase();
    for (const [tenant, count] of [
      [tenantA, 2],
      [tenantB, 3],
    ] as const) {
      for (let i = 0; i < count; i++) {
        const fact = await insertFact(t.app.db, tenant);
        await withTenant(t.app.db, tenant, async (tx) => {
          await tx.insert(factEmbeddings).values({ tenantId: tenant, factId: fact.id, model: 'm', version: 1, dims: 3, embedding: [i, 1, 2] });
          await tx.insert(outbox).values({ tenantId: tenant, queue: 'embed', payload: { factId: fact.id } });
        });
      }
    }
  });
  afterAll(() => t.drop());

  /**
   * Under tenant A's setting, a query with no tenant filter must see exactly A's rows: none of
   * B's, and all of A's. Returns what went wrong, table by table (empty when isolation holds).
   */
  async function isolationViolations(): Promise<string[]> {
    const violations: string[] = [];
    for (const [table, expectedA] of [
      ['facts', 2],
      ['fact_revisions', 2],
      ['fact_embeddings', 2],
      ['outbox', 2],
    ] as const) {
      const rows = await withTenant(t.app.db, tenantA, (tx) =>
        tx.execute(sql`select tenant_id from ${sql.identifier(table)}`),
      ) as unknown as { tenant_id: string }[];
      const ofB = rows.filter((r) => r.tenant_id === tenantB).length;
      const ofA = rows.filter((r) => r.tenant_id === tenantA).length;
      if (ofB > 0) violations.push(`${table}: ${ofB} rows of tenant B visible to tenant A`);
      if (ofA !== expectedA) violations.push(`${table}: tenant A sees ${ofA} of its ${expectedA} rows`);
    }
    return violations;
  }

  it('returns none of tenant B to a query that omits the tenant filter under tenant A', async () => {
    expect(await isolationViolations()).toEqual([]);
    // And through drizzle's query builder, the way domain code reads.
    const seen = await withTenant(t.app.db, tenantB, (tx) => tx.select({ tenantId: facts.tenantId }).from(facts));
    expect(seen).toHaveLength(3);
    expect(new Set(seen.map((r) => r.tenantId))).toEqual(new Set([tenantB]));
  });

  it('returns zero rows when no tenant is set', async () => {
    for (const table of await tenantTablesIn(t.admin)) {
      const [outside] = await t.app.sql<{ n: number }[]>`select count(*)::int as n from ${t.app.sql(table)}`;
      expect(outside!.n, `${table} outside a transaction`).toBe(0);
    }
    const inside = await t.app.db.transaction((tx) => tx.select().from(factRevisions));
    expect(inside).toHaveLength(0);
  });

  it('sees nothing once the transaction that set the tenant has ended', async () => {
    // The same pooled connection is reused: the transaction-local setting must not leak into it.
    const single = connect(t.appUrl, { max: 1 });
    try {
      await withTenant(single.db, tenantA, (tx) => tx.select().from(facts));
      const [row] = await single.sql<{ n: number; setting: string | null }[]>`
        select count(*)::int as n, current_setting('app.tenant_id', true) as setting from facts`;
      expect(row).toEqual({ n: 0, setting: '' });
    } finally {
      await single.close();
    }
  });

  it('refuses to write a row of another tenant, or move a row to another tenant', async () => {
    const violatesPolicy = (error: unknown) => /violates row-level security policy/.test(databaseMessage(error));
    await expect(insertOutboxAs(tenantA, tenantB)).rejects.toSatisfy(violatesPolicy);
    await expect(
      withTenant(t.app.db, tenantA, (tx) => tx.update(facts).set({ tenantId: tenantB })),
    ).rejects.toSatisfy(violatesPolicy);
    const [count] = await t.admin<{ n: number }[]>`select count(*)::int as n from facts where tenant_id = ${tenantB}`;
    expect(count!.n).toBe(3);
  });

  /** Drizzle wraps the driver's error; the database's own message is its cause. */
  const databaseMessage = (error: unknown) => String((error as { cause?: Error }).cause?.message ?? error);

  async function insertOutboxAs(actingTenant: string, rowTenant: string) {
    return withTenant(t.app.db, actingTenant, (tx) =>
      tx.insert(outbox).values({ tenantId: rowTenant, queue: 'embed', payload: {} }),
    );
  }

  it('updates and deletes nothing of another tenant', async () => {
    const updated = await withTenant(t.app.db, tenantA, (tx) =>
      tx.update(outbox).set({ attempts: 99 }).returning({ tenantId: outbox.tenantId }),
    );
    expect(updated.every((r) => r.tenantId === tenantA)).toBe(true);
    const deleted = await withTenant(t.app.db, tenantA, (tx) =>
      tx.delete(factEmbeddings).where(sql`tenant_id = ${tenantB}`).returning(),
    );
    expect(deleted).toEqual([]);
    const [touched] = await t.admin<{ n: number }[]>`
      select count(*)::int as n from outbox where tenant_id = ${tenantB} and attempts = 99`;
    expect(touched!.n).toBe(0);
  });

  it('connects the app as a role that is not owner, superuser or BYPASSRLS', async () => {
    const [role] = await t.app.sql<{ superuser: boolean; bypassrls: boolean; ownsAnything: boolean }[]>`
      select r.rolsuper as superuser, r.rolbypassrls as bypassrls,
             exists (select 1 from pg_class c where c.relnamespace = 'public'::regnamespace
                     and pg_has_role(current_user, c.relowner, 'USAGE')) as "ownsAnything"
      from pg_roles r where r.rolname = current_user`;
    expect(role).toEqual({ superuser: false, bypassrls: false, ownsAnything: false });
    await expect(assertRestrictedRole(t.app.sql)).resolves.toBeUndefined();
    // The owner connection (a superuser here) is refused at startup.
    await expect(assertRestrictedRole(t.admin)).rejects.toThrow(/row-level security would not isolate tenants/);
  });

  it("refuses at startup a login role outside the database's app group, naming the group", async () => {
    const outsider = { user: `${appLogin().user}_outsider`, password: 'outsider-password' };
    await t.admin.unsafe(`create role "${outsider.user}" login password '${outsider.password}'`);
    const [group] = await t.admin<{ name: string }[]>`select mnemo_app_group() as name`;
    const connection = connect(databaseUrl(t.adminUrl, t.name, outsider), { max: 1 });
    try {
      await expect(assertRestrictedRole(connection.sql)).rejects.toThrow(
        `DATABASE_URL connects as "${outsider.user}", which is not a member of "${group!.name}", this database's app group; ` +
          `npm run migrate with DATABASE_ADMIN_URL grants it (or GRANT "${group!.name}" TO "${outsider.user}")`,
      );
    } finally {
      await connection.close();
    }
  });

  it('covers every table with a tenant_id: RLS enabled, forced, and a tenant policy', async () => {
    const tables = await tenantTablesIn(t.admin);
    // The tables this file fills are among them: the catalog query finds what it should.
    expect(tables).toEqual(expect.arrayContaining(['facts', 'fact_revisions', 'fact_embeddings', 'outbox']));
    const rows = await t.admin<{ table: string; enabled: boolean; forced: boolean; policies: number }[]>`
      select c.relname as table, c.relrowsecurity as enabled, c.relforcerowsecurity as forced,
             (select count(*)::int from pg_policies p where p.tablename = c.relname
               and p.qual like '%mnemo_current_tenant()%' and p.with_check like '%mnemo_current_tenant()%') as policies
      from pg_class c
      where c.relnamespace = 'public'::regnamespace and c.relname = any(${tables})`;
    const byTable = new Map(rows.map((row) => [row.table, row]));
    for (const table of tables) expect(byTable.get(table), table).toEqual({ table, enabled: true, forced: true, policies: 1 });
  });

  it('is shown to fail when the policy is broken, and to pass once it is restored', async () => {
    const restore = async () => {
      await t.admin`alter table facts enable row level security`;
      await t.admin`drop policy if exists tenant_isolation on facts`;
      await t.admin.unsafe(
        'create policy tenant_isolation on facts using (tenant_id = mnemo_current_tenant()) with check (tenant_id = mnemo_current_tenant())',
      );
    };
    try {
      // Dropped policy: FORCE RLS denies everything, so tenant A loses its own rows.
      await t.admin`drop policy tenant_isolation on facts`;
      expect(await isolationViolations()).toEqual([`facts: tenant A sees 0 of its 2 rows`]);

      // A policy that forgets the tenant: B's rows leak to A.
      await t.admin.unsafe('create policy tenant_isolation on facts using (true)');
      expect(await isolationViolations()).toEqual([`facts: 3 rows of tenant B visible to tenant A`]);

      // RLS switched off altogether: the same leak.
      await t.admin`drop policy tenant_isolation on facts`;
      await t.admin`alter table facts disable row level security`;
      expect(await isolationViolations()).toEqual([`facts: 3 rows of tenant B visible to tenant A`]);
    } finally {
      await restore();
    }
    expect(await isolationViolations()).toEqual([]);
  });
});
