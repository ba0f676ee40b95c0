/**
 * Revisions of a fact (DESIGN §4): supersede, verify, delete, and the retention sweep's expiry.
 * Each locks the fact's current row, checks the write rules before anything is written, and
 * writes the next version: the current row and its revision row together. Every statement names
 * its tenant besides row-level security (on Citus that routes it to the tenant's one shard, issue 16).
 */
import { isDeepStrictEqual } from 'node:util';
import { and, eq, sql } from 'drizzle-orm';
import { canWrite, type Principal } from '../../auth/permissions.ts';
import { type Caller, inTenantTransaction } from '../../core/caller.ts';
import { assertNoErasureInProgress } from '../../core/erasure-guard.ts';
import { BadInput, FactChanged, FactNotFound, LegalHold, PermissionDenied } from '../../core/errors.ts';
import type { Tx } from '../../db/client.ts';
import { factRevisions, facts } from '../../db/schema.ts';
import { appendMergedFrom } from '../../kiwifs/coverage.ts';
import { visibleLive } from './conditions.ts';
import { type Fact, MERGED_FROM_MAX, type SupersedeBody, type VerifyBody } from './schemas.ts';
import { carryEmbeddings } from './vectors.ts';
import { embeddingModelOf, type FactRow, type RevisionBody, toFact } from './wire.ts';
import { assertLegalHoldChange, expiry, toDate, type WriteOptions } from './write-rules.ts';

/** The database's clock, read after any row lock, so revisions of a fact are recorded in order. */
async function clock(tx: Tx): Promise<Date> {
  const [row] = (await tx.execute(sql`select clock_timestamp() as now`)) as unknown as [{ now: Date | string }];
  return new Date(row.now);
}

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
    if (options.review !== undefined) {
      next.review = options.review;
      next.reviewReason = options.review ? (options.reviewReason ?? null) : null;
    }

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
    return writeRevision(tx, current, { trust: 'verified', verifiedById: principal.sub, verifiedAt: now, recordedAt: now, review: null, reviewReason: null });
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
