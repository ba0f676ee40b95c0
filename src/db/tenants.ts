import { sql } from 'drizzle-orm';
import type { Tx } from './client.ts';

/**
 * Records that a tenant exists, so housekeeping can later visit it (see schema/tenants.ts).
 * Call it from any write that leaves work behind; it costs one no-op insert once known.
 */
export async function registerTenant(tx: Tx, tenantId: string): Promise<void> {
  await tx.execute(sql`insert into tenants (id) values (${tenantId}) on conflict (id) do nothing`);
}

/** Tenant ids in pages, for housekeeping that visits every tenant under its own RLS setting. */
export async function* eachTenant(tx: Pick<Tx, 'execute'>, pageSize = 500): AsyncGenerator<string> {
  let after = '';
  for (;;) {
    const rows = (await tx.execute(
      sql`select id from tenants where id > ${after} order by id limit ${pageSize}`,
    )) as unknown as { id: string }[];
    for (const row of rows) yield row.id;
    if (rows.length < pageSize) return;
    after = rows[rows.length - 1]!.id;
  }
}
