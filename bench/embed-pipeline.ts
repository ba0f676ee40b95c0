/**
 * The embedding pipeline's rate (issue 12, part 6), with an instant endpoint: the fault suite's
 * fake OpenAI-compatible server (vectors derived from each text's hash, 384 dimensions), so what
 * is measured is Mnemo's side — Redis, the embed jobs, Postgres and its HNSW index — not a model.
 *
 * Three runs, each in a tenant of its own, with the real queue (BullMQ on REDIS_URL, under a
 * prefix of this run, removed at the end), the real embed handler in this process (one worker,
 * concurrency 5, as workers/index.ts runs it) and the app role under row-level security:
 * - `backlog`: `facts` facts already in Postgres (what the reconciler finds after an outage, or a
 *   bulk import), one request for the tenant; from the request to the last vector.
 * - `writes`: `facts` facts written by 8 concurrent writers through the write path (writeFact, then
 *   the request the route makes after commit); from the first write to the last vector.
 * - `steady`: 100 writes/s for `min(facts, 1000)` writes (10 s); write-to-vector lag, from the
 *   fact's recorded_at to its vector's created_at (one clock: this machine's).
 * - `raw`, first, as the baseline of the ratios: the same vectors (asked from the endpoint in
 *   batches beforehand) stored by the same upsert, batch after batch, with no queue, job or read.
 *   Storing a vector is mostly the HNSW insert, which no pipeline can avoid.
 * Endpoint requests are counted, so the mean batch shows whether jobs coalesce.
 *
 * Usage: `embedPipelineBench({ facts: 5000, log })` with DATABASE_ADMIN_URL or DATABASE_URL naming
 * a role that may create databases and roles, and REDIS_URL (default redis://127.0.0.1:6379).
 * Standalone: `node --import tsx bench/embed-pipeline.ts [facts]`.
 */
import { randomBytes } from 'node:crypto';
import type { Worker } from 'bullmq';
import type { Principal } from '../src/auth/permissions.ts';
import { createEmbeddingProviders } from '../src/embeddings/registry.ts';
import { scheduleEmbedding } from '../src/jobs/embedding-jobs.ts';
import { closeQueues, createQueues, embedQueue, type JobData } from '../src/jobs/queues.ts';
import { createRedis } from '../src/jobs/redis.ts';
import { startWorkers } from '../src/jobs/worker.ts';
import { createLogger } from '../src/foundation/log.ts';
import { ensureConfiguredModel } from '../src/memory/facts/vectors.ts';
import { writeFact } from '../src/memory/facts/insert.ts';
import { startFakeEmbeddings } from '../support/fake-embeddings.ts';
import { embedHandler } from '../workers/embed.ts';
import { percentile } from './ir.ts';
import type { ConnectedDatabase } from '../support/database.ts';
import { loadAverage, runWhenMain, withScratchDatabase } from './harness.ts';
import { sleep } from '../support/wait.ts';
import { seedFacts } from '../support/seed.ts';

export type EmbedScenario = 'raw' | 'backlog' | 'writes' | 'steady';

export interface Row {
  scenario: EmbedScenario;
  facts: number;
  /** Facts embedded per second, from the first write (or request) to the last vector. */
  factsPerSecond: number;
  /** Write-to-vector lag, ms (recorded_at of the fact to created_at of its vector). */
  lagP50: number;
  lagP95: number;
  lagMax: number;
  /** Endpoint requests, and facts per request. */
  requests: number;
  meanBatch: number;
  /** factsPerSecond over the `raw` run's in the same bench (vectors stored without the pipeline). */
  ratio: number;
  /** Load average (1 minute) at the end of the run. */
  load: number;
}

const DIMS = 384;
const BATCH = 64;
const WRITERS = 8;
const STEADY_RATE = 100;

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'bench', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });
const text = (tenantId: string, i: number) => `${tenantId}: note ${i} about order ${i * 7919} and the parcel that went to the wrong depot`;

