/**
 * Horizontal scale (issue 15, DESIGN §1, §7, §8): three API processes behind HAProxy and two
 * worker processes, over PgBouncer in transaction mode, PostgreSQL and Redis of their own, with
 * embeddings from a fake OpenAI-compatible endpoint (test/scale/helpers/stack.ts). 20 clients
 * write (with Idempotency-Key), supersede (with expectVersion), retrieve and ask for context
 * across 50 tenants (test/scale/helpers/load.ts).
 *
 * - 1 vs 3 API nodes: the same clients for 20 s against one node, then three; throughput, latency
 *   and where the CPU went.
 * - 60 s with one API node SIGKILLed at 15 s (started again at 20 s) and one worker SIGKILLed at
 *   35 s (started again at 40 s). Afterwards: no request failed (a 5xx, or its connection closed
 *   without an answer) but those in flight on the killed node: HAProxy's log names that node as
 *   the one it sent the request to, the client sent it before the node's exit was seen and it
 *   ended after the SIGKILL was sent (at most one per client, since each has one request at a
 *   time); every other answer is 2xx or an
 *   expected 409; every acknowledged write in PostgreSQL with its versions contiguous from 1 and each
 *   acknowledged version's content as acknowledged; one fact per Idempotency-Key; every live
 *   fact embedded once, at its current version (texts the endpoint was asked for twice are
 *   reported as at-least-once delivery, not counted as failures).
 * - Rate limits across nodes: a tenant's budget (and a caller's) is spent once, whichever of the
 *   three nodes HAProxy sends each request to, and every node refuses past it.
 */
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddingText } from '../../src/embeddings/provider.ts';
import { tokenFor } from '../helpers/api.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { TEST_APP_ROLE } from '../../support/urls.ts';
import { eventually, sleep } from '../../support/wait.ts';
import { SERVED_BY } from './helpers/haproxy.ts';
import { type Answer, emptyLedger, FACT_TYPE, figures, formatFigures, type LoadRun, runLoad, type Tenant } from './helpers/load.ts';
import { BOUNCER_POOL_SIZE, cpuBetween, cpuParts, type CpuSample, type ScaleStack, startScaleStack } from './helpers/stack.ts';

const CLIENTS = 20;
const TENANTS = 50;
const COMPARE_MS = 20_000;
const RUN_MS = 60_000;
const KILL_API_AT_MS = 15_000;
const RESTART_API_AT_MS = 20_000;
const KILL_WORKER_AT_MS = 35_000;
const RESTART_WORKER_AT_MS = 40_000;
const KILLED_NODE = 'api2';
const ALL_NODES = ['api1', 'api2', 'api3'];
const WORKERS = 2;
/** Reports a minute: per caller, and per tenant (all its callers). Only the rate-limit test asks for reports. */
const REPORTS_LIMIT = { perCaller: 10, perTenant: 20 };
/** Not reached by the load (the limiter still counts every request in Redis). */
const UNREACHED_LIMIT = '1000000/1000000';

/** What a client may be answered besides 2xx: another client superseded first, or its own keyed write is still running. */
const expectedConflict = (a: Answer) => a.status === 409 && (a.code === 'fact-changed' || a.code === 'idempotency-in-flight');
const ok = (a: Answer) => a.status >= 200 && a.status < 300;
/** How the requests lost at the kill ended: HAProxy's 502, or the connection closed without an answer. */
const tally502 = (failed: readonly Answer[]) =>
  `${failed.filter((a) => a.status >= 500).length} × 5xx from HAProxy, ${failed.filter((a) => a.status === 0).length} × connection closed`;

