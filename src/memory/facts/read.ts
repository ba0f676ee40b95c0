/**
 * Reads of facts (DESIGN §4): one by id (current, at a version, or as of a time), a list with its
 * filters (current, or as of a time), a fact's revisions, and facts by ids for the searches. Each
 * runs in one transaction for the principal's tenant; who-sees-what is a SQL condition of every
 * query (`visibleTo`), and every statement names its tenant besides row-level security (on Citus
 * that routes it to the tenant's one shard, issue 16).
 */
import { and, desc, eq, getTableColumns, gt, inArray, isNull, lt, lte, or, type SQL } from 'drizzle-orm';
import { type Principal, visibleTo } from '../../auth/permissions.ts';
import { type Caller, inTenantTransaction } from '../../core/caller.ts';
import { decodeCursor, pageOf } from '../../core/cursor.ts';
import { FactNotFound } from '../../core/errors.ts';
import type { Tx } from '../../db/client.ts';
import { factRevisions, facts, type ReviewState } from '../../db/schema.ts';
import { live, namesSubject, SCOPE_KEYS, type ScopeFilter, typeIn, validAt, visibleLive } from './conditions.ts';
import { type Fact, type FactList, LIST_LIMIT_DEFAULT, type ListQuery } from './schemas.ts';
import { embeddingModelOf, toFact } from './wire.ts';

/**
 * The current revisions of facts by id, in one query, as the wire shape. For ids a search has
 * already found; `where` filters them again when they were found in another transaction (a
 * fact deleted since then is left out).
 */
export async function factsByIds(tx: Tx, tenantId: string, ids: readonly string[], where?: SQL): Promise<Map<string, Fact>> {
  if (ids.length === 0) return new Map();
  const rows = await tx
    .select({ row: facts, embeddingModel: embeddingModelOf(tenantId, facts.id, facts.version) })
    .from(facts)
    .where(and(eq(facts.tenantId, tenantId), inArray(facts.id, [...ids]), where));
  return new Map(rows.map(({ row, embeddingModel }) => [row.id, toFact(row.id, row, embeddingModel)]));
}

export interface ReadOptions {
  version?: number | undefined;
  asOf?: string | undefined;
}

export async function readFact(caller: Caller, id: string, options: ReadOptions = {}): Promise<Fact> {
  const { tenantId } = caller.principal;
  return inTenantTransaction(caller, async (tx) => {
    const [current] = await tx.select({ version: facts.version }).from(facts).where(visibleLive(caller.principal, id));
    if (!current) throw new FactNotFound(id);

    const at =
      options.version !== undefined
        ? eq(factRevisions.version, options.version)
        : options.asOf !== undefined
          ? lte(factRevisions.recordedAt, new Date(options.asOf))
          : eq(factRevisions.version, current.version);
    const [revision] = await tx
      .select({ row: factRevisions, embeddingModel: embeddingModelOf(tenantId, factRevisions.factId, factRevisions.version) })
      .from(factRevisions)
      .where(and(eq(factRevisions.tenantId, tenantId), eq(factRevisions.factId, id), at))
      .orderBy(desc(factRevisions.version))
      .limit(1);
    if (!revision) {
      throw new FactNotFound(
        id,
        options.version !== undefined ? `Fact ${id} has no version ${options.version}` : `Fact ${id} did not exist at ${options.asOf}`,
      );
    }
    return toFact(id, revision.row, revision.embeddingModel);
  });
}

export async function listFacts(caller: Caller, query: ListQuery): Promise<FactList> {
  const limit = query.limit ?? LIST_LIMIT_DEFAULT;
  const after = decodeCursor(query.cursor);
  return inTenantTransaction(caller, async (tx) => {
    const rows = query.asOf === undefined ? await listCurrent(tx, caller.principal, query, after, limit + 1) : await listAsOf(tx, caller.principal, query, after, limit + 1);
    return pageOf(rows, limit);
  });
}

/** The columns the list filters read, which `facts` and `fact_revisions` both have. */
type FilterColumns = Pick<
  typeof facts,
  'type' | keyof ScopeFilter | 'trust' | 'memoryKind' | 'path' | 'episodeId' | 'subjects' | 'validFrom' | 'validUntil' | 'review'
>;

/** The list filters of DESIGN §4 over a table's columns (the current rows, or revisions). */
function filters(columns: FilterColumns, query: AsOfFilters & Partial<Omit<ListQuery, 'review'>>): SQL[] {
  const conditions: SQL[] = typeIn(columns.type, query.type, query.types);
  for (const key of SCOPE_KEYS) {
    const value = query[key];
    if (value !== undefined) conditions.push(eq(columns[key], value));
  }
  if (query.trust !== undefined) conditions.push(eq(columns.trust, query.trust));
  if (query.memoryKind !== undefined) conditions.push(eq(columns.memoryKind, query.memoryKind));
  if (query.path !== undefined) conditions.push(eq(columns.path, query.path));
  if (query.episodeId !== undefined) conditions.push(eq(columns.episodeId, query.episodeId));
  if (query.subjectKind !== undefined && query.subjectId !== undefined) conditions.push(namesSubject(columns.subjects, query.subjectKind, query.subjectId));
  if (query.validAt !== undefined) conditions.push(validAt(columns, new Date(query.validAt)));
  if (query.review === null) conditions.push(isNull(columns.review));
  else if (query.review !== undefined) conditions.push(eq(columns.review, query.review));
  return conditions;
}