export async function embedPipelineBench(options: { facts: number; log: (line: string) => void }): Promise<Row[]> {
  const { facts, log } = options;
  const fake = await startFakeEmbeddings({ model: 'bench-fake-384', dims: DIMS });
  try {
    return await withScratchDatabase('embed', async (database) => {
      const providers = createEmbeddingProviders({ kind: 'openai-compat', url: fake.url, model: fake.model, apiKey: undefined, batchSize: BATCH });
      await ensureConfiguredModel(database.app.db, providers.configured);
      const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
      const producer = createRedis(redisUrl, 'producer');
      const connection = createRedis(redisUrl, 'worker');
      const prefix = `mnemo-bench-embed-${randomBytes(4).toString('hex')}`;
      const queues = createQueues(producer, [embedQueue], prefix);
      const logger = createLogger('error');
      const workers: Worker<JobData>[] = startWorkers({
        definitions: [embedQueue],
        registry: { [embedQueue.name]: embedHandler({ db: database.app.db, queues, providers, batch: BATCH }) },
        connection,
        prefix,
        db: database.app.db,
        logger,
      });
      const run = async (scenario: EmbedScenario, n: number, load: (tenantId: string) => Promise<void>): Promise<Row> => {
        const tenantId = `bench-${scenario}-${randomBytes(3).toString('hex')}`;
        const requestsBefore = fake.requests();
        const started = performance.now();
        await load(tenantId);
        await embedded(database, tenantId, n);
        const seconds = (performance.now() - started) / 1000;
        const requests = fake.requests() - requestsBefore;
        const lags = await lagsOf(database, tenantId);
        const row: Row = {
          scenario,
          facts: n,
          factsPerSecond: Math.round(n / seconds),
          lagP50: Math.round(percentile(lags, 50)),
          lagP95: Math.round(percentile(lags, 95)),
          lagMax: Math.round(Math.max(...lags)),
          requests,
          meanBatch: Math.round((n / Math.max(1, requests)) * 10) / 10,
          ratio: raw ? Math.round((n / seconds / raw) * 100) / 100 : 1,
          load: loadAverage(),
        };
        log(`[embed] ${JSON.stringify(row)}`);
        return row;
      };
      let raw: number | undefined;
      try {
        const rows: Row[] = [];
        const rawTenant = `bench-raw-${randomBytes(3).toString('hex')}`;
        await bulkInsert(database, rawTenant, facts);
        const texts = await database.admin<{ id: string; text: string }[]>`
          select id, content->>'text' as text from facts where tenant_id = ${rawTenant} order by id`;
        const vectors = await providers.configured.embed(texts.map((t) => `acme note\n${t.text}`));
        const rawStarted = performance.now();
        for (let i = 0; i < texts.length; i += BATCH) {
          const values = texts.slice(i, i + BATCH).map((t, j) => ({ tenant: rawTenant, id: t.id, embedding: `[${vectors[i + j]!.join(',')}]` }));
          await database.admin`
            insert into fact_embeddings (tenant_id, fact_id, model, version, dims, embedding)
            select v.tenant, v.id::uuid, ${fake.model}, 1, ${DIMS}, v.embedding::vector
            from jsonb_to_recordset(${database.admin.json(values)}) as v(tenant text, id text, embedding text)
            on conflict (tenant_id, fact_id, model) do update set version = excluded.version, embedding = excluded.embedding
            where fact_embeddings.version < excluded.version`;
        }
        raw = facts / ((performance.now() - rawStarted) / 1000);
        const rawRow: Row = { scenario: 'raw', facts, factsPerSecond: Math.round(raw), lagP50: 0, lagP95: 0, lagMax: 0, requests: 0, meanBatch: BATCH, ratio: 1, load: loadAverage() };
        log(`[embed] ${JSON.stringify(rawRow)}`);
        rows.push(rawRow);
        rows.push(
          await run('backlog', facts, async (tenantId) => {
            await bulkInsert(database, tenantId, facts);
            await scheduleEmbedding(queues, tenantId);
          }),
        );
        rows.push(
          await run('writes', facts, async (tenantId) => {
            let next = 0;
            await Promise.all(
              Array.from({ length: WRITERS }, async () => {
                for (let i = next++; i < facts; i = next++) {
                  await writeFact({ db: database.app.db, principal: admin(tenantId) }, { type: 'acme.note', content: { text: text(tenantId, i) } });
                  await scheduleEmbedding(queues, tenantId);
                }
              }),
            );
          }),
        );
        const steady = Math.min(facts, 10 * STEADY_RATE);
        rows.push(
          await run('steady', steady, async (tenantId) => {
            const started = performance.now();
            const pending: Promise<void>[] = [];
            for (let i = 0; i < steady; i++) {
              const due = started + (i * 1000) / STEADY_RATE;
              const wait = due - performance.now();
              if (wait > 0) await sleep(wait);
              pending.push(
                (async () => {
                  await writeFact({ db: database.app.db, principal: admin(tenantId) }, { type: 'acme.note', content: { text: text(tenantId, i) } });
                  await scheduleEmbedding(queues, tenantId);
                })(),
              );
            }
            await Promise.all(pending);
          }),
        );
        return rows;
      } finally {
        await Promise.all(workers.map((w) => w.close()));
        await Promise.all([...queues.values()].map((q) => q.obliterate({ force: true })));
        await closeQueues(queues);
        await Promise.all([producer.quit(), connection.quit()]);
      }
    });
  } finally {
    await fake.close();
  }
}

async function bulkInsert(database: ConnectedDatabase, tenantId: string, n: number): Promise<void> {
  await database.admin.begin(async (sql) => {
    await sql`insert into tenants (id) values (${tenantId}) on conflict do nothing`;
    await seedFacts(sql, {
      tenantId,
      first: 0,
      last: n - 1,
      type: 'acme.note',
      // As text() writes it for the other scenarios.
      text: sql`${tenantId} || ': note ' || i || ' about order ' || i * 7919 || ' and the parcel that went to the wrong depot'`,
      assertedBy: 'bench',
      clock: 'clock_timestamp',
    });
  });
}

/** Waits until `n` facts of the tenant have their vector (polling every 20 ms; 10 minutes at most). */
async function embedded(database: ConnectedDatabase, tenantId: string, n: number): Promise<void> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const [row] = await database.admin<{ n: number }[]>`
      select count(*)::int as n from fact_embeddings e join facts f on f.tenant_id = e.tenant_id and f.id = e.fact_id and f.version = e.version
      where e.tenant_id = ${tenantId}`;
    if (row!.n >= n) return;
    if (Date.now() > deadline) throw new Error(`only ${row!.n} of ${n} facts embedded after 10 minutes`);
    await sleep(20);
  }
}

async function lagsOf(database: ConnectedDatabase, tenantId: string): Promise<number[]> {
  const rows = await database.admin<{ ms: number }[]>`
    select extract(epoch from e.created_at - f.recorded_at) * 1000 as ms
    from fact_embeddings e join facts f on f.tenant_id = e.tenant_id and f.id = e.fact_id where e.tenant_id = ${tenantId}`;
  return rows.map((r) => Number(r.ms));
}

runWhenMain(import.meta.url, () => {
  const facts = Number(process.argv[2] ?? 5000);
  return embedPipelineBench({ facts, log: (line) => process.stderr.write(`${line}\n`) });
});