/** Answers counted by what they were (operation, status, code, message, node), for a failure message. */
function tally(answers: readonly Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of answers) {
    const key = `${a.op} ${a.status} ${a.code ?? ''} on ${a.node || '?'}: ${a.message ?? ''}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/**
 * None of these answers may exist. The tally leads the failure message, on one line, because a CI
 * summary shows only an error's first line (and vitest abbreviates the object it compares).
 */
function expectNoneOf(what: string, answers: readonly Answer[], complaints: string): void {
  const counts = tally(answers);
  const listed = Object.entries(counts).map(([answer, n]) => `${n} × ${answer}`).join('; ');
  expect(counts, `${what}: ${listed}\n${complaints}`).toEqual({});
}

const cores = (cpu: CpuSample, seconds: number, part: (typeof cpuParts)[number]) => (cpu[part] / seconds).toFixed(2);

function cpuLine(cpu: CpuSample, seconds: number): string {
  return cpuParts.map((part) => `${part} ${cores(cpu, seconds, part)}`).join(', ');
}

/** CPU milliseconds per request answered, by part (the machine's busy time included). */
function cpuPerRequest(cpu: CpuSample, requests: number): string {
  return cpuParts.map((part) => `${part} ${((cpu[part] / requests) * 1000).toFixed(1)}`).join(', ');
}

describe('scale: API nodes behind HAProxy, workers, PgBouncer, PostgreSQL, Redis', () => {
  let stack: ScaleStack;
  let tenants: Tenant[];
  const ledger = emptyLedger();

  beforeAll(async () => {
    stack = await startScaleStack({
      apiNodes: ALL_NODES.length,
      workers: WORKERS,
      env: {
        MNEMO_RATE_LIMIT_WRITES: UNREACHED_LIMIT,
        MNEMO_RATE_LIMIT_SEARCHES: UNREACHED_LIMIT,
        MNEMO_RATE_LIMIT_READS: UNREACHED_LIMIT,
        MNEMO_RATE_LIMIT_REPORTS: `${REPORTS_LIMIT.perCaller}/${REPORTS_LIMIT.perTenant}`,
      },
    });
    tenants = await Promise.all(
      Array.from({ length: TENANTS }, async (_, i) => {
        const id = uniqueTenant(`scale-${i}`);
        return { id, token: await tokenFor({ tid: id, sub: 'app-1', role: 'admin' }, { ttlSeconds: 3600 }) };
      }),
    );
  });

  afterAll(async () => {
    await stack?.close();
  });

  it('1 vs 3 API nodes: the same 20 clients for 20 s each; throughput, latency and where the CPU went', async () => {
    const runs: Array<{ nodes: number; run: LoadRun; cpu: CpuSample }> = [];
    for (const names of [['api1'], ALL_NODES]) {
      const balancer = await stack.balance(names);
      const before = stack.cpu();
      const run = await runLoad({ url: balancer.url, tenants, clients: CLIENTS, durationMs: COMPARE_MS, ledger });
      const cpu = cpuBetween(before, stack.cpu());
      await balancer.stop();
      runs.push({ nodes: names.length, run, cpu });
      console.info(`[scale] ${formatFigures(`${names.length} API node(s), ${CLIENTS} clients`, run)}`);
    }

    const rows = runs.map(({ nodes, run, cpu }) => {
      const f = figures(run);
      const all = run.answers.map((a) => a.doneAt - a.sentAt).sort((a, b) => a - b);
      return { nodes, f, cpu, p50: all[Math.floor(all.length / 2)]!, p99: all[Math.ceil(all.length * 0.99) - 1]! };
    });
    const [one, three] = rows as [(typeof rows)[0], (typeof rows)[0]];
    console.info(
      [
        `[scale] 1 vs 3 API nodes (${CLIENTS} clients, ${COMPARE_MS / 1000} s each, 2 workers, PgBouncer, ${TENANTS} tenants):`,
        ...rows.map(
          ({ nodes, f, cpu, p50, p99 }) =>
            `  ${nodes} node(s): ${f.perSecond.toFixed(0)} requests/s, p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms; ` +
            `CPU cores used: ${cpuLine(cpu, f.seconds)}; CPU ms per request: ${cpuPerRequest(cpu, f.total)}`,
        ),
        `  3 nodes / 1 node: ${(three.f.perSecond / one.f.perSecond).toFixed(2)}× the throughput`,
      ].join('\n'),
    );

    for (const { run } of runs) {
      const unexpected = run.answers.filter((a) => !ok(a) && !expectedConflict(a));
      expectNoneOf('answers neither 2xx nor an expected 409', unexpected, stack.complaints());
    }
    // Each run spread its requests over every node it had.
    const served = new Set(runs[1]!.run.answers.map((a) => a.node));
    expect([...served].sort()).toEqual(ALL_NODES);
    // More nodes never cost throughput: a node adds a process the cores are shared with, not a bottleneck.
    expect(three.f.perSecond).toBeGreaterThan(one.f.perSecond * 0.8);
  });

  it('60 s with an API node and a worker SIGKILLed and restarted: no 5xx but in flight on the killed node; every acknowledged write kept; every fact embedded once', async () => {
    const balancer = await stack.balance(ALL_NODES);
    const before = stack.cpu();
    const startedAt = performance.now();
    const at = (ms: number) => sleep(Math.max(0, startedAt + ms - performance.now()));
    const events: Record<string, number> = {};
    // Two schedules side by side, so a slow restart of one does not push the other back.
    const apiChaos = async () => {
      await at(KILL_API_AT_MS);
      events.apiKilling = performance.now();
      await stack.killApi(KILLED_NODE);
      events.apiKilled = performance.now();
      await balancer.waitFor(KILLED_NODE, 'DOWN');
      events.apiMarkedDown = performance.now();
      await at(RESTART_API_AT_MS);
      events.apiRestarted = performance.now();
      await stack.restartApi(KILLED_NODE);
      events.apiListening = performance.now();
      await balancer.waitFor(KILLED_NODE, 'UP');
      events.apiMarkedUp = performance.now();
    };
    const workerChaos = async () => {
      await at(KILL_WORKER_AT_MS);
      events.workerKilled = performance.now();
      await stack.killWorker(0);
      await at(RESTART_WORKER_AT_MS);
      events.workerRestarted = performance.now();
      await stack.restartWorker(0);
      events.workerStarted = performance.now();
    };
    const [run] = await Promise.all([runLoad({ url: balancer.url, tenants, clients: CLIENTS, durationMs: RUN_MS, ledger }), apiChaos(), workerChaos()]);
    const cpu = cpuBetween(before, stack.cpu());
    // From the SIGKILL sent to its exit seen: a request may still reach the node in between.
    const [killing, killedAt] = [events.apiKilling!, events.apiKilled!];
    // Both came back while the load still ran: what follows checks a run that went through both.
    expect(events.apiMarkedUp).toBeLessThan(run.endedAt);
    expect(events.workerStarted).toBeLessThan(run.endedAt);
    console.info(`[scale] ${formatFigures(`3 API nodes, ${CLIENTS} clients, ${KILLED_NODE} and a worker killed`, run)}`);

    // In flight on the killed node: HAProxy's log says it sent the request to that node, the client
    // sent it before the node's exit was seen and its answer (a 502, or the connection closed
    // without one) came after the SIGKILL was sent.
    const abnormal = new Map(balancer.abnormal().map((logged) => [logged.requestId, logged]));
    const inFlightOnKilled = (a: Answer) =>
      (a.status === 0 || [502, 503, 504].includes(a.status)) &&
      abnormal.get(a.requestId)?.server === KILLED_NODE &&
      a.sentAt <= killedAt &&
      a.doneAt >= killing;
    const failed = run.answers.filter((a) => a.status === 0 || a.status >= 500);
    expectNoneOf('failed but not in flight on the killed node', failed.filter((a) => !inFlightOnKilled(a)), stack.complaints());
    // One request at a time per client: at most one each was on the killed node.
    expect(failed.length).toBeLessThanOrEqual(CLIENTS);
    expectNoneOf(
      'answers neither 2xx, an expected 409 nor in flight on the killed node',
      run.answers.filter((a) => !ok(a) && !expectedConflict(a) && !inFlightOnKilled(a)),
      stack.complaints(),
    );
    // The restarted node took its share again.
    expect(run.answers.some((a) => a.node === KILLED_NODE && a.sentAt > events.apiMarkedUp! && ok(a))).toBe(true);

    // The writes: everything acknowledged, in every run of this file, is in PostgreSQL as acknowledged.
    expect(ledger.anomalies).toEqual([]);
    const unacknowledged = [...ledger.writes.values()].filter((id) => id === undefined).length;
    expect(unacknowledged).toBe(0);
    const tenantIds = tenants.map((t) => t.id);
    const stored = await stack.admin<{ id: string; version: number; versions: number[]; contents: Record<string, unknown>; firstKey: string }[]>`
      select f.id, f.version, array_agg(r.version order by r.version) as versions,
             jsonb_object_agg(r.version, r.content) as contents,
             min(r.content->>'key') filter (where r.version = 1) as "firstKey"
      from facts f join fact_revisions r on r.tenant_id = f.tenant_id and r.fact_id = f.id
      where f.tenant_id = any(${tenantIds})
      group by f.id, f.version`;
    const byId = new Map(stored.map((row) => [row.id, row]));
    const problems: string[] = [];
    let acknowledgedVersions = 0;
    for (const [id, fact] of ledger.facts) {
      const row = byId.get(id);
      if (!row) {
        problems.push(`${id}: acknowledged, not in PostgreSQL`);
        continue;
      }
      const contiguous = Array.from({ length: row.version }, (_, i) => i + 1);
      if (JSON.stringify(row.versions) !== JSON.stringify(contiguous)) problems.push(`${id}: versions ${row.versions.join(',')} at version ${row.version}`);
      for (const [version, content] of fact.versions) {
        acknowledgedVersions++;
        if (!isDeepStrictEqual(row.contents[String(version)], content)) {
          problems.push(`${id} v${version}: ${JSON.stringify(row.contents[String(version)])}, acknowledged ${JSON.stringify(content)}`);
        }
      }
    }
    // No write stored twice: one fact per Idempotency-Key, the one acknowledged.
    const factsByKey = new Map<string, string[]>();
    for (const row of stored) factsByKey.set(row.firstKey, [...(factsByKey.get(row.firstKey) ?? []), row.id]);
    for (const [key, id] of ledger.writes) {
      const found = factsByKey.get(key) ?? [];
      if (found.length !== 1 || found[0] !== id) problems.push(`write ${key}: acknowledged as ${id}, stored as ${found.join(',') || 'nothing'}`);
    }
    expect(stored.length).toBe(ledger.writes.size);
    expect(problems).toEqual([]);

    // The embeddings: every live fact once at its current version, after the workers caught up.
    const loadEndedAt = performance.now();
    const vectors = async () => {
      const [row] = await stack.admin<{ live: number; current: number; missing: number; stale: number }[]>`
        select count(*)::int as live,
               count(*) filter (where e.version = f.version)::int as current,
               count(*) filter (where e.fact_id is null)::int as missing,
               count(*) filter (where e.version <> f.version)::int as stale
        from facts f
        left join fact_embeddings e on e.tenant_id = f.tenant_id and e.fact_id = f.id and e.model = ${stack.fake.model}
        where f.tenant_id = any(${tenantIds}) and f.invalidated_at is null`;
      return row!;
    };
    const settled = await eventually(
      async () => {
        const state = await vectors();
        return state.current === state.live && state;
      },
      120_000,
      async () => `embeddings not caught up: ${JSON.stringify(await vectors())}`,
      500,
    );
    const settleMs = performance.now() - loadEndedAt;
    expect(settled).toEqual({ live: stored.length, current: stored.length, missing: 0, stale: 0 });
    const [vectorRows] = await stack.admin<{ n: number }[]>`
      select count(*)::int as n from fact_embeddings where tenant_id = any(${tenantIds}) and model = ${stack.fake.model}`;
    expect(vectorRows!.n).toBe(stored.length);

    // Through PgBouncer: every API node and worker is its client, and every connection the app role
    // holds on PostgreSQL is one of PgBouncer's, within its pool.
    const clients = (await stack.bouncer.show('clients')).filter((c) => c.database === stack.database.name);
    const clientsOf = (application: string) => clients.filter((c) => c.application_name === application).length;
    const [pool] = (await stack.bouncer.show('pools')).filter((p) => p.database === stack.database.name);
    const bouncerServers = ['sv_active', 'sv_idle', 'sv_used', 'sv_tested', 'sv_login'].reduce((sum, column) => sum + Number(pool?.[column] ?? 0), 0);
    const [server] = await stack.admin<{ connections: number }[]>`
      select count(*)::int as connections from pg_stat_activity where usename = ${TEST_APP_ROLE}`;
    expect(clientsOf('mnemo-api')).toBeGreaterThanOrEqual(ALL_NODES.length);
    expect(clientsOf('mnemo-worker')).toBeGreaterThanOrEqual(WORKERS);
    expect(server!.connections).toBe(bouncerServers);
    expect(bouncerServers).toBeLessThanOrEqual(BOUNCER_POOL_SIZE);

    // At-least-once delivery, reported: how often the endpoint was asked for each revision's text.
    const revisions = await stack.admin<{ content: unknown; current: boolean }[]>`
      select r.content, r.version = f.version as current
      from fact_revisions r join facts f on f.tenant_id = r.tenant_id and f.id = r.fact_id
      where r.tenant_id = any(${tenantIds})`;
    const calls = revisions.map((r) => ({ current: r.current, n: stack.fake.embedCount(embeddingText(FACT_TYPE, r.content)) }));
    const twice = calls.filter((c) => c.n > 1).length;
    const never = calls.filter((c) => c.n === 0);
    // A current version has its vector, so the endpoint embedded it; an older one may have been superseded before its turn.
    expect(never.filter((c) => c.current)).toEqual([]);

    const seconds = figures(run).seconds;
    const byNode = ALL_NODES.map((name) => `${name} ${run.answers.filter((a) => a.node === name).length}`).join(', ');
    const f = (ms: number) => `${((ms - startedAt) / 1000).toFixed(1)} s`;
    console.info(
      [
        `[scale] 60 s run, ${CLIENTS} clients, ${TENANTS} tenants, 3 API nodes (requests: ${byNode}), 2 workers:`,
        `  ${KILLED_NODE} SIGKILLed at ${f(killing)}, marked down by HAProxy ${((events.apiMarkedDown! - killing) / 1000).toFixed(1)} s later; ` +
          `started again at ${f(events.apiRestarted!)}, listening after ${((events.apiListening! - events.apiRestarted!) / 1000).toFixed(1)} s, ` +
          `back in HAProxy at ${f(events.apiMarkedUp!)}`,
        `  worker SIGKILLed at ${f(events.workerKilled!)}, a new one started at ${f(events.workerRestarted!)}, taking jobs after ${((events.workerStarted! - events.workerRestarted!) / 1000).toFixed(1)} s`,
        `  failed requests: ${failed.length} (${tally502(failed)}), all in flight on ${KILLED_NODE} at the kill (at most ${CLIENTS} allowed); every other answer 2xx or 409`,
        `  writes retried with their Idempotency-Key: ${run.counters.writeRetries}; supersede conflicts (409, re-read and retried): ${run.counters.conflicts}; ` +
          `supersedes found committed after a lost answer: ${run.counters.supersedesFoundCommitted}`,
        `  all runs: ${ledger.writes.size} facts written, ${acknowledgedVersions} acknowledged versions, all in PostgreSQL with contiguous versions`,
        `  embeddings: ${settled.current}/${settled.live} live facts at their current version, caught up ${(settleMs / 1000).toFixed(1)} s after the load; ` +
          `revisions embedded more than once (at-least-once delivery): ${twice} of ${calls.length}; older revisions never embedded (superseded first): ${never.length}`,
        `  PgBouncer: ${clients.length} client connections (API ${clientsOf('mnemo-api')}, workers ${clientsOf('mnemo-worker')}) over ${bouncerServers} server connections (pool ${BOUNCER_POOL_SIZE}), the app role's only ones on PostgreSQL`,
        `  CPU cores used: ${cpuLine(cpu, seconds)}`,
      ].join('\n'),
    );
    await balancer.stop();
  });

  it('rate limits are shared by every node: a tenant and a caller get their budget once, and every node refuses past it', async () => {
    const balancer = await stack.balance(ALL_NODES);
    const report = async (tenantId: string, sub: string) => {
      const token = await tokenFor({ tid: tenantId, sub, role: 'admin' });
      return async () => {
        const response = await fetch(`${balancer.url}/v1/memory/report`, { headers: { authorization: `Bearer ${token}` } });
        const body = (await response.json()) as { error?: { code: string } };
        return { status: response.status, code: body.error?.code, retryAfter: response.headers.get('retry-after'), node: response.headers.get(SERVED_BY) };
      };
    };
    type Outcome = Awaited<ReturnType<Awaited<ReturnType<typeof report>>>>;
    const sequence = async (call: () => Promise<Outcome>, n: number) => {
      const outcomes: Outcome[] = [];
      for (let i = 0; i < n; i++) outcomes.push(await call());
      return outcomes;
    };
    const summary = (outcomes: Outcome[]) => ({
      allowed: outcomes.filter((o) => o.status === 200).length,
      refused: outcomes.filter((o) => o.status === 429 && o.code === 'rate-limited' && Number(o.retryAfter) >= 1).length,
      other: outcomes.filter((o) => o.status !== 200 && o.status !== 429),
      refusingNodes: [...new Set(outcomes.filter((o) => o.status === 429).map((o) => o.node))].sort(),
    });

    // A tenant: four callers, each within its own limit, together past the tenant's.
    const tenantId = uniqueTenant('scale-limited');
    const perCallerRequests = REPORTS_LIMIT.perCaller - 1;
    const callers = await Promise.all(['caller-1', 'caller-2', 'caller-3', 'caller-4'].map((sub) => report(tenantId, sub)));
    const tenant = summary((await Promise.all(callers.map((call) => sequence(call, perCallerRequests)))).flat());

    // A caller: alone, twice its own limit.
    const single = summary(await sequence(await report(uniqueTenant('scale-limited'), 'caller-1'), REPORTS_LIMIT.perCaller * 2));

    console.info(
      `[scale] rate limits across 3 nodes (reports ${REPORTS_LIMIT.perCaller}/${REPORTS_LIMIT.perTenant} a minute): ` +
        `tenant (4 callers × ${perCallerRequests}): ${tenant.allowed} allowed, ${tenant.refused} refused by ${tenant.refusingNodes.join(', ')}; ` +
        `caller (${REPORTS_LIMIT.perCaller * 2} requests): ${single.allowed} allowed, ${single.refused} refused by ${single.refusingNodes.join(', ')}`,
    );
    expect(tenant).toEqual({ allowed: REPORTS_LIMIT.perTenant, refused: 4 * perCallerRequests - REPORTS_LIMIT.perTenant, other: [], refusingNodes: ALL_NODES });
    expect(single).toEqual({ allowed: REPORTS_LIMIT.perCaller, refused: REPORTS_LIMIT.perCaller, other: [], refusingNodes: ALL_NODES });
    await balancer.stop();
  });
});