async function listCurrent(tx: Tx, principal: Principal, query: ListQuery, after: string | undefined, take: number): Promise<Fact[]> {
  const rows = await tx
    .select({ row: facts, embeddingModel: embeddingModelOf(principal.tenantId, facts.id, facts.version) })
    .from(facts)
    .where(
      and(eq(facts.tenantId, principal.tenantId), visibleTo(principal, facts), live(), ...filters(facts, query), after ? lt(facts.id, after) : undefined),
    )
    .orderBy(desc(facts.id))
    .limit(take);
  return rows.map(({ row, embeddingModel }) => toFact(row.id, row, embeddingModel));
}

/**
 * The facts as they were at `asOf`: for each fact, its latest revision recorded by then, kept
 * when that revision was live at that time and matches the filters. A fact deleted or erased
 * since is gone from history too (DESIGN §4: afterwards every route treats it as not found).
 * This reads the tenant's revisions up to `asOf`; it is a history query, not a hot path.
 */
async function listAsOf(tx: Tx, principal: Principal, query: ListQuery, after: string | undefined, take: number): Promise<Fact[]> {
  return factsAsOf(tx, principal, query, after ? lt(facts.id, after) : undefined, take);
}

/**
 * The filters history reads by: the list's, less paging and scope keys (a retrieval's scope is a
 * condition on facts). `review: null` keeps only revisions no hold was on when they were written.
 */
export type AsOfFilters = Pick<ListQuery, 'type' | 'types' | 'trust' | 'memoryKind' | 'subjectKind' | 'subjectId' | 'validAt'> & {
  asOf?: string | undefined;
  review?: ReviewState | null | undefined;
};

/**
 * Facts as they were at `asOf`, newest first: the list route's history (listFacts) and a
 * retrieval's mode "list" with asOf. `where` is a further condition on the current row (`facts`),
 * which holds what never changes between revisions (id, scope) and what applies now (a hold now).
 * The filters, `review` among them, apply to the revision of then (a hold then).
 */
export async function factsAsOf(tx: Tx, principal: Principal, query: AsOfFilters, where: SQL | undefined, take: number): Promise<Fact[]> {
  const asOf = new Date(query.asOf!);
  const { tenantId } = principal;
  const atTime = tx.$with('at_time').as(
    tx
      .selectDistinctOn([factRevisions.factId], {
        ...getTableColumns(factRevisions),
        embeddingModel: embeddingModelOf(tenantId, factRevisions.factId, factRevisions.version).as('embedding_model'),
      })
      .from(factRevisions)
      .where(and(eq(factRevisions.tenantId, tenantId), lte(factRevisions.recordedAt, asOf)))
      .orderBy(desc(factRevisions.factId), desc(factRevisions.version)),
  );
  const rows = await tx
    .with(atTime)
    .select()
    .from(atTime)
    .innerJoin(facts, and(eq(facts.tenantId, atTime.tenantId), eq(facts.id, atTime.factId)))
    .where(
      and(
        eq(facts.tenantId, tenantId),
        isNull(facts.invalidatedAt),
        visibleTo(principal, facts),
        isNull(atTime.invalidatedAt),
        or(isNull(atTime.expiresAt), gt(atTime.expiresAt, asOf)),
        ...filters(atTime as unknown as FilterColumns, query),
        where,
      ),
    )
    .orderBy(desc(atTime.factId))
    .limit(take);
  return rows.map(({ at_time: { embeddingModel, ...row } }) => toFact(row.factId, row, embeddingModel));
}

export async function listRevisions(caller: Caller, id: string): Promise<{ data: Fact[] }> {
  const { tenantId } = caller.principal;
  return inTenantTransaction(caller, async (tx) => {
    const [current] = await tx.select({ id: facts.id }).from(facts).where(visibleLive(caller.principal, id));
    if (!current) throw new FactNotFound(id);
    const rows = await tx
      .select({ row: factRevisions, embeddingModel: embeddingModelOf(tenantId, factRevisions.factId, factRevisions.version) })
      .from(factRevisions)
      .where(and(eq(factRevisions.tenantId, tenantId), eq(factRevisions.factId, id)))
      .orderBy(desc(factRevisions.version));
    return { data: rows.map(({ row, embeddingModel }) => toFact(id, row, embeddingModel)) };
  });
}
