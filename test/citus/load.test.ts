/**
 * The same load on one PostgreSQL and on the Citus cluster: 8 clients, 20 tenants, 15 s each,
 * writing facts, superseding them with expectVersion, listing and searching by keyword, through
 * the real API in this process. The single node is a private PostgreSQL with the nodes' settings,
 * without Citus (not a database on the coordinator: its migration would create roles there that
 * the workers never learn of); the cluster is the coordinator and its two workers, all four on
 * this machine's two cores. So the figures measure what distribution costs per request (a hop from
 * coordinator to worker, and the worker's share of the cores), not what it adds in capacity: on
 * loopback the workers have no cores of their own to add. docs/operations/scaling-and-citus.md ("Citus", "Measured") quotes them.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, expect, it } from 'vitest';
import { type TestApi, startTestApi } from '../helpers/api.ts';
import { openTestDatabase } from '../helpers/database.ts';
import { type PostgresCluster, startPostgresCluster } from '../../support/postgres-cluster.ts';
import { SERVER_SETTINGS } from './helpers/cluster.ts';

const CLIENTS = 8;
const TENANTS = 20;
const DURATION_MS = 15_000;
const operations = ['write', 'supersede', 'list', 'keyword'] as const;
type Operation = (typeof operations)[number];

const opened: TestApi[] = [];
let single: PostgresCluster | undefined;
afterAll(async () => {
  for (const api of opened) await api.close();
  await single?.remove();
});

interface Figures {
  requests: number;
  failures: string[];
  perSecond: number;
  latency: Record<Operation, { n: number; p50: number; p99: number }>;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;

async function runLoad(api: TestApi): Promise<Figures> {
  const tenants = await Promise.all(Array.from({ length: TENANTS }, (_, i) => api.newTenant(`load-${i}`)));
  const own = new Map<string, { id: string; version: number }[]>(tenants.map((t) => [t.tenantId, []]));
  const timings = new Map<Operation, number[]>(operations.map((op) => [op, []]));
  const failures: string[] = [];
  const deadline = performance.now() + DURATION_MS;
  const started = performance.now();
  const timed = async (op: Operation, send: () => Promise<{ status: number; body: any }>, ok: number) => {
    const sentAt = performance.now();
    const answer = await send();
    timings.get(op)!.push(performance.now() - sentAt);
    if (answer.status !== ok && !(op === 'supersede' && answer.status === 409)) failures.push(`${op} ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer;
  };
  const client = async (c: number) => {
    for (let n = 0; performance.now() < deadline; n++) {
      const tenant = tenants[(c * 7 + n) % tenants.length]!;
      const facts = own.get(tenant.tenantId)!;
      const roll = n % 10;
      if (roll < 4 || facts.length === 0) {
        const text = `client ${c} note ${n} about appliance parts and invoices ${randomBytes(3).toString('hex')}`;
        const answer = await timed('write', () => api.request('POST', '/v1/memory/facts', { token: tenant.admin, body: { type: 'load.note', content: { text } } }), 201);
        if (answer.status === 201) facts.push({ id: answer.body.id, version: 1 });
      } else if (roll < 6) {
        const fact = facts[n % facts.length]!;
        const answer = await timed(
          'supersede',
          () => api.request('POST', `/v1/memory/facts/${fact.id}/supersede`, { token: tenant.admin, body: { content: { text: `revised ${n}` }, expectVersion: fact.version } }),
          200,
        );
        if (answer.status === 200) fact.version = answer.body.version;
        if (answer.status === 409) fact.version = answer.body.error.currentVersion ?? fact.version;
      } else if (roll < 8) {
        await timed('list', () => api.request('GET', '/v1/memory/facts?limit=20', { token: tenant.admin }), 200);
      } else {
        await timed('keyword', () => api.request('POST', '/v1/memory/retrieve', { token: tenant.admin, body: { query: 'appliance invoices', mode: 'keyword' } }), 200);
      }
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  const seconds = (performance.now() - started) / 1000;
  const latency = Object.fromEntries(
    operations.map((op) => {
      const sorted = [...timings.get(op)!].sort((a, b) => a - b);
      return [op, { n: sorted.length, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) }];
    }),
  ) as Figures['latency'];
  const requests = operations.reduce((sum, op) => sum + latency[op].n, 0);
  return { requests, failures, perSecond: requests / seconds, latency };
}

const describe = (label: string, f: Figures) =>
  `[citus] ${label}: ${f.perSecond.toFixed(0)} req/s (${f.requests} requests, ${f.failures.length} failed); ` +
  operations.map((op) => `${op} p50 ${f.latency[op].p50.toFixed(1)} ms p99 ${f.latency[op].p99.toFixed(1)} ms`).join('; ');

it('serves the same load on one PostgreSQL and on the coordinator + 2 workers, and prints both', async () => {
  single = await startPostgresCluster({ label: 'citus-single', settings: SERVER_SETTINGS });
  const database = await single.createDatabase();
  // The same pool size (5) as the cluster's test database.
  const singleApi = await startTestApi({ database: openTestDatabase({ ...database, drop: async () => {} }) });
  opened.push(singleApi);
  const onSingle = await runLoad(singleApi);
  console.log(describe('1 PostgreSQL', onSingle));

  const clusterApi = await startTestApi();
  opened.push(clusterApi);
  const onCluster = await runLoad(clusterApi);
  console.log(describe('Citus, coordinator + 2 workers', onCluster));
  console.log(`[citus] throughput on the cluster: ${(onCluster.perSecond / onSingle.perSecond).toFixed(2)}× the single node's`);

  expect(onSingle.failures).toEqual([]);
  expect(onCluster.failures).toEqual([]);
  for (const op of operations) {
    expect(onSingle.latency[op].n, op).toBeGreaterThan(0);
    expect(onCluster.latency[op].n, op).toBeGreaterThan(0);
  }
}, 120_000);
