import type { Sql } from 'postgres';

/**
 * Every table holding tenant data: those with a `tenant_id` column, read from the database's
 * catalog (the drizzle schema does not declare the keyword statistics tables, which hand-written
 * migrations create), so a new table is walked by every test that checks them all.
 */
export async function tenantTablesIn(sql: Sql): Promise<string[]> {
  const rows = await sql<{ name: string }[]>`
    select c.relname as name from pg_class c
    join pg_attribute a on a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped
    where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'`;
  return rows.map((row) => row.name).sort();
}
