import type { Sql } from 'postgres';
import type { DistributionSetting } from '../foundation/config.ts';

/**
 * The global tables: one copy on every node (Citus reference tables), so a statement on a tenant's
 * shard can join them locally. Every other table with a `tenant_id` column is a tenant table.
 */
export const REFERENCE_TABLES = ['tenants', 'embedding_models'] as const;

/** The table the tenant tables are colocated with: a tenant's rows of every table share one node. */
const ANCHOR_TABLE = 'facts';

export interface DistributionResult {
  /** Tables made reference tables or distributed by this run (none when already done). */
  changed: string[];
  /** Every tenant table, distributed by tenant_id. */
  distributed: string[];
  reference: string[];
}

/**
 * Distributes the schema on a Citus coordinator: the global tables become reference tables and every
 * tenant table is distributed by `tenant_id`, colocated with `facts`, so a tenant's rows of all
 * tables live on one worker and each tenant statement runs there whole (a router query). Existing
 * rows move to the workers. Idempotent: tables already distributed are left alone, so it runs
 * after every migration and also picks up tables a later migration adds.
 *
 * `citus.enable_unsafe_triggers` is on for the session: `facts` carries the statement triggers
 * that keep the BM25 statistics (drizzle/0008), which Citus only accepts with it. They are safe
 * here for the reason Citus warns about them: each trigger touches only its own tenant's rows,
 * which are colocated on the same worker.
 *
 * Returns undefined when the database is not distributed (no Citus, or `off`).
 */
export async function distributeTables(
  sql: Sql,
  setting: DistributionSetting,
  log: (message: string) => void = () => {},
): Promise<DistributionResult | undefined> {
  if (setting === 'off') return undefined;
  const [citus] = await sql<{ version: string }[]>`select extversion as version from pg_extension where extname = 'citus'`;
  if (!citus) {
    if (setting === 'citus') {
      throw new Error(
        'MNEMO_DISTRIBUTED=citus, but this database has no citus extension: CREATE EXTENSION citus on the coordinator (and add the workers with citus_add_node) first',
      );
    }
    return undefined;
  }

  const tables = await sql<{ name: string; mode: string | null; references: string[] }[]>`
    select c.relname as name,
           p.partmethod as mode,
           array(select distinct r.relname::text from pg_constraint k join pg_class r on r.oid = k.confrelid
                 where k.conrelid = c.oid and k.contype = 'f' and k.confrelid <> c.oid) as references
    from pg_class c
    join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'public'
    left join pg_dist_partition p on p.logicalrelid = c.oid
    where c.relkind in ('r', 'p') and not c.relispartition
      and (c.relname = any(${REFERENCE_TABLES as unknown as string[]})
           or exists (select from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped))
    order by c.relname`;

  await sql`set citus.enable_unsafe_triggers to on`;
  const changed: string[] = [];
  const done = new Set(tables.filter((t) => t.mode !== null).map((t) => t.name));
  for (const name of REFERENCE_TABLES) {
    if (done.has(name) || !tables.some((t) => t.name === name)) continue;
    await sql`select create_reference_table(${`public.${name}`})`;
    log(`citus: ${name} is a reference table`);
    done.add(name);
    changed.push(name);
  }
  // A table is distributed after those its foreign keys point to: Citus accepts a key to a reference
  // table or to a colocated distributed table, never to a table still on the coordinator alone.
  const tenantTables = tables.filter((t) => !(REFERENCE_TABLES as readonly string[]).includes(t.name));
  let pending = tenantTables.filter((t) => !done.has(t.name));
  if (pending.length > 0 && !done.has(ANCHOR_TABLE)) {
    pending.sort((a, b) => Number(b.name === ANCHOR_TABLE) - Number(a.name === ANCHOR_TABLE));
  }
  while (pending.length > 0) {
    const ready = pending.find((t) => t.references.every((r) => done.has(r) || r === t.name));
    if (!ready) throw new Error(`citus: cannot order the distribution of ${pending.map((t) => t.name).join(', ')} (foreign keys to tables that are not distributed)`);
    if (ready.name === ANCHOR_TABLE) {
      await sql`select create_distributed_table(${`public.${ready.name}`}, 'tenant_id')`;
    } else {
      await sql`select create_distributed_table(${`public.${ready.name}`}, 'tenant_id', colocate_with => ${`public.${ANCHOR_TABLE}`})`;
    }
    log(`citus: ${ready.name} distributed by tenant_id`);
    done.add(ready.name);
    changed.push(ready.name);
    pending = pending.filter((t) => t !== ready);
  }
  await sql`reset citus.enable_unsafe_triggers`;
  return {
    changed,
    distributed: tenantTables.map((t) => t.name),
    reference: REFERENCE_TABLES.filter((name) => tables.some((t) => t.name === name)),
  };
}
