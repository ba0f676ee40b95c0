/**
 * What every write of a fact shares, a new one (insert.ts) and a revision (revise.ts): the write's
 * options, the legal-hold rule, and the expiry a retention sets.
 */
import type { Principal } from '../../auth/permissions.ts';
import { assertTenantAdmin } from '../../core/errors.ts';
import type { ReviewReason, ReviewState } from '../../db/schema.ts';
import type { ProvenanceRef } from './schemas.ts';

/** The options of a write, given by its route or verb (remember.ts) rather than by the body. */
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
  /** With `review: 'pending'`: what the check found, for the reviewer. */
  reviewReason?: ReviewReason | undefined;
  /**
   * The trust of a supersede's new content. An agent's text is `unverified` however the fact
   * stood (src/memory/remember/remember.ts); absent, verified content becomes `asserted` and other trust
   * stays (DESIGN §4).
   */
  trust?: 'unverified' | undefined;
}

const DAY_MS = 24 * 3600 * 1000;

/** When a fact kept `keepDays` from `from`, or until `keepUntil`, expires (null: it does not). */
export function expiry(retention: { keepDays: number | null; keepUntil: Date | null }, from: Date): Date | null {
  if (retention.keepDays !== null) return new Date(from.getTime() + retention.keepDays * DAY_MS);
  return retention.keepUntil;
}

export const toDate = (value: string | undefined) => (value === undefined ? undefined : new Date(value));

/** Placing or lifting a legal hold is for tenant admins. */
export function assertLegalHoldChange(principal: Principal, requested: boolean | undefined, current: boolean): void {
  if (requested !== undefined && requested !== current) assertTenantAdmin(principal, 'Only a tenant admin may place or lift a legal hold');
}
