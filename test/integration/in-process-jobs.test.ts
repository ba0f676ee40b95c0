/**
 * Jobs without Redis (issue 13, part 2; src/jobs/in-process.ts): the same handlers through the
 * same processor, fed from Postgres. No Redis is used in this file.
 */
import { randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { UnrecoverableError } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Principal } from '../../src/auth/permissions.ts';
import { withTenant } from '../../src/db/client.ts';
import { outbox } from '../../src/db/schema.ts';
import { getReport, listReports, putSchedule, requestReport } from '../../src/episodes/stored-reports.ts';
import { scheduleEmbedding } from '../../src/jobs/embedding-jobs.ts';
import { type InProcessJobs, startInProcessJobs } from '../../src/jobs/in-process.ts';
import { backoffDelay } from '../../src/jobs/in-process/queue.ts';
import { nextRun } from '../../src/jobs/in-process/schedulers.ts';
import { dispatchOutbox, recordOutbox } from '../../src/jobs/outbox.ts';
import { defineQueue, embedQueue, enqueueUnique, erasureQueue, queueDefinitions, reportQueue } from '../../src/jobs/queues.ts';
import type { JobHandler } from '../../src/jobs/worker.ts';
import { getErasure, requestErasure } from '../../src/lifecycle/erasure.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { createHandlerRegistry } from '../../workers/registry.ts';
import { TEST_ERASURE_KEY } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { runProcess } from '../helpers/process.ts';
import { eventually, sleep } from '../../support/wait.ts';

const logger = createLogger('error');
const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin-1', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

/** An outbox-backed queue of the test's own. */
const echoQueue = defineQueue({
  name: 'echo',
  payload: z.strictObject({ n: z.number().int() }),
  jobOptions: { attempts: 3, backoff: { type: 'exponential', delay: 150 } },
});

describe('unit: schedules and backoff as BullMQ computes them', () => {
  it('gives the next time of a cron pattern in UTC, and of an interval', () => {
    const nightly = { pattern: '0 3 * * *', tz: 'UTC' };
    expect(new Date(nextRun(nightly, Date.parse('2026-12-01T05:30:00Z'))!).toISOString()).toBe('2026-12-02T03:00:00.000Z');
    expect(new Date(nextRun(nightly, Date.parse('2026-12-01T02:59:59Z'))!).toISOString()).toBe('2026-12-01T03:00:00.000Z');
    // Exactly at a run: the following one (a fired run is not fired again).
    expect(new Date(nextRun(nightly, Date.parse('2026-12-01T03:00:00Z'))!).toISOString()).toBe('2026-12-02T03:00:00.000Z');
    expect(new Date(nextRun({ pattern: '30 23 * * *', tz: 'UTC' }, Date.parse('2026-12-31T23:45:00Z'))!).toISOString()).toBe('2027-01-01T23:30:00.000Z');
    expect(nextRun({ every: 1000 }, 12_345)).toBe(13_000);
    expect(nextRun({ every: 1000 }, 13_000)).toBe(14_000);
  });

  it('backs off exponentially from the queue definition', () => {
    expect([1, 2, 3, 4].map((n) => backoffDelay(erasureQueue, n))).toEqual([2000, 4000, 8000, 16000]);
    expect(backoffDelay(defineQueue({ name: 'x', payload: z.unknown(), jobOptions: { attempts: 1 } }), 1)).toBe(0);
  });
});

