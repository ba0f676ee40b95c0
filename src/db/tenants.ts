import { sql } from 'drizzle-orm';
import type { Tx } from './client.ts';

/**
 * Records that a tenant exists, so housekeeping can later visit it (see schema/tenants.ts).
 * Call it from any write that leaves work behind; once known it costs one read of an index.
 *
 * Read first, insert only when missing: on Citus `tenants` is a reference table, copied to every
 * node, and even an insert that conflicts is sent to all of them and makes the write's
 * transaction commit on every node in two phases; the read is answered by the coordinator's own
 * copy.
 */
export async function registerTenant(tx: Tx, tenantId: string): Promise<void> {
  const [known] = (await tx.execute(sql`select exists (select from tenants where id = ${tenantId}) as known`)) as unknown as [{ known: boolean }];
  if (!known.known) await tx.execute(sql`insert into tenants (id) values (${tenantId}) on conflict (id) do nothing`);
}

/**
 * Housekeeping that visits every tenant, each under its own RLS setting (which `work` opens): runs
 * `work` for one tenant at a time, in id order. The first error stops the visit and is thrown; no
 * caller goes on past a tenant that failed (a job's retry, or the next run, starts over).
 *
 * The ids are all read before the first tenant's work: the listing's pages are read back to back
 * instead of being spread across a pass that can run for hours (a backfill), and a pass visits the
 * tenants registered when it began (one registered meanwhile is the next run's).
 */
export async function forEachTenant(db: Pick<Tx, 'execute'>, work: (tenantId: string) => Promise<void>): Promise<void> {
  const tenantIds: string[] = [];
  for await (const tenantId of eachTenant(db)) tenantIds.push(tenantId);
  for (const tenantId of tenantIds) await work(tenantId);
}

async function* eachTenant(tx: Pick<Tx, 'execute'>, pageSize = 500): AsyncGenerator<string> {
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
