/**
 * What an operator watches (docs/operations/metrics.md): one Prometheus registry per process, and every metric
 * family defined once, here. A leaf like log.ts, importing nothing of ours, so the database client,
 * the job runner, the retrieval verb and the routes each record what they see without a layer
 * reaching up. Label values are bounded: route patterns, queue and model names, modes — never a raw
 * path, an id or a tenant (a series per tenant would grow without end and name tenants to whoever
 * scrapes).
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'mnemo_' });

const registers = [registry];

/** From a millisecond up: most requests answer in a few ms, a slow search or a timeout in seconds. */
const requestBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Jobs range from an embed batch (tens of ms) to a backfill or a report over a large tenant (minutes). */
const jobBuckets = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

// --- HTTP ----------------------------------------------------------------------------------------

const httpLabels = ['method', 'route', 'status'] as const;

export const httpRequests = new Counter({
  name: 'mnemo_http_requests_total',
  help: 'HTTP requests answered, by method, route pattern (e.g. /v1/memory/facts/:id; "unmatched" when no route matched) and status.',
  labelNames: httpLabels,
  registers,
});

export const httpRequestDuration = new Histogram({
  name: 'mnemo_http_request_duration_seconds',
  help: 'Time from a request reaching the app to its response being ready (the body may still stream), by method, route pattern and status.',
  labelNames: httpLabels,
  buckets: requestBuckets,
  registers,
});

// --- Database pools ------------------------------------------------------------------------------

/** Which pool: the primary, or a read replica's. */
export type PoolName = 'primary' | 'read';

interface TrackedPool {
  readonly pool: PoolName;
  readonly size: number;
  inFlight: number;
}

const pools = new Set<TrackedPool>();

/** Counts one pool's tenant transactions while it is open; `close` takes it out of the metrics. */
export interface PoolTracker {
  /** Runs `transaction`, counted as in flight from its start (waiting for a connection included) to its end. */
  track<T>(transaction: () => Promise<T>): Promise<T>;
  close(): void;
}

/**
 * postgres.js has no pool statistics, so a pool is measured by what goes through `withTenant`: the
 * transactions started and not yet finished. Those beyond the pool's size are waiting for a
 * connection.
 */
export function trackPool(pool: PoolName, size: number): PoolTracker {
  const tracked: TrackedPool = { pool, size, inFlight: 0 };
  pools.add(tracked);
  return {
    async track(transaction) {
      tracked.inFlight++;
      try {
        return await transaction();
      } finally {
        tracked.inFlight--;
      }
    },
    close: () => void pools.delete(tracked),
  };
}

/** Sets one sample per pool name, summed over this process's open pools of that name. */
function setPerPool(gauge: Gauge<'pool'>, valueOf: (pool: TrackedPool) => number): void {
  gauge.reset();
  const sums = new Map<PoolName, number>();
  for (const pool of pools) sums.set(pool.pool, (sums.get(pool.pool) ?? 0) + valueOf(pool));
  for (const [pool, value] of sums) gauge.set({ pool }, value);
}

export const dbPoolSize = new Gauge({
  name: 'mnemo_db_pool_size',
  help: 'Connections this process may open to PostgreSQL (the pools\' maximum, summed over its open pools of that name).',
  labelNames: ['pool'] as const,
  registers,
  collect() {
    setPerPool(this, (pool) => pool.size);
  },
});

export const dbTransactionsInUse = new Gauge({
  name: 'mnemo_db_transactions_in_use',
  help:
    'Tenant transactions (withTenant) started and not finished, at most the pool size: a busy-connection estimate, since ' +
    'postgres.js reports no pool statistics. Statements outside a tenant transaction (health checks, model lookups) are not counted.',
  labelNames: ['pool'] as const,
  registers,
  collect() {
    setPerPool(this, (pool) => Math.min(pool.inFlight, pool.size));
  },
});

export const dbTransactionsWaiting = new Gauge({
  name: 'mnemo_db_transactions_waiting',
  help: 'Tenant transactions (withTenant) started beyond the pool size, so waiting for a connection: max(0, in flight - pool size).',
  labelNames: ['pool'] as const,
  registers,
  collect() {
    setPerPool(this, (pool) => Math.max(0, pool.inFlight - pool.size));
  },
});

