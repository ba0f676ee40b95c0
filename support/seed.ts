/**
 * Rows written straight into the tables, in one statement each: what a test or a bench needs
 * many of (a backlog, a big report, a race between sweeps) without paying for the write path, as
 * many API writes would leave them. Run as the owner (row-level security does not apply); the
 * caller registers the tenant.
 */
import type { Fragment, ISql } from 'postgres';

/** A value, or an SQL expression over the row's number `i`, e.g. sql`'note ' || i`. */
export type Column = string | Fragment;

export interface BulkFacts {
  tenantId: string;
  /** The rows' numbers, `i` in the expressions: `first` (default 1) to `last`, both included. */
  first?: number;
  last: number;
  type: Column;
  /** `content.text`, an expression over `i`. */
  text: Fragment;
  /** Default 1. */
  version?: number;
  /** `asserted_by_id` (asserted by a service, trust `asserted`). */
  assertedBy: string;
  /** created_at and recorded_at: the statement's `now()` (default), or each row's own `clock_timestamp()`. */
  clock?: 'now' | 'clock_timestamp';
  /** Further columns by name. */
  columns?: Readonly<Record<string, Column>>;
  /** Also each fact's revisions, versions 1 to its version, as its writes would have left them. */
  revisions?: boolean;
}

export interface SeededFact {
  id: string;
  type: string;
}

/**
 * Facts numbered `first`…`last` (INSERT … SELECT over generate_series). With `returning`, resolves
 * with their ids and types in the order of their numbers; without, nothing comes back: the rows
 * of a load of 100,000 and more (a report's episodes, a bench's backlog, whose time it measures)
 * would only slow it, sent back for nobody.
 */
export async function seedFacts(sql: ISql, facts: BulkFacts & { returning: true }): Promise<SeededFact[]>;
export async function seedFacts(sql: ISql, facts: BulkFacts): Promise<void>;
export async function seedFacts(sql: ISql, facts: BulkFacts & { returning?: boolean }): Promise<SeededFact[] | void> {
  const value = (column: Column) => (typeof column === 'string' ? sql`${column}` : column);
  const list = (fragments: Fragment[]) => fragments.reduce((joined, next) => sql`${joined}, ${next}`);
  const clock = facts.clock === 'clock_timestamp' ? sql`clock_timestamp()` : sql`now()`;
  const extra = Object.entries(facts.columns ?? {});
  const copied = ['type', 'content', 'trust', 'asserted_by_kind', 'asserted_by_id', 'created_at', 'recorded_at', ...extra.map(([name]) => name)];
  // Identifiers in a fragment of their own: a helper right after `insert into … (` would be read as rows to insert.
  const names = sql`${sql(copied)}`;
  // The revisions are found by the ids the insert returns.
  const returning = facts.returning === true || facts.revisions === true;
  const rows = await sql<SeededFact[]>`
    insert into facts (tenant_id, id, version, ${names})
    select ${facts.tenantId}, gen_random_uuid(), ${facts.version ?? 1}::int, ${list([
      value(facts.type),
      sql`jsonb_build_object('text', ${facts.text})`,
      sql`'asserted'`,
      sql`'service'`,
      sql`${facts.assertedBy}`,
      clock,
      clock,
      ...extra.map(([, column]) => value(column)),
    ])}
    from generate_series(${facts.first ?? 1}::int, ${facts.last}::int) i
    ${returning ? sql`returning id, type` : sql``}`;
  if (facts.revisions && rows.length > 0) {
    const fromFact = list(copied.map((name) => sql`f.${sql([name])}`));
    await sql`
      insert into fact_revisions (tenant_id, fact_id, version, ${names})
      select f.tenant_id, f.id, v, ${fromFact}
      from facts f cross join generate_series(1, f.version) v
      where f.tenant_id = ${facts.tenantId} and f.id in ${sql(rows.map((row) => row.id))}`;
  }
  if (facts.returning) return rows;
}

/**
 * Episodes `first`…`last` as KiwiFS leaves them: `episode <i>`, episode id `ep-<i>`, at
 * `episodes/<i, zero-padded to pathDigits>.md`, none merged yet.
 */
export async function seedEpisodes(
  sql: ISql,
  episodes: { tenantId: string; first?: number; last: number; pathDigits: number; assertedBy: string },
): Promise<void> {
  await seedFacts(sql, {
    tenantId: episodes.tenantId,
    ...(episodes.first === undefined ? {} : { first: episodes.first }),
    last: episodes.last,
    type: 'kiwi.page',
    text: sql`'episode ' || i`,
    assertedBy: episodes.assertedBy,
    columns: {
      memory_kind: 'episodic',
      episode_id: sql`'ep-' || i`,
      path: sql`'episodes/' || lpad(i::text, ${episodes.pathDigits}::int, '0') || '.md'`,
    },
  });
}

/** For `episodes` episodes (a multiple of 1,000), one consolidation per 1,000 merging its first 500: half the episodes covered. */
export async function seedConsolidations(sql: ISql, { tenantId, episodes, assertedBy }: { tenantId: string; episodes: number; assertedBy: string }): Promise<void> {
  await sql`
    insert into facts (tenant_id, id, version, type, content, trust, asserted_by_kind, asserted_by_id, created_at, recorded_at, memory_kind, merged_from)
    select ${tenantId}, gen_random_uuid(), 1, 'kiwi.page', '{"text": "summary"}', 'asserted', 'service', ${assertedBy}, now(), now(), 'semantic',
           (select jsonb_agg(jsonb_build_object('type', 'episode', 'id', 'ep-' || (c * 1000 + k))) from generate_series(1, 500) k)
    from generate_series(0, ${episodes / 1000 - 1}::int) c`;
}

/** How many facts, revisions and idempotency records the tenant has. */
export async function rowCounts(sql: ISql, tenantId: string): Promise<{ facts: number; revisions: number; keys: number }> {
  const [row] = await sql<{ facts: number; revisions: number; keys: number }[]>`
    select (select count(*)::int from facts where tenant_id = ${tenantId}) as facts,
           (select count(*)::int from fact_revisions where tenant_id = ${tenantId}) as revisions,
           (select count(*)::int from idempotency_keys where tenant_id = ${tenantId}) as keys`;
  return row!;
}
