/**
 * The rules across tables that `mnemo restore` checks once every row of an export is in, before it
 * commits. Mnemo's tables have no foreign keys between them (DESIGN §8 keeps the schema one that
 * can be distributed by tenant; the writers keep these rules, each in its one transaction), so
 * PostgreSQL would take a file that breaks them, and the API would then serve it: a fact no
 * revision backs, a tenant the housekeeping never visits. The rules are what the writers keep:
 *
 * - every tenant a row names has its `tenants` row (src/db/tenants.ts: every writer of tenant data
 *   registers the tenant in the same transaction, and retention, erasure and re-embedding visit
 *   only the tenants registered). `idempotency_keys` is the exception: a keyed request refused with
 *   a 4xx stores its answer while the rest of its writes, the registration included, roll back;
 * - every fact has its revisions 1 to its version in `fact_revisions`, the current one included
 *   (src/memory/facts/insert.ts writes both rows together; nothing deletes a revision), and every
 *   revision belongs to a fact;
 * - every embedding is of a revision that exists, by a registered model, with that model's
 *   dimensions (src/memory/facts/vectors.ts);
 * - the keyword statistics, folded and pending, count the live facts of each tenant
 *   (drizzle/0008_keyword_statistics.sql: a search reads them as the count of the facts). Only
 *   documents are compared, not tokens: the embedded PostgreSQL is version 18 and a server may be
 *   15, and a change of the text search parser between them would refuse a faithful export.
 *
 * Each rule answers its first violation, worded for the operator, or undefined. The violations are
 * found in full (`materialized`) before the first is picked: with `order by … limit 1` over the
 * join, the planner expects an early match and chose a nested loop, 35 s for 20,000 facts.
 */
import type { TransactionSql } from 'postgres';
import { ident } from './export-format.ts';

/** Tables whose rows may name a tenant that has no tenants row (see above). */
const UNREGISTERED_TENANTS_ALLOWED = new Set(['idempotency_keys']);

const fact = (id: string, tenant: string) => `fact ${id} of tenant ${JSON.stringify(tenant)}`;

async function tenantsRegistered(tx: TransactionSql, tables: { name: string; columns: string[] }[]): Promise<string | undefined> {
  const named = tables.filter((t) => t.name !== 'tenants' && t.columns.includes('tenant_id') && !UNREGISTERED_TENANTS_ALLOWED.has(t.name));
  if (named.length === 0) return undefined;
  const unregistered = named
    .map((t) => `select distinct tenant_id, '${t.name.replaceAll("'", "''")}' as in_table from ${ident(t.name)} x where not exists (select from tenants r where r.id = x.tenant_id)`)
    .join(' union all ');
  const [found] = await tx.unsafe<{ tenant: string; tables: string[] }[]>(
    `with broken as materialized (select tenant_id as tenant, array_agg(in_table order by in_table) as tables from (${unregistered}) u group by tenant_id)
     select * from broken order by tenant limit 1`,
  );
  return found && `tenant ${JSON.stringify(found.tenant)} has rows in ${found.tables.join(', ')} but no row in tenants`;
}

async function factsHaveTheirRevisions(tx: TransactionSql): Promise<string | undefined> {
  // Versions are unique per fact (the primary key), so count, lowest and highest tell 1 to N.
  const [found] = await tx<{ tenant: string; id: string; version: number }[]>`
    with held as (
      select tenant_id, fact_id, count(*) as n, min(version) as lowest, max(version) as highest
      from fact_revisions group by tenant_id, fact_id),
    broken as materialized (
      select f.tenant_id as tenant, f.id::text as id, f.version
      from facts f left join held h on h.tenant_id = f.tenant_id and h.fact_id = f.id
      where h.n is distinct from f.version or h.lowest <> 1 or h.highest <> f.version)
    select * from broken order by tenant, id limit 1`;
  if (!found) return undefined;
  const versions = await tx<{ version: number }[]>`
    select version from fact_revisions where tenant_id = ${found.tenant} and fact_id = ${found.id} order by version`;
  const held = versions.length === 0 ? 'none' : versions.map((r) => r.version).join(', ');
  return `${fact(found.id, found.tenant)} is at version ${found.version}, so fact_revisions must hold its versions 1 to ${found.version}; it holds ${held}`;
}

async function revisionsHaveTheirFact(tx: TransactionSql): Promise<string | undefined> {
  const [found] = await tx<{ tenant: string; id: string; version: number }[]>`
    with broken as materialized (
      select r.tenant_id as tenant, r.fact_id::text as id, r.version from fact_revisions r
      where not exists (select from facts f where f.tenant_id = r.tenant_id and f.id = r.fact_id))
    select * from broken order by tenant, id, version limit 1`;
  return found && `fact_revisions holds version ${found.version} of ${fact(found.id, found.tenant)}, which facts does not have`;
}

async function embeddingsHaveTheirRevisionAndModel(tx: TransactionSql): Promise<string | undefined> {
  const [found] = await tx<{ tenant: string; id: string; version: number; model: string; dims: number; model_dims: number | null; revision: boolean }[]>`
    with checked as (
      select e.tenant_id as tenant, e.fact_id::text as id, e.version, e.model, e.dims, m.dims as model_dims, r.version is not null as revision
      from fact_embeddings e
      left join embedding_models m on m.model = e.model
      left join fact_revisions r on r.tenant_id = e.tenant_id and r.fact_id = e.fact_id and r.version = e.version),
    broken as materialized (select * from checked where not revision or model_dims is distinct from dims)
    select * from broken order by tenant, id, model limit 1`;
  if (!found) return undefined;
  const embedding = `fact_embeddings holds an embedding of`;
  if (!found.revision) return `${embedding} version ${found.version} of ${fact(found.id, found.tenant)}, which fact_revisions does not have`;
  if (found.model_dims === null) return `${embedding} ${fact(found.id, found.tenant)} by model ${JSON.stringify(found.model)}, which embedding_models does not have`;
  return `${embedding} ${fact(found.id, found.tenant)} with ${found.dims} dimensions, and model ${JSON.stringify(found.model)} has ${found.model_dims}`;
}

async function keywordStatisticsCountTheFacts(tx: TransactionSql): Promise<string | undefined> {
  const [found] = await tx<{ tenant: string; counted: string; live: string }[]>`
    with live as (
      select tenant_id, count(*) as n from facts where invalidated_at is null group by tenant_id),
    counted as (
      select tenant_id, sum(documents) as n
      from (select tenant_id, documents from keyword_corpus_stats
            union all select tenant_id, documents from keyword_stat_changes) s
      group by tenant_id),
    broken as materialized (
      select coalesce(l.tenant_id, c.tenant_id) as tenant, coalesce(c.n, 0)::text as counted, coalesce(l.n, 0)::text as live
      from live l full join counted c on c.tenant_id = l.tenant_id
      where coalesce(c.n, 0) <> coalesce(l.n, 0))
    select * from broken order by tenant limit 1`;
  return found && `the keyword statistics of tenant ${JSON.stringify(found.tenant)} count ${found.counted} live facts, but facts holds ${found.live}`;
}

/** The first rule the restored rows break, worded, or undefined when they keep every one. */
export async function brokenRule(tx: TransactionSql, tables: { name: string; columns: string[] }[]): Promise<string | undefined> {
  return (
    (await tenantsRegistered(tx, tables)) ??
    (await factsHaveTheirRevisions(tx)) ??
    (await revisionsHaveTheirFact(tx)) ??
    (await embeddingsHaveTheirRevisionAndModel(tx)) ??
    (await keywordStatisticsCountTheFacts(tx))
  );
}
