import type { Db } from '../src/db/client.ts';
import { type ErasureTarget, failErasure, runErasure } from '../src/lifecycle/erasure.ts';
import { isFinalAttempt, type JobHandler } from '../src/jobs/worker.ts';

type ErasurePayload = { tenantId: string; erasureId: string; target: ErasureTarget };

/**
 * Runs an erasure to the end. A legal hold ends it as failed (`legal-hold`) without an error, so
 * it is not retried: an admin lifts the hold and resumes it. On the last failed attempt of any
 * other error it is marked failed, so its status never stays "running".
 */
export function erasureHandler({ db }: { db: Db }): JobHandler<ErasurePayload> {
  return async ({ tenantId, erasureId, target }, { job, logger }) => {
    try {
      const outcome = await runErasure(db, tenantId, erasureId, target);
      logger.info('erasure ran', { tenantId, erasureId, outcome });
      return outcome;
    } catch (error) {
      if (isFinalAttempt(job, error)) {
        logger.error('erasure failed for good', { tenantId, erasureId, error });
        await failErasure(db, tenantId, erasureId).catch((e: unknown) => logger.warn('could not mark the erasure failed', { error: String(e) }));
      }
      throw error;
    }
  };
}
