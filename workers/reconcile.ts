import type { Db } from '../src/db/client.ts';
import { withTenant } from '../src/db/client.ts';
import { forEachTenant } from '../src/db/tenants.ts';
import type { EmbeddingProvider } from '../src/embeddings/provider.ts';
import { coverage, ensureConfiguredModel, listModels, servingModel } from '../src/memory/facts/vectors.ts';
import { recordReconcilePass } from '../src/foundation/metrics.ts';
import { dispatchOutbox, pendingOutbox } from '../src/jobs/outbox.ts';
import { scheduleBackfill, scheduleEmbedding } from '../src/jobs/embedding-jobs.ts';
import { findSchedule } from '../src/episodes/stored-reports.ts';
import { restoreNightlyScheduler } from '../src/jobs/report-jobs.ts';
import type { Queues } from '../src/jobs/queues.ts';
import type { JobHandler } from '../src/jobs/worker.ts';

export interface ReconcileDeps {
  db: Db;
  queues: Queues;
  /** When this deployment embeds: the configured model. */
  embeddings?: { configured: EmbeddingProvider } | undefined;
  /** Rows younger than this were just dispatched by the request that wrote them; leave them. */
  graceMs?: number;
  /** Most outbox rows re-enqueued per tenant per run, so one backlog cannot starve other tenants. */
  batchPerTenant?: number;
}

export interface ReconcileResult {
  tenants: number;
  enqueued: number;
  skipped: number;
  /** Tenants with facts still to embed, whose embed job was requested (merged into one already queued). */
  embedJobs: number;
  /** Live facts of every tenant without a current vector of the serving model (0 without embeddings). */
  backlog: number;
  /** Nightly report schedulers put back into Redis. */
  schedulesRestored: number;
}

/**
 * Visits every tenant under its own RLS setting and re-enqueues what Redis may have lost: outbox
 * rows not done, the embed job of a tenant with facts whose vector for the serving model is
 * missing or stale (that job then drains the whole backlog at the pipeline's rate), and the
 * tenant's nightly report scheduler. It also keeps
 * a model switch going. Safe to run any time: job ids are deterministic. The backlog it counts
 * becomes mnemo_embedding_backlog once the pass is done.
 */
export function reconcileHandler({ db, queues, embeddings, graceMs = 30_000, batchPerTenant = 1000 }: ReconcileDeps): JobHandler<object> {
  return async (_payload, { logger }) => {
    const result: ReconcileResult = { tenants: 0, enqueued: 0, skipped: 0, embedJobs: 0, backlog: 0, schedulesRestored: 0 };
    const olderThan = new Date(Date.now() - graceMs);
    if (embeddings) {
      // Registers a newly configured model (starting its backfill) once the endpoint answers.
      await ensureConfiguredModel(db, embeddings.configured).catch((error: unknown) =>
        logger.warn('embedding model not registered yet', { error: error instanceof Error ? error.message : String(error) }),
      );
    }
    const serving = embeddings ? await servingModel(db) : null;
    await forEachTenant(db, async (tenantId) => {
      const rows = await withTenant(db, tenantId, (tx) => pendingOutbox(tx, tenantId, olderThan, batchPerTenant));
      const { enqueued, skipped } = await dispatchOutbox(queues, rows);
      result.tenants++;
      result.enqueued += enqueued;
      result.skipped += skipped;
      // A count, not a look for the first one: it is what the metric needs, and it costs less than
      // that look did where nothing is missing (one join instead of a probe per fact), which is
      // most tenants on most passes.
      const backlog = serving ? await withTenant(db, tenantId, (tx) => coverage(tx, serving.model, tenantId)).then((c) => c.live - c.embedded) : 0;
      if (backlog > 0) {
        await scheduleEmbedding(queues, tenantId);
        result.embedJobs++;
        result.backlog += backlog;
      }
      const schedule = await withTenant(db, tenantId, (tx) => findSchedule(tx, tenantId));
      if (schedule && (await restoreNightlyScheduler(queues, tenantId, schedule))) result.schedulesRestored++;
    });
    if (embeddings) {
      const backfilling = (await listModels(db)).find((m) => m.state === 'backfilling' && m.model !== serving?.model);
      if (backfilling) {
        await scheduleBackfill(queues, backfilling.model);
      }
    }
    recordReconcilePass(new Map(serving ? [[serving.model, result.backlog]] : []));
    if (result.enqueued > 0 || result.skipped > 0 || result.embedJobs > 0 || result.schedulesRestored > 0) logger.info('reconciled', { ...result });
    return result;
  };
}
