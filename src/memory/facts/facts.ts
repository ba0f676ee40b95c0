/**
 * Facts: write, read, list, supersede, verify, delete, revisions (DESIGN §4). Each verb runs in
 * one transaction for the principal's tenant; who-sees-what is a SQL condition of every query
 * (`visibleTo`), and the write rules are checked before anything is written.
 *
 * Every statement names its tenant (`tenant_id = …`) on each tenant table it reads or changes,
 * although row-level security already confines it: on Citus that predicate is what lets the
 * coordinator route the statement to the tenant's one shard (issue 16); RLS stays the second wall.
 */
import { isDeepStrictEqual } from 'node:util';
import { and, desc, eq, getTableColumns, gt, inArray, isNull, lt, lte, or, type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { canWrite, type Principal, scopeKind, visibleTo } from '../../auth/permissions.ts';
import { onCitus, pipelined, type Tx } from '../../db/client.ts';
import { factRevisions, facts, type ReviewState } from '../../db/schema.ts';
import { registerTenant } from '../../db/tenants.ts';
import { live, namesSubject, SCOPE_KEYS, typeIn, validAt } from './conditions.ts';
import { appendMergedFrom } from '../../kiwifs/coverage.ts';
import { assertNoErasureInProgress } from '../../core/erasure-guard.ts';
import { decodeCursor, pageOf } from '../../core/cursor.ts';
import { carryEmbeddings } from './vectors.ts';
import { AppError } from '../../errors.ts';
import { assertTenantAdmin, BadInput, ErasureInProgress, FactChanged, FactNotFound, LegalHold, PermissionDenied, ScopeMismatch } from '../../core/errors.ts';
import { type Caller, inTenantTransaction } from '../../core/caller.ts';
import { uuidv7 } from '../../core/ids.ts';
import {
  type Fact,
  type FactList,
  LIST_LIMIT_DEFAULT,
  MERGED_FROM_MAX,
  type ListQuery,
  type ProvenanceRef,
  type SupersedeBody,
  type VerifyBody,
  type WriteFactBody,
} from './schemas.ts';

type FactRow = typeof facts.$inferSelect;
type RevisionRow = typeof factRevisions.$inferSelect;
/** The columns a revision shares with the current row (everything but the ids and search vector). */
type RevisionBody = Omit<RevisionRow, 'tenantId' | 'factId'>;

const DAY_MS = 24 * 3600 * 1000;

// ---------------------------------------------------------------------------------------------
// Shaping

const iso = (date: Date | null) => (date ? date.toISOString() : null);

function scopeOf(row: Pick<FactRow, 'tenantId' | 'orgId' | 'projectId' | 'userId' | 'participantId' | 'threadId' | 'sessionId'>) {
  const scope: Fact['scope'] = { tenantId: row.tenantId };
  for (const key of SCOPE_KEYS) {
    if (row[key] !== null) scope[key] = row[key];
  }
  return scope;
}

/** A stored revision as every route returns it. */
export function toFact(id: string, row: RevisionBody & Pick<FactRow, 'tenantId'>, embeddingModel: string | null): Fact {
  return {
    id,
    version: row.version,
    type: row.type,
    scope: scopeOf(row),
    content: row.content,
    trust: row.trust,
    assertedBy: { kind: row.assertedByKind, id: row.assertedById },
    verifiedBy: row.verifiedById ? { kind: 'user', id: row.verifiedById } : null,
    verifiedAt: iso(row.verifiedAt),
    retention: { keepDays: row.keepDays, keepUntil: iso(row.keepUntil), legalHold: row.legalHold },
    expiresAt: iso(row.expiresAt),
    subjects: row.subjects,
    validFrom: iso(row.validFrom),
    validUntil: iso(row.validUntil),
    observedAt: iso(row.observedAt),
    memoryKind: row.memoryKind,
    episodeId: row.episodeId,
    path: row.path,
    derivedFrom: row.derivedFrom,
    mergedFrom: row.mergedFrom,
    embeddingModel,
    createdAt: row.createdAt.toISOString(),
    recordedAt: row.recordedAt.toISOString(),
    invalidatedAt: iso(row.invalidatedAt),
    invalidationReason: row.invalidationReason,
    review: row.review,
  };
}

/**
 * The active embedding model, when it has embedded exactly this revision; null otherwise
 * (no embeddings configured, not embedded yet, or embedded at another version).
 */
const embeddingModelOf = (tenantId: string, factId: AnyPgColumn | SQL, version: AnyPgColumn | SQL) => sql<string | null>`(
  select e.model from fact_embeddings e
  join embedding_models m on m.model = e.model and m.state = 'active'
  where e.tenant_id = ${tenantId} and e.fact_id = ${factId} and e.version = ${version}
  limit 1)`;

// ---------------------------------------------------------------------------------------------
// Shared pieces

/** The database's clock, read after any row lock, so revisions of a fact are recorded in order. */
async function clock(tx: Tx): Promise<Date> {
  const [row] = (await tx.execute(sql`select clock_timestamp() as now`)) as unknown as [{ now: Date | string }];
  return new Date(row.now);
}

function expiry(retention: { keepDays: number | null; keepUntil: Date | null }, from: Date): Date | null {
  if (retention.keepDays !== null) return new Date(from.getTime() + retention.keepDays * DAY_MS);
  return retention.keepUntil;
}

const toDate = (value: string | undefined) => (value === undefined ? undefined : new Date(value));

/** The fact `id`, if the principal can see it and it is live: the condition of every lookup. */
const visibleLive = (principal: Principal, id: string) =>
  and(eq(facts.tenantId, principal.tenantId), eq(facts.id, id), visibleTo(principal, facts), live());

/** The current row of a fact the principal can see and that is live, locked for update. */
async function lockVisible(tx: Tx, principal: Principal, id: string): Promise<FactRow> {
  const [row] = await tx.select().from(facts).where(visibleLive(principal, id)).for('update');
  if (!row) throw new FactNotFound(id);
  return row;
}

function assertWritable(principal: Principal, row: FactRow): void {
  if (!canWrite(principal, row)) throw new PermissionDenied('You may read this fact but not change it');
}

function assertExpectedVersion(row: FactRow, expectVersion: number | undefined): void {
  if (expectVersion !== undefined && expectVersion !== row.version) throw new FactChanged(expectVersion, row.version);
}

function assertLegalHoldChange(principal: Principal, requested: boolean | undefined, current: boolean): void {
  if (requested !== undefined && requested !== current) assertTenantAdmin(principal, 'Only a tenant admin may place or lift a legal hold');
}

/** Writes the next revision of a locked fact: the current row and its revision row together. */
async function writeRevision(tx: Tx, current: FactRow, next: Partial<RevisionBody>): Promise<Fact> {
  // The generated columns are left out: Postgres computes them from the revision.
  const { searchVector: _vector, searchLength: _length, mergeKeys: _keys, episodeKeys: _episodeKeys, id, tenantId, ...body } = current;
  const revision: RevisionBody = { ...body, ...next, version: current.version + 1 };
  await tx.update(facts).set(revision).where(and(eq(facts.tenantId, tenantId), eq(facts.id, id)));
  await tx.insert(factRevisions).values({ ...revision, tenantId, factId: id });
  // Same text, same vectors: carried to the new version rather than computed again.
  // Compared as values, as jsonb compares them: key order is not meaning.
  const unchanged = isDeepStrictEqual(revision.content, current.content);
  if (unchanged) await carryEmbeddings(tx, tenantId, id, current.version, revision.version);
  return toFact(id, { ...revision, tenantId }, unchanged ? await embeddingModelNow(tx, tenantId, id, revision.version) : null);
}

async function embeddingModelNow(tx: Tx, tenantId: string, id: string, version: number): Promise<string | null> {
  const [row] = (await tx.execute(sql`select ${embeddingModelOf(tenantId, sql`${id}::uuid`, sql`${version}::int`)} as model`)) as unknown as [
    { model: string | null },
  ];
  return row?.model ?? null;
}

// ---------------------------------------------------------------------------------------------
// Verbs

export interface WriteOptions {
  /** From `X-Provenance` (+ `X-Actor`): appended to `derivedFrom`. */
  provenance?: ProvenanceRef | undefined;
  /** The erasure HMAC key, when erasure is on: writes naming someone being erased are refused. */
  erasureKey?: string | undefined;
  /**
   * Hold the fact for a person's review (`pending`), or clear a hold (null), when an agent's text
   * reads like an instruction (src/memory/remember/remember.ts); absent, a new fact is not held and a
   * supersede keeps the fact's state.
   */
  review?: ReviewState | null | undefined;
  /**
   * The trust of a supersede's new content. An agent's text is `unverified` however the fact
   * stood (src/memory/remember/remember.ts); absent, verified content becomes `asserted` and other trust
   * stays (DESIGN §4).
   */
  trust?: 'unverified' | undefined;
}

/** The write rules of one new fact (DESIGN §3, §4), checked before anything is written. */
function assertWritableNew(principal: Principal, body: WriteFactBody): void {
  const { tenantId: scopeTenant, ...scope } = body.scope ?? {};
  if (scopeTenant !== undefined && scopeTenant !== principal.tenantId) throw new ScopeMismatch();
  if (scopeKind(scope) === 'invalid') {
    throw new BadInput('scope', 'participantId, threadId and sessionId need projectId or userId');
  }
  if (!canWrite(principal, scope)) throw new PermissionDenied('You may not write facts in this scope');
  assertLegalHoldChange(principal, body.retention?.legalHold, false);
}

/** An error of item `index` of a batch: its message and field paths name the item (`facts.3.scope`). */
function itemError(error: unknown, index: number): unknown {
  if (!(error instanceof AppError)) return error;
  const prefix = `facts.${index}`;
  const details = error.extra.details as { path: string; message: string }[] | undefined;
  return new AppError(
    error.code,
    error instanceof BadInput ? `${prefix}.${error.message}` : `${prefix}: ${error.message}`,
    {
      ...error.extra,
      item: index,
      ...(details ? { details: details.map((d) => ({ ...d, path: d.path ? `${prefix}.${d.path}` : prefix })) } : {}),
    },
  );
}

const isoOrNull = (value: string | undefined) => (value === undefined ? null : new Date(value).toISOString());

/** The columns a new fact's row and its first revision share, in the order both inserts list them. */
const NEW_FACT_COLUMNS = sql.raw(`version, type, org_id, project_id, user_id, participant_id, thread_id, session_id, content, trust,
    asserted_by_kind, asserted_by_id, keep_days, keep_until, legal_hold, expires_at, subjects, valid_from, valid_until,
    observed_at, memory_kind, episode_id, path, derived_from, merged_from, created_at, recorded_at, review`);

/** The database's clock as the API shows it (to the millisecond), so `asOf` at a returned `recordedAt` finds the fact. */
const RECORDED_AT = sql`date_trunc('milliseconds', statement_timestamp())`;

type NewFactRow = ReturnType<typeof newFactRows>[number];

function newFactRows(bodies: readonly WriteFactBody[], options: WriteOptions, local: Date) {
  return bodies.map((body) => {
    const { tenantId: _tenant, ...scope } = body.scope ?? {};
    return {
      id: uuidv7(local.getTime()),
      type: body.type,
      org_id: scope.orgId ?? null,
      project_id: scope.projectId ?? null,
      user_id: scope.userId ?? null,
      participant_id: scope.participantId ?? null,
      thread_id: scope.threadId ?? null,
      session_id: scope.sessionId ?? null,
      content: body.content,
      trust: body.trust ?? 'asserted',
      keep_days: body.retention?.keepDays ?? null,
      keep_until: isoOrNull(body.retention?.keepUntil),
      legal_hold: body.retention?.legalHold ?? false,
      subjects: body.subjects ?? [],
      valid_from: isoOrNull(body.validFrom),
      valid_until: isoOrNull(body.validUntil),
      observed_at: isoOrNull(body.observedAt),
      memory_kind: body.memoryKind ?? null,
      episode_id: body.episodeId ?? null,
      path: body.path ?? null,
      derived_from: options.provenance ? [options.provenance] : [],
      merged_from: appendMergedFrom([], body.mergedFrom ?? [], local),
      review: options.review ?? null,
    };
  });
}

/**
 * On one PostgreSQL: the tenant, the facts and their revisions in one statement, the rows read from
 * one JSON document (one parameter, whatever the number of facts). Every fact and revision is
 * recorded at the statement's time. Returns that time.
 */
async function insertFromDocument(tx: Tx, principal: Principal, assertedByKind: string, rows: readonly NewFactRow[]): Promise<Date> {
  const { tenantId } = principal;
  const values = sql`1, r.type, r.org_id, r.project_id, r.user_id, r.participant_id, r.thread_id, r.session_id, r.content, r.trust,
    ${assertedByKind}, ${principal.sub}, r.keep_days, r.keep_until, r.legal_hold,
    case when r.keep_days is not null then now.at + r.keep_days * interval '24 hours' else r.keep_until end,
    r.subjects, r.valid_from, r.valid_until, r.observed_at, r.memory_kind, r.episode_id, r.path, r.derived_from, r.merged_from,
    now.at, now.at, r.review`;
  const [written] = (await tx.execute(sql`
    with now as (select ${RECORDED_AT} as at),
    rows as (
      select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r(
        id uuid, type text, org_id text, project_id text, user_id text, participant_id text, thread_id text, session_id text,
        content jsonb, trust text, keep_days integer, keep_until timestamptz, legal_hold boolean, subjects jsonb,
        valid_from timestamptz, valid_until timestamptz, observed_at timestamptz, memory_kind text, episode_id text, path text,
        derived_from jsonb, merged_from jsonb, review text)
    ),
    tenant as (insert into tenants (id) values (${tenantId}) on conflict (id) do nothing),
    fact as (insert into facts (tenant_id, id, ${NEW_FACT_COLUMNS}) select ${tenantId}, r.id, ${values} from rows r, now),
    revision as (insert into fact_revisions (tenant_id, fact_id, ${NEW_FACT_COLUMNS}) select ${tenantId}, r.id, ${values} from rows r, now)
    select at from now`)) as unknown as [{ at: Date | string }];
  return new Date(written.at);
}

/**
 * On Citus: three statements sent together (one round trip): the tenant registered (read first:
 * `tenants` is a reference table, and a write to it commits on every node), the facts as rows of
 * one VALUES list, and their revisions copied from the facts just written, so they carry the same
 * values and time by construction. An INSERT of VALUES naming one tenant is routed whole to the
 * tenant's shard, and so is an INSERT … SELECT between two colocated tables filtered on that
 * tenant; the one-statement shape above, an INSERT … SELECT from a set-returning function, is run
 * through the coordinator instead, which copies the rows to the shard with COPY, which PostgreSQL
 * refuses on a table under row-level security. Returns the facts' recorded time.
 */
async function insertAsValues(tx: Tx, principal: Principal, assertedByKind: string, rows: readonly NewFactRow[]): Promise<Date> {
  const { tenantId } = principal;
  const json = (value: unknown) => sql`${JSON.stringify(value)}::jsonb`;
  const values = rows.map(
    (r) => sql`(${tenantId}, ${r.id}::uuid, 1, ${r.type}, ${r.org_id}, ${r.project_id}, ${r.user_id}, ${r.participant_id}, ${r.thread_id},
      ${r.session_id}, ${json(r.content)}, ${r.trust}, ${assertedByKind}, ${principal.sub}, ${r.keep_days}::integer,
      ${r.keep_until}::timestamptz, ${r.legal_hold}::boolean,
      case when ${r.keep_days}::integer is not null then ${RECORDED_AT} + ${r.keep_days}::integer * interval '24 hours' else ${r.keep_until}::timestamptz end,
      ${json(r.subjects)}, ${r.valid_from}::timestamptz, ${r.valid_until}::timestamptz, ${r.observed_at}::timestamptz, ${r.memory_kind},
      ${r.episode_id}, ${r.path}, ${json(r.derived_from)}, ${json(r.merged_from)}, ${RECORDED_AT}, ${RECORDED_AT}, ${r.review})`,
  );
  const ids = rows.map((r) => r.id);
  const [, inserted] = await pipelined([
    registerTenant(tx, tenantId),
    tx.execute(sql`insert into facts (tenant_id, id, ${NEW_FACT_COLUMNS}) values ${sql.join(values, sql`, `)} returning recorded_at as at`),
    tx.execute(sql`
      insert into fact_revisions (tenant_id, fact_id, ${NEW_FACT_COLUMNS})
      select tenant_id, id, ${NEW_FACT_COLUMNS} from facts where tenant_id = ${tenantId} and id = any(${`{${ids.join(',')}}`}::uuid[])`),
  ]);
  const [written] = inserted as unknown as [{ at: Date | string }];
  return new Date(written.at);
}

/**
 * Inserts new facts, version 1, and their revisions, whatever their number, in one round trip,
 * in the shape the engine runs fastest: one statement over a JSON document on PostgreSQL, VALUES
 * routed to the tenant's shard on Citus (measured: a 1,000-fact batch through the API at 0.38× its
 * raw statements with the VALUES shape on PostgreSQL, against 0.73× with the document's).
 */
async function insertNewFacts(tx: Tx, principal: Principal, bodies: readonly WriteFactBody[], options: WriteOptions): Promise<Fact[]> {
  // The ids' time and undated mergedFrom entries use this process's clock: neither orders revisions.
  const local = new Date();
  const assertedByKind = principal.role === 'service' ? 'service' : 'user';
  const rows = newFactRows(bodies, options, local);
  const now = await (onCitus(tx) ? insertAsValues : insertFromDocument)(tx, principal, assertedByKind, rows);
  return rows.map((row) => {
    const retention = { keepDays: row.keep_days, keepUntil: row.keep_until === null ? null : new Date(row.keep_until), legalHold: row.legal_hold };
    const revision: RevisionBody = {
      version: 1,
      type: row.type,
      orgId: row.org_id,
      projectId: row.project_id,
      userId: row.user_id,
      participantId: row.participant_id,
      threadId: row.thread_id,
      sessionId: row.session_id,
      content: row.content,
      trust: row.trust,
      assertedByKind,
      assertedById: principal.sub,
      verifiedById: null,
      verifiedAt: null,
      ...retention,
      expiresAt: expiry(retention, now),
      subjects: row.subjects,
      validFrom: row.valid_from === null ? null : new Date(row.valid_from),
      validUntil: row.valid_until === null ? null : new Date(row.valid_until),
      observedAt: row.observed_at === null ? null : new Date(row.observed_at),
      memoryKind: row.memory_kind,
      episodeId: row.episode_id,
      path: row.path,
      derivedFrom: row.derived_from,
      mergedFrom: row.merged_from,
      createdAt: now,
      recordedAt: now,
      invalidatedAt: null,
      invalidationReason: null,
      review: row.review,
    };
    return toFact(row.id, { ...revision, tenantId: principal.tenantId }, null);
  });
}

export async function writeFact(caller: Caller, body: WriteFactBody, options: WriteOptions = {}): Promise<Fact> {
  assertWritableNew(caller.principal, body);
  return inTenantTransaction(
    caller,
    async (tx) => {
      await assertNoErasureInProgress(tx, options.erasureKey, [{ ...body.scope, subjects: body.subjects }], caller.principal.tenantId);
      const [fact] = await insertNewFacts(tx, caller.principal, [body], options);
      return fact!;
    },
    undefined,
    { prepared: true },
  );
}

/**
 * Writes new facts all or nothing, in one transaction (DESIGN §4;
 * docs/decisions/0039-batch-writes.md): every item is checked first, and the first refused item refuses the batch
 * with an error naming it (`facts.N`), so a client fixes it and retries the batch as it was.
 */
export async function writeFacts(caller: Caller, bodies: readonly WriteFactBody[], options: WriteOptions = {}): Promise<Fact[]> {
  bodies.forEach((body, index) => {
    try {
      assertWritableNew(caller.principal, body);
    } catch (error) {
      throw itemError(error, index);
    }
  });
  return inTenantTransaction(
    caller,
    async (tx) => {
      try {
        await assertNoErasureInProgress(
          tx,
          options.erasureKey,
          bodies.map((body) => ({ ...body.scope, subjects: body.subjects })),
          caller.principal.tenantId,
        );
      } catch (error) {
        throw error instanceof ErasureInProgress ? itemError(error, error.index) : error;
      }
      return insertNewFacts(tx, caller.principal, bodies, options);
    },
    undefined,
    { prepared: true },
  );
}

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

type FilterColumns = Pick<
  typeof facts,
  | 'type'
  | 'orgId'
  | 'projectId'
  | 'userId'
  | 'participantId'
  | 'threadId'
  | 'sessionId'
  | 'trust'
  | 'memoryKind'
  | 'path'
  | 'episodeId'
  | 'subjects'
  | 'validFrom'
  | 'validUntil'
  | 'review'
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

export async function supersedeFact(caller: Caller, id: string, body: SupersedeBody, options: WriteOptions = {}): Promise<Fact> {
  const { principal } = caller;
  return inTenantTransaction(caller, async (tx) => {
    const current = await lockVisible(tx, principal, id);
    assertWritable(principal, current);
    assertExpectedVersion(current, body.expectVersion);
    assertLegalHoldChange(principal, body.retention?.legalHold, current.legalHold);
    await assertNoErasureInProgress(tx, options.erasureKey, {
      participantId: current.participantId,
      threadId: current.threadId,
      subjects: [...current.subjects, ...(body.subjects ?? [])],
    }, principal.tenantId);
    const now = await clock(tx);

    // Without content the claim is unchanged (say, a legal hold lifted): who asserted it and
    // who verified it stay, and so do its vectors (writeRevision carries them).
    const next: Partial<RevisionBody> =
      body.content === undefined
        ? { recordedAt: now }
        : {
            content: body.content,
            // New content is no longer what a person verified.
            trust: options.trust ?? (current.trust === 'verified' ? 'asserted' : current.trust),
            assertedByKind: principal.role === 'service' ? 'service' : 'user',
            assertedById: principal.sub,
            verifiedById: null,
            verifiedAt: null,
            recordedAt: now,
          };
    if (body.retention !== undefined) {
      // keepDays and keepUntil are one setting, the expiry: naming either replaces it; naming
      // neither (only legalHold) keeps it, so lifting a hold does not change when a fact expires.
      const { keepDays, keepUntil } = body.retention;
      if (keepDays !== undefined || keepUntil !== undefined) {
        const retention = { keepDays: keepDays ?? null, keepUntil: toDate(keepUntil) ?? null };
        Object.assign(next, retention, { expiresAt: expiry(retention, now) });
      }
      if (body.retention.legalHold !== undefined) next.legalHold = body.retention.legalHold;
    }
    if (body.subjects !== undefined) next.subjects = body.subjects;
    if (body.validFrom !== undefined) next.validFrom = new Date(body.validFrom);
    if (body.validUntil !== undefined) next.validUntil = new Date(body.validUntil);
    if (body.observedAt !== undefined) next.observedAt = new Date(body.observedAt);
    // Added to the entries the fact has, as KiwiFS injects them: a consolidation job that
    // re-merges an episode does not list it twice.
    if (body.mergedFrom !== undefined) {
      next.mergedFrom = appendMergedFrom(current.mergedFrom, body.mergedFrom, now);
      if (next.mergedFrom.length > MERGED_FROM_MAX) {
        throw new BadInput('mergedFrom', `a fact holds at most ${MERGED_FROM_MAX} entries (it would hold ${next.mergedFrom.length}); consolidate into a new fact`);
      }
    }
    if (options.provenance) next.derivedFrom = [...current.derivedFrom, options.provenance];
    if (options.review !== undefined) next.review = options.review;

    const validFrom = next.validFrom ?? current.validFrom;
    const validUntil = next.validUntil ?? current.validUntil;
    if (validFrom && validUntil && validFrom > validUntil) {
      throw new BadInput('validFrom', 'must not be later than validUntil');
    }
    return writeRevision(tx, current, next);
  });
}

/**
 * A review is a second pair of eyes (docs/guide/review.md): whoever asserted a held text, admins
 * included, does not release it. The one verifying is always a person, so `user` is their kind.
 */
function assertNotOwnHeldText(principal: Principal, current: FactRow): void {
  if (current.review === 'pending' && current.assertedByKind === 'user' && current.assertedById === principal.sub) {
    throw new PermissionDenied(
      'This fact is held for review and you asserted its text (you, or an agent with your token): another person with write access to its scope, a tenant admin for one, must verify it',
    );
  }
}

export async function verifyFact(caller: Caller, id: string, body: VerifyBody): Promise<Fact> {
  const { principal } = caller;
  return inTenantTransaction(caller, async (tx) => {
    const current = await lockVisible(tx, principal, id);
    assertWritable(principal, current);
    if (principal.role === 'service') {
      throw new PermissionDenied('Only a person (role admin or member) may verify a fact');
    }
    assertNotOwnHeldText(principal, current);
    assertExpectedVersion(current, body.expectVersion);
    const now = await clock(tx);
    // A person has read it: a hold for review ends here.
    return writeRevision(tx, current, { trust: 'verified', verifiedById: principal.sub, verifiedAt: now, recordedAt: now, review: null });
  });
}

export interface DeleteOptions {
  expectVersion?: number | undefined;
}

/** Writes the tombstone revision; the retention sweep purges the content of every revision later. */
export async function deleteFact(caller: Caller, id: string, options: DeleteOptions = {}): Promise<Fact> {
  const { principal } = caller;
  return inTenantTransaction(caller, async (tx) => {
    const current = await lockVisible(tx, principal, id);
    assertWritable(principal, current);
    if (current.legalHold) throw new LegalHold(id);
    assertExpectedVersion(current, options.expectVersion);
    const now = await clock(tx);
    return writeRevision(tx, current, { invalidatedAt: now, invalidationReason: 'deleted', recordedAt: now });
  });
}

/**
 * Closes a fact the retention sweep found past its expiry, as a delete does but with reason
 * "expired". The caller holds the row's lock and has checked it is not under legal hold.
 */
export async function expireFact(tx: Tx, current: FactRow): Promise<Fact> {
  const now = await clock(tx);
  return writeRevision(tx, current, { invalidatedAt: now, invalidationReason: 'expired', recordedAt: now });
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