// --- Queues and jobs -----------------------------------------------------------------------------

export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
export type QueueState = (typeof QUEUE_STATES)[number];
/** Jobs per state, per queue name. */
export type QueueJobCounts = Record<string, Partial<Record<QueueState, number>>>;

const queueCountSources = new Set<() => Promise<QueueJobCounts>>();
/** A scrape must answer even when Redis does not: a source slower than this is left out. */
const QUEUE_COUNT_TIMEOUT_MS = 2000;

/**
 * Registers where the queue depths come from, read at each scrape (BullMQ's counts in Redis, or the
 * in-process queues); returns the unregister.
 */
export function countQueueJobs(source: () => Promise<QueueJobCounts>): () => void {
  queueCountSources.add(source);
  return () => void queueCountSources.delete(source);
}

function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export const queueJobs = new Gauge({
  name: 'mnemo_queue_jobs',
  help: 'Jobs in each queue by state (waiting, active, delayed, failed), read at scrape time; absent while the queue store does not answer.',
  labelNames: ['queue', 'state'] as const,
  registers,
  async collect() {
    const answers = await Promise.allSettled([...queueCountSources].map((source) => within(source(), QUEUE_COUNT_TIMEOUT_MS)));
    this.reset();
    for (const answer of answers) {
      if (answer.status !== 'fulfilled') continue;
      for (const [queue, counts] of Object.entries(answer.value)) {
        for (const state of QUEUE_STATES) this.set({ queue, state }, counts[state] ?? 0);
      }
    }
  },
});

export const jobDuration = new Histogram({
  name: 'mnemo_job_duration_seconds',
  help: 'Time one attempt of a job ran, by queue and outcome (completed or failed).',
  labelNames: ['queue', 'outcome'] as const,
  buckets: jobBuckets,
  registers,
});

export const jobWait = new Histogram({
  name: 'mnemo_job_wait_seconds',
  help: 'Time from a job being due (added, or the time a scheduled run was due) to its first attempt starting (processedOn - timestamp - delay), by queue.',
  labelNames: ['queue'] as const,
  buckets: jobBuckets,
  registers,
});

export const jobFailures = new Counter({
  name: 'mnemo_job_failures_total',
  help: 'Failed job attempts, by queue and whether the failure was final (final="true": no retry follows; the work waits for the reconciler or an operator).',
  labelNames: ['queue', 'final'] as const,
  registers,
});

// --- Embeddings and retrieval --------------------------------------------------------------------

export const embeddingBacklog = new Gauge({
  name: 'mnemo_embedding_backlog',
  help: 'Live facts, over every tenant, whose vector for the serving model is missing or stale, as found by the last reconcile pass this process ran (not live: it changes once per pass).',
  labelNames: ['model'] as const,
  registers,
});

export const reconcileLastPass = new Gauge({
  name: 'mnemo_reconcile_last_pass_timestamp_seconds',
  help: 'Unix time at which the last reconcile pass this process ran finished (0 until one has): how fresh mnemo_embedding_backlog is.',
  registers,
});

/** Records a finished reconcile pass: the backlog it found per model (the only models it looked at). */
export function recordReconcilePass(backlogByModel: ReadonlyMap<string, number>): void {
  embeddingBacklog.reset();
  for (const [model, backlog] of backlogByModel) embeddingBacklog.set({ model }, backlog);
  reconcileLastPass.set(Date.now() / 1000);
}

export const retrievalDuration = new Histogram({
  name: 'mnemo_retrieval_duration_seconds',
  help: 'Time a retrieval took to answer (the journal\'s tookMs), by mode (list, keyword, semantic, both); the retrieval behind /v1/memory/context included.',
  labelNames: ['mode'] as const,
  buckets: requestBuckets,
  registers,
});

// --- Rate limits ---------------------------------------------------------------------------------

export const rateLimitRejections = new Counter({
  name: 'mnemo_rate_limit_rejections_total',
  help: 'Requests answered 429 rate-limited, by route class.',
  labelNames: ['class'] as const,
  registers,
});

export const rateLimitFallback = new Gauge({
  name: 'mnemo_rate_limit_fallback',
  help: '1 while Redis cannot be reached and this node limits with its own per-node fallback (limits then hold per node, not across nodes); else 0.',
  registers,
});
