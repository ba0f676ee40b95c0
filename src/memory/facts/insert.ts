/**
 * New facts (DESIGN §4): one, or a batch written all or nothing, each at version 1 with its first
 * revision. The write rules are checked before anything is written, and every statement names its
 * tenant besides row-level security (on Citus that routes it to the tenant's one shard, issue 16).
 */
import { getTableColumns, type SQL, sql } from 'drizzle-orm';
import { canWrite, type Principal, scopeKind } from '../../auth/permissions.ts';
import { type Caller, inTenantTransaction } from '../../core/caller.ts';
import { assertNoErasureInProgress } from '../../core/erasure-guard.ts';
import { BadInput, ErasureInProgress, PermissionDenied, ScopeMismatch } from '../../core/errors.ts';
import { uuidv7 } from '../../core/ids.ts';
import { onCitus, pipelined, type Tx } from '../../db/client.ts';
import { factRevisions } from '../../db/schema.ts';
import { registerTenant } from '../../db/tenants.ts';
import { AppError } from '../../foundation/app-error.ts';
import { phase } from '../../foundation/request-timing.ts';
import { appendMergedFrom } from '../../kiwifs/coverage.ts';
import type { Fact, WriteFactBody } from './schemas.ts';
import { type RevisionBody, toFact } from './wire.ts';
import { assertLegalHoldChange, expiry, toDate, type WriteOptions } from './write-rules.ts';

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

// ---------------------------------------------------------------------------------------------
// The columns: db/schema/facts.ts's revision columns are the one list every insert names.

const revisionColumns = getTableColumns(factRevisions);
type Column = keyof RevisionBody;
/** The columns of a revision in the schema's order; a fact's current row has the same ones. */
const COLUMNS = (Object.keys(revisionColumns) as (keyof typeof revisionColumns)[]).filter(
  (key): key is Column => key !== 'tenantId' && key !== 'factId',
);
const COLUMN_NAMES = sql.raw(COLUMNS.map((key) => revisionColumns[key].name).join(', '));

/** What the statement's clock sets: a new fact's times, and so its expiry when it is kept `keepDays`. */
const TIMED = ['expiresAt', 'createdAt', 'recordedAt'] as const;
type Timed = (typeof TIMED)[number];
const isTimed = (key: Column): key is Timed => (TIMED as readonly Column[]).includes(key);
/** The columns whose values the request gives. */
type Given = Exclude<Column, Timed>;
const GIVEN = COLUMNS.filter((key): key is Given => !isTimed(key));

/** A new fact's first revision as the request gives it, before the statement's clock sets its times. */
type NewRevision = Omit<RevisionBody, Timed>;
interface NewFact {
  id: string;
  revision: NewRevision;
}

/** The database's clock as the API shows it (to the millisecond), so `asOf` at a returned `recordedAt` finds the fact. */
const RECORDED_AT = sql`date_trunc('milliseconds', statement_timestamp())`;

/**
 * A new fact's values in COLUMNS' order: each given column as `given` reads it (a field of the
 * JSON document, or a parameter), the times from the statement's clock `now`.
 */
function valuesOf(given: (key: Given) => SQL, now: SQL): SQL {
  const timed: Record<Timed, SQL> = {
    expiresAt: sql`case when ${given('keepDays')} is not null then ${now} + ${given('keepDays')} * interval '24 hours' else ${given('keepUntil')} end`,
    createdAt: now,
    recordedAt: now,
  };
  return sql.join(
    COLUMNS.map((key) => (isTimed(key) ? timed[key] : given(key))),
    sql`, `,
  );
}

function newRevision(principal: Principal, body: WriteFactBody, options: WriteOptions, local: Date): NewRevision {
  const { tenantId: _tenant, ...scope } = body.scope ?? {};
  return {
    version: 1,
    type: body.type,
    orgId: scope.orgId ?? null,
    projectId: scope.projectId ?? null,
    userId: scope.userId ?? null,
    participantId: scope.participantId ?? null,
    threadId: scope.threadId ?? null,
    sessionId: scope.sessionId ?? null,
    content: body.content,
    trust: body.trust ?? 'asserted',
    assertedByKind: principal.role === 'service' ? 'service' : 'user',
    assertedById: principal.sub,
    verifiedById: null,
    verifiedAt: null,
    keepDays: body.retention?.keepDays ?? null,
    keepUntil: toDate(body.retention?.keepUntil) ?? null,
    legalHold: body.retention?.legalHold ?? false,
    subjects: body.subjects ?? [],
    validFrom: toDate(body.validFrom) ?? null,
    validUntil: toDate(body.validUntil) ?? null,
    observedAt: toDate(body.observedAt) ?? null,
    memoryKind: body.memoryKind ?? null,
    episodeId: body.episodeId ?? null,
    path: body.path ?? null,
    derivedFrom: options.provenance ? [options.provenance] : [],
    mergedFrom: appendMergedFrom([], body.mergedFrom ?? [], local),
    invalidatedAt: null,
    invalidationReason: null,
    review: options.review ?? null,
    reviewReason: options.review ? (options.reviewReason ?? null) : null,
  };
}