describe('in-process jobs (no Redis)', () => {
  let t: TestDatabase;
  let started: InProcessJobs[] = [];

  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterEach(async () => {
    await Promise.all(started.map((jobs) => jobs.close()));
    started = [];
  });
  afterAll(() => t.drop());

  const start = (options: Partial<Parameters<typeof startInProcessJobs>[0]> & Pick<Parameters<typeof startInProcessJobs>[0], 'definitions' | 'registry'>) => {
    const jobs = startInProcessJobs({ db: t.app.db, logger, reconcileEveryMs: 60_000, retentionEveryMs: 60_000, ...options });
    started.push(jobs);
    return jobs;
  };
  const row = (tenantId: string, id: string) => withTenant(t.app.db, tenantId, async (tx) => (await tx.select().from(outbox).where(eq(outbox.id, id)))[0]!);
  const record = (tenantId: string, n: number) => withTenant(t.app.db, tenantId, (tx) => recordOutbox(tx, tenantId, echoQueue.name, { n }));

  it('runs a requested report and an erasure through the real handlers, and marks their outbox rows done', async () => {
    const jobs = start({
      definitions: queueDefinitions,
      registry: (queues) => createHandlerRegistry({ db: t.app.db, queues }),
    });
    const tenantId = uniqueTenant();
    const ctx = { db: t.app.db, principal: admin(tenantId) };
    const report = await requestReport(ctx, {});
    const erasure = await requestErasure(ctx, { kind: 'participant', id: 'person-1' }, TEST_ERASURE_KEY);
    expect(await dispatchOutbox(jobs.queues, [report.outbox, erasure.outbox])).toEqual({ enqueued: 2, skipped: 0 });

    await eventually(async () => (await getReport(ctx, report.report.id)).status === 'completed', 15_000, async () => JSON.stringify(await getReport(ctx, report.report.id)));
    await eventually(async () => (await getErasure(ctx, erasure.erasure.id)).status === 'completed', 15_000, async () => JSON.stringify(await getErasure(ctx, erasure.erasure.id)));
    for (const ref of [report.outbox, erasure.outbox]) {
      await eventually(async () => (await row(tenantId, ref.id)).doneAt !== null, 5000, () => 'outbox row not done');
      expect(await row(tenantId, ref.id)).toMatchObject({ attempts: 1, failedAt: null, lastError: null, claimedBy: null, claimedUntil: null });
    }
  });

  it('retries a failing outbox job with backoff, then marks it failed', async () => {
    const calls: { at: number; attemptsMade: number }[] = [];
    const echo: JobHandler = async (_payload, { job }) => {
      calls.push({ at: Date.now(), attemptsMade: job.attemptsMade });
      throw new Error('endpoint down');
    };
    const jobs = start({ definitions: [echoQueue], registry: { echo } });
    const tenantId = uniqueTenant();
    const ref = await record(tenantId, 1);
    await dispatchOutbox(jobs.queues, [ref]);

    // Failed (the processor's update), then the claim released (the transport's, a moment later).
    await eventually(async () => {
      const current = await row(tenantId, ref.id);
      return current.failedAt && current.claimedBy === null;
    }, 10_000, () => `calls: ${calls.length}`);
    expect(calls.map((c) => c.attemptsMade)).toEqual([0, 1, 2]);
    // Exponential: 150 ms, then 300 ms (timers never fire early).
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(140);
    expect(calls[2]!.at - calls[1]!.at).toBeGreaterThanOrEqual(290);
    expect(await row(tenantId, ref.id)).toMatchObject({ attempts: 3, lastError: 'endpoint down', doneAt: null, claimedBy: null, claimedUntil: null });
    await sleep(400);
    expect(calls).toHaveLength(3);
  });

  it('fails an unrecoverable outbox job at once', async () => {
    let calls = 0;
    const jobs = start({
      definitions: [echoQueue],
      registry: {
        echo: async () => {
          calls++;
          throw new UnrecoverableError('no point');
        },
      },
    });
    const tenantId = uniqueTenant();
    const ref = await record(tenantId, 1);
    await dispatchOutbox(jobs.queues, [ref]);
    await eventually(async () => (await row(tenantId, ref.id)).failedAt, 5000, () => `calls: ${calls}`);
    expect(calls).toBe(1);
  });

  it('keeps a retry and its backoff in Postgres across a restart', async () => {
    const slowRetry = defineQueue({ ...echoQueue, jobOptions: { attempts: 3, backoff: { type: 'fixed', delay: 1500 } } });
    let calls = 0;
    const first = start({
      definitions: [slowRetry],
      registry: {
        echo: async () => {
          calls++;
          throw new Error('not yet');
        },
      },
    });
    const tenantId = uniqueTenant();
    const ref = await record(tenantId, 1);
    await dispatchOutbox(first.queues, [ref]);
    await eventually(async () => (await row(tenantId, ref.id)).attempts === 1, 5000, () => 'no attempt');
    await first.close();
    const failedOnce = await row(tenantId, ref.id);
    expect(failedOnce).toMatchObject({ claimedBy: null, claimedUntil: null, doneAt: null, failedAt: null });
    expect(failedOnce.nextAttemptAt!.getTime()).toBeGreaterThan(Date.now());

    // A new process (as after a restart): the row is handed in at once, but waits out its backoff.
    const seen: number[] = [];
    const second = start({ definitions: [slowRetry], registry: { echo: async (_p, { job }) => void seen.push(job.attemptsMade) } });
    await dispatchOutbox(second.queues, [ref]);
    await sleep(300);
    expect(seen).toEqual([]);
    // Done (recorded by the job's own transaction) and released (the claim's, just after it).
    await eventually(
      async () => {
        const settled = await row(tenantId, ref.id);
        return settled.doneAt !== null && settled.claimedBy === null;
      },
      5000,
      () => 'not done and released after the backoff',
    );
    expect(seen).toEqual([1]);
    expect(calls).toBe(1);
    expect(await row(tenantId, ref.id)).toMatchObject({ attempts: 2, nextAttemptAt: null });
  });

  it('never runs one outbox row in two processes sharing the database', async () => {
    const runs = new Map<number, number>();
    const handler = (): JobHandler => async ({ n }: { n: number }) => {
      runs.set(n, (runs.get(n) ?? 0) + 1);
      await sleep(30);
    };
    // Two transports, as two API nodes without Redis: separate processors and claims.
    const a = start({ definitions: [echoQueue], registry: { echo: handler() }, concurrency: 3 });
    const b = start({ definitions: [echoQueue], registry: { echo: handler() }, concurrency: 3 });
    const tenantId = uniqueTenant();
    const refs = await Promise.all(Array.from({ length: 24 }, (_, n) => record(tenantId, n)));
    // Both are handed every row, twice, at the same time (as after-commit dispatch and a reconcile pass).
    await Promise.all([dispatchOutbox(a.queues, refs), dispatchOutbox(b.queues, refs), dispatchOutbox(b.queues, refs), dispatchOutbox(a.queues, refs)]);
    await eventually(
      async () => (await Promise.all(refs.map((ref) => row(tenantId, ref.id)))).every((r) => r.doneAt !== null),
      15_000,
      () => `ran ${runs.size}`,
    );
    await sleep(200);
    expect([...runs.keys()].sort((x, y) => x - y)).toEqual(refs.map((_, n) => n));
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
    for (const ref of refs) expect((await row(tenantId, ref.id)).attempts).toBe(1);
  });

  it('leaves a row another process holds, and takes it once that lease lapses', async () => {
    const seen: number[] = [];
    const jobs = start({ definitions: [echoQueue], registry: { echo: async ({ n }: { n: number }) => void seen.push(n) } });
    const tenantId = uniqueTenant();
    const held = await record(tenantId, 1);
    const lapsed = await record(tenantId, 2);
    // Another process claimed both; it is alive for the first (lease running) and died holding the second.
    await t.admin`update outbox set claimed_by = ${randomUUID()}, claimed_until = now() + interval '1 hour' where id = ${held.id}`;
    await t.admin`update outbox set claimed_by = ${randomUUID()}, claimed_until = now() - interval '1 second' where id = ${lapsed.id}`;
    await dispatchOutbox(jobs.queues, [held, lapsed]);
    await eventually(async () => (await row(tenantId, lapsed.id)).doneAt, 5000, () => 'lapsed claim not taken');
    await sleep(200);
    expect(seen).toEqual([2]);
    expect(await row(tenantId, held.id)).toMatchObject({ doneAt: null, attempts: 0 });
  });

  it('renews the lease of a running job, so no other process takes it meanwhile', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const seen: string[] = [];
    const a = start({ definitions: [echoQueue], registry: {
        echo: async () => {
          seen.push('a');
          await gate;
        },
      }, leaseMs: 1000 });
    const b = start({ definitions: [echoQueue], registry: { echo: async () => void seen.push('b') }, leaseMs: 1000 });
    const tenantId = uniqueTenant();
    const ref = await record(tenantId, 1);
    try {
      await dispatchOutbox(a.queues, [ref]);
      await eventually(async () => seen.length === 1, 5000, () => 'a did not start');
      await sleep(1500); // longer than the lease: a renews it every third of it
      await dispatchOutbox(b.queues, [ref]);
      await sleep(200);
      expect(seen).toEqual(['a']);
    } finally {
      release();
    }
    await eventually(async () => (await row(tenantId, ref.id)).doneAt, 5000, () => 'not done');
  });

  it('merges embed requests of a tenant: one running and one waiting at most (keepLastIfActive)', async () => {
    const runs: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const jobs = start({
      definitions: [embedQueue],
      registry: {
        embed: async ({ tenantId }: { tenantId: string }) => {
          runs.push(tenantId);
          if (runs.length === 1) await gate;
        },
      },
    });
    const busy = uniqueTenant();
    await scheduleEmbedding(jobs.queues, busy);
    await eventually(async () => runs.length === 1, 5000, () => 'no run');
    // While its job runs, requests are kept as one, run after it.
    for (let i = 0; i < 3; i++) await scheduleEmbedding(jobs.queues, busy);
    await sleep(100);
    expect(runs).toEqual([busy]);
    release();
    await eventually(async () => runs.length === 2, 5000, () => `runs: ${runs.length}`);
    await sleep(200);
    expect(runs).toEqual([busy, busy]);

    // While one waits, further requests merge into it.
    const quiet = uniqueTenant();
    await Promise.all([scheduleEmbedding(jobs.queues, quiet), scheduleEmbedding(jobs.queues, quiet), scheduleEmbedding(jobs.queues, quiet)]);
    await eventually(async () => runs.length === 3, 5000, () => `runs: ${runs.length}`);
    await sleep(200);
    expect(runs).toEqual([busy, busy, quiet]);
  });

  it('adds a job id once while it exists, and retries it when it failed', async () => {
    const unique = defineQueue({ name: 'unique', payload: z.object({}), jobOptions: { attempts: 1 } });
    let calls = 0;
    const jobs = start({
      definitions: [unique],
      registry: {
        unique: async () => {
          calls++;
          if (calls === 1) throw new Error('first time fails');
          await sleep(200);
        },
      },
    });
    const queue = jobs.queues.get('unique')!;
    expect(await enqueueUnique(queue, { payload: {} }, 'the-one')).toBe('added');
    await eventually(async () => (await queue.getJob('the-one'))?.isFailed(), 5000, () => 'not failed');
    expect(await enqueueUnique(queue, { payload: {} }, 'the-one')).toBe('retried');
    await eventually(async () => calls === 2, 5000, () => 'not retried');
    expect(await enqueueUnique(queue, { payload: {} }, 'the-one')).toBe('exists');
    await eventually(async () => (await queue.getJob('the-one')) === undefined, 5000, () => 'not finished');
    await sleep(100);
    expect(calls).toBe(2);
  });

  it('fires job schedulers (every) with BullMQ-style run ids until removed', async () => {
    const ticks: { id: string | undefined; timestamp: number; payload: unknown }[] = [];
    const tick = defineQueue({ name: 'tick', payload: z.strictObject({ n: z.number() }), jobOptions: { attempts: 1 } });
    const jobs = start({ definitions: [tick], registry: { tick: async (payload, { job }) => void ticks.push({ id: job.id, timestamp: job.timestamp, payload }) } });
    const queue = jobs.queues.get('tick')!;
    await queue.upsertJobScheduler('ticker', { every: 100 }, { name: 'tick', data: { payload: { n: 7 } } });
    expect(await queue.getJobScheduler('ticker')).toMatchObject({ key: 'ticker', every: 100 });
    await eventually(async () => ticks.length >= 3, 5000, () => `ticks: ${ticks.length}`);
    for (const t of ticks) {
      expect(t.payload).toEqual({ n: 7 });
      expect(t.timestamp % 100).toBe(0);
      expect(t.id).toBe(`repeat:ticker:${t.timestamp}`);
    }
    expect(await queue.removeJobScheduler('ticker')).toBe(true);
    expect(await queue.getJobScheduler('ticker')).toBeUndefined();
    await sleep(150);
    const count = ticks.length;
    await sleep(300);
    expect(ticks.length).toBe(count);
  });

  it('runs the nightly report scheduler of a tenant through the real handler', async () => {
    const jobs = start({ definitions: [reportQueue], registry: (queues) => ({ report: createHandlerRegistry({ db: t.app.db, queues }).report! }) });
    const tenantId = uniqueTenant();
    await putSchedule({ db: t.app.db, principal: admin(tenantId) }, { hourUtc: 3 });
    // The same upsert the API makes, with a short interval instead of the nightly cron, for speed.
    const queue = jobs.queues.get(reportQueue.name)!;
    await queue.upsertJobScheduler(`test-${tenantId}`, { every: 200 }, { name: reportQueue.name, data: { payload: { tenantId, nightly: true } } });
    await eventually(
      async () => (await listReports({ db: t.app.db, principal: admin(tenantId) }, {})).data.some((r) => r.scheduled && r.status === 'completed'),
      10_000,
      () => 'no nightly report ran',
    );
  });

  it('runs the reconcile and retention passes at start', async () => {
    const passes: string[] = [];
    start({
      definitions: queueDefinitions,
      registry: {
        ...Object.fromEntries(queueDefinitions.map((d) => [d.name, async () => {}])),
        reconcile: async () => void passes.push('reconcile'),
        retention: async () => void passes.push('retention'),
      },
    });
    await eventually(async () => passes.length === 2, 5000, () => passes.join());
    expect(passes.sort()).toEqual(['reconcile', 'retention']);
  });

  it('close() stops taking jobs and waits for the running one', async () => {
    let finished = false;
    const seen: number[] = [];
    const jobs = start({
      definitions: [echoQueue],
      registry: {
        echo: async ({ n }: { n: number }) => {
          seen.push(n);
          await sleep(300);
          finished = true;
        },
      },
      concurrency: 1,
    });
    const tenantId = uniqueTenant();
    const first = await record(tenantId, 1);
    const second = await record(tenantId, 2);
    await dispatchOutbox(jobs.queues, [first, second]);
    await eventually(async () => seen.length === 1, 5000, () => 'not started');
    await jobs.close();
    expect(finished).toBe(true);
    expect((await row(tenantId, first.id)).doneAt).not.toBeNull();
    // The waiting one stays in Postgres for the next start; adds after close are ignored.
    await dispatchOutbox(jobs.queues, [second]);
    await sleep(100);
    expect(seen).toEqual([1]);
    expect(await row(tenantId, second.id)).toMatchObject({ doneAt: null, claimedBy: null, attempts: 0 });
  });

  it('npm run worker without REDIS_URL says it is not needed and exits 0', async () => {
    const { code, stdout, stderr } = await runProcess('workers/index.ts', [], { DATABASE_URL: t.appUrl });
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toBe('mnemo worker: not needed without REDIS_URL: jobs run in the API process (npm start); set REDIS_URL to run them in workers\n');
  });
});
