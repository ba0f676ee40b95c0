import type { Db } from '../../db/client.ts';
import type { Logger } from '../../foundation/log.ts';
import { claimOutbox, type OutboxClaim, releaseOutboxClaim, renewOutboxClaim } from '../outbox.ts';

/**
 * What a process needs to run outbox rows without Redis. Several processes sharing one database
 * never run a row at once, and a crashed process's row is taken again once its lease lapses;
 * no transaction is held while a job works (src/jobs/outbox.ts has the claims' SQL).
 */
export interface OutboxLease {
  db: Db;
  logger: Logger;
  /** How long a claim on an outbox row lasts unless renewed (MNEMO_JOB_LOCK_MS). */
  leaseMs: number;
  /** This process's claims on outbox rows carry it. */
  by: string;
}

/** The row as its claim read it: its attempts so far, its payload, when it was written. */
export type ClaimedRow = Extract<OutboxClaim, { kind: 'claimed' }>;

export type LeasedRun =
  /** Not run: done, failed for good, gone, run by another process, or the database is away. */
  | { kind: 'not-run' }
  /** A failed attempt's backoff still runs: the row may be taken again in `waitMs`. */
  | { kind: 'later'; waitMs: number }
  /** One attempt ran; `retryInMs` when another follows, which the row records too. */
  | { kind: 'ran'; retryInMs: number | undefined };

/**
 * Runs one attempt of an outbox row on a lease: the row is claimed first (not run if another
 * process runs it, it is done, or its backoff runs), the lease renewed while `attempt` runs, and
 * released after with the backoff `attempt` answers (none: no retry), kept in the row so a
 * restart honours it too.
 */
export async function runOnLease(
  lease: OutboxLease,
  queue: string,
  ref: { tenantId: string; id: string },
  attempt: (row: ClaimedRow) => Promise<number | undefined>,
): Promise<LeasedRun> {
  const { db, leaseMs, by, logger } = lease;
  const claim = await claimOutbox(db, ref, { by, leaseMs }).catch((error: unknown) => {
    // The database is away: the reconcile pass hands the row in again once it is back.
    logger.warn('could not claim an outbox row', { queue, outboxId: ref.id, error });
    return { kind: 'unavailable' } as const;
  });
  if (claim.kind === 'unavailable') return { kind: 'not-run' };
  if (claim.kind === 'later') return claim;

  const renewal = setInterval(() => {
    renewOutboxClaim(db, ref, { by, leaseMs })
      .then((held) => held || logger.warn('lost the claim on a running outbox row', { queue, outboxId: ref.id }))
      .catch((error: unknown) => logger.warn('could not renew the claim on an outbox row', { queue, outboxId: ref.id, error }));
  }, Math.max(100, Math.floor(leaseMs / 3)));
  renewal.unref();
  let retryInMs: number | undefined;
  try {
    retryInMs = await attempt(claim);
  } finally {
    clearInterval(renewal);
  }
  await releaseOutboxClaim(db, ref, by, retryInMs).catch((error: unknown) =>
    logger.warn('could not release the claim on an outbox row; it lapses', { queue, outboxId: ref.id, error }),
  );
  return { kind: 'ran', retryInMs };
}