/**
 * On one PostgreSQL: the tenant, the facts and their revisions in one statement, the rows read from
 * one JSON document (one parameter, whatever the number of facts). Every fact and revision is
 * recorded at the statement's time. Returns that time.
 */
async function insertFromDocument(tx: Tx, tenantId: string, rows: readonly NewFact[]): Promise<Date> {
  // Dates become ISO strings in the document, read back as the columns' types.
  const document = rows.map(({ id, revision }) => Object.fromEntries([['id', id], ...GIVEN.map((key) => [revisionColumns[key].name, revision[key]])]));
  const recordType = sql.raw(['id uuid', ...GIVEN.map((key) => `${revisionColumns[key].name} ${revisionColumns[key].getSQLType()}`)].join(', '));
  const values = valuesOf((key) => sql.raw(`r.${revisionColumns[key].name}`), sql`now.at`);
  const [written] = (await tx.execute(sql`
    with now as (select ${RECORDED_AT} as at),
    rows as (select * from jsonb_to_recordset(${JSON.stringify(document)}::jsonb) as r(${recordType})),
    tenant as (insert into tenants (id) values (${tenantId}) on conflict (id) do nothing),
    fact as (insert into facts (tenant_id, id, ${COLUMN_NAMES}) select ${tenantId}, r.id, ${values} from rows r, now),
    revision as (insert into fact_revisions (tenant_id, fact_id, ${COLUMN_NAMES}) select ${tenantId}, r.id, ${values} from rows r, now)
    select at from now`)) as unknown as [{ at: Date | string }];
  return new Date(written.at);
}

/** A revision's value as a parameter of its column's type (jsonb as its JSON text, a time as ISO). */
function parameter(revision: NewRevision, key: Given): SQL {
  const type = revisionColumns[key].getSQLType();
  const value = revision[key];
  const sent = value === null ? null : type === 'jsonb' ? JSON.stringify(value) : value instanceof Date ? value.toISOString() : value;
  return sql`${sent}::${sql.raw(type)}`;
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
async function insertAsValues(tx: Tx, tenantId: string, rows: readonly NewFact[]): Promise<Date> {
  const values = rows.map(({ id, revision }) => sql`(${tenantId}, ${id}::uuid, ${valuesOf((key) => parameter(revision, key), RECORDED_AT)})`);
  const ids = rows.map((r) => r.id);
  const [, inserted] = await pipelined([
    registerTenant(tx, tenantId),
    tx.execute(sql`insert into facts (tenant_id, id, ${COLUMN_NAMES}) values ${sql.join(values, sql`, `)} returning recorded_at as at`),
    tx.execute(sql`
      insert into fact_revisions (tenant_id, fact_id, ${COLUMN_NAMES})
      select tenant_id, id, ${COLUMN_NAMES} from facts where tenant_id = ${tenantId} and id = any(${`{${ids.join(',')}}`}::uuid[])`),
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
  // One millisecond for the whole batch, so the ids' random bits alone would order them: sorted, the
  // ids follow the batch's order, which a conversation's turns keep (memory/facts/sequence.ts).
  const ids = bodies.map(() => uuidv7(local.getTime())).sort();
  const rows = bodies.map((body, i) => ({ id: ids[i]!, revision: newRevision(principal, body, options, local) }));
  const now = await (onCitus(tx) ? insertAsValues : insertFromDocument)(tx, principal.tenantId, rows);
  return rows.map(({ id, revision }) =>
    toFact(id, { ...revision, expiresAt: expiry(revision, now), createdAt: now, recordedAt: now, tenantId: principal.tenantId }, null),
  );
}

export async function writeFact(caller: Caller, body: WriteFactBody, options: WriteOptions = {}): Promise<Fact> {
  assertWritableNew(caller.principal, body);
  return inTenantTransaction(
    caller,
    async (tx) => {
      const [fact] = await phase('write-fact', async () => {
        await assertNoErasureInProgress(tx, options.erasureKey, [{ ...body.scope, subjects: body.subjects }], caller.principal.tenantId);
        return insertNewFacts(tx, caller.principal, [body], options);
      });
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
