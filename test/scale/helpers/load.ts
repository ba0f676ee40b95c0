/**
 * The scale test's clients: `clients` loops, each one request at a time, against the load
 * balancer, for a fixed time, across many tenants, doing what agents and apps do:
 *
 * - write a fact with an Idempotency-Key, retrying with the same key when no answer came or a
 *   5xx did (the write may have committed: the retry then replays it), or while the first is
 *   still running (409 idempotency-in-flight);
 * - supersede one of the tenant's facts: read it, supersede with `expectVersion`; on 409
 *   fact-changed (another client got there first) read again and retry; when no answer came,
 *   read again: the fact holding this supersede's content means it committed;
 * - retrieve by keyword, by meaning and both, and ask for a prompt context.
 *
 * Every answer is recorded (operation, status, error code, the node that answered, when it was
 * sent and answered), and every acknowledged write in a ledger, so the test can check afterwards
 * that PostgreSQL holds each of them.
 */
import { randomUUID } from 'node:crypto';
import { sleep } from '../../../support/wait.ts';
import { SERVED_BY } from './haproxy.ts';

export const operations = ['write', 'read', 'supersede', 'keyword', 'semantic', 'both', 'context'] as const;
export type Operation = (typeof operations)[number];

export interface Answer {
  op: Operation;
  /** Sent as X-Request-Id: what HAProxy's log names the request by. */
  requestId: string;
  /** The HTTP status; 0 when no answer came (connection refused or reset, timeout). */
  status: number;
  /** The error envelope's code, or the network error's. */
  code: string | undefined;
  /** The error envelope's message, or the network error's: what a failure report shows. */
  message?: string | undefined;
  /** The API node that answered or was sent the request (X-Served-By); '' when unknown. */
  node: string;
  /** performance.now() when sent and when answered (or failed). */
  sentAt: number;
  doneAt: number;
}

export interface Tenant {
  id: string;
  token: string;
}

export interface Content {
  text: string;
  /** Unique per write and per supersede: what tells one version's content from another's. */
  key: string;
}

export interface LedgerFact {
  tenantId: string;
  /** Each acknowledged version's content, as the answer gave it. */
  versions: Map<number, Content>;
}

/** What the clients were told was done, for the test to find in PostgreSQL. */
export interface Ledger {
  facts: Map<string, LedgerFact>;
  /** Each tenant's acknowledged facts, for supersedes to pick from. */
  byTenant: Map<string, string[]>;
  /** Every write's Idempotency-Key, with the fact id it was acknowledged with (undefined: never acknowledged). */
  writes: Map<string, string | undefined>;
  /** Answers that contradict what was sent (a first version other than 1, a supersede that skipped a version, another content). */
  anomalies: string[];
}

export const emptyLedger = (): Ledger => ({ facts: new Map(), byTenant: new Map(), writes: new Map(), anomalies: [] });

export interface LoadCounters {
  /** Writes sent again with the same key after no answer, a 5xx or 409 idempotency-in-flight. */
  writeRetries: number;
  /** 409 fact-changed: another client superseded first; read again and retried. */
  conflicts: number;
  /** Supersedes whose answer was lost, found committed when the fact was read again. */
  supersedesFoundCommitted: number;
}

export interface LoadRun {
  answers: Answer[];
  counters: LoadCounters;
  startedAt: number;
  endedAt: number;
}

export const FACT_TYPE = 'scale.note';

const words = (
  'appliance spare parts washing machine invoice refund delivery warranty kitchen garden ' +
  'ticket printer laptop battery charger router firmware account password billing address ' +
  'meeting calendar flight hotel booking passport visa allergy peanut coffee tea breakfast ' +
  'project deadline budget report review release server database backup outage incident ' +
  'customer supplier contract renewal discount coupon loyalty points subscription plan'
).split(' ');

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
const sentence = (n: number) => Array.from({ length: n }, () => pick(words)).join(' ');

/** Each operation's share of a client's turns (a supersede's read is counted as a read). */
const mix: ReadonlyArray<[Exclude<Operation, 'read'>, number]> = [
  ['write', 0.25],
  ['supersede', 0.25],
  ['keyword', 0.15],
  ['semantic', 0.1],
  ['both', 0.15],
  ['context', 0.1],
];

function chooseOperation(): Exclude<Operation, 'read'> {
  let r = Math.random();
  for (const [op, share] of mix) {
    if ((r -= share) < 0) return op;
  }
  return 'write';
}

/** Worth sending again: nothing came back, a 5xx (from the balancer or the node), or the first is still running. */
const retryable = (answer: Answer) =>
  answer.status === 0 || answer.status >= 500 || (answer.status === 409 && answer.code === 'idempotency-in-flight');

const MAX_ATTEMPTS = 20;

export interface LoadOptions {
  /** The load balancer. */
  url: string;
  tenants: readonly Tenant[];
  clients: number;
  durationMs: number;
  /** Shared across runs, so later runs supersede earlier runs' facts and the test checks them all. */
  ledger: Ledger;
}

export async function runLoad({ url, tenants, clients, durationMs, ledger }: LoadOptions): Promise<LoadRun> {
  const answers: Answer[] = [];
  const counters: LoadCounters = { writeRetries: 0, conflicts: 0, supersedesFoundCommitted: 0 };

  const call = async (op: Operation, tenant: Tenant, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const requestId = randomUUID();
    const sentAt = performance.now();
    let answer: Answer;
    let parsed: any;
    try {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${tenant.token}`,
          'x-request-id': requestId,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await response.text();
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = text;
      }
      answer = { op, requestId, status: response.status, code: parsed?.error?.code, node: response.headers.get(SERVED_BY) ?? '', sentAt, doneAt: performance.now() };
      if (!response.ok) answer.message = typeof parsed === 'string' ? parsed.slice(0, 200) : parsed?.error?.message;
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      answer = { op, requestId, status: 0, code: cause?.code ?? (error as Error).name, message: cause?.message ?? (error as Error).message, node: '', sentAt, doneAt: performance.now() };
    }
    answers.push(answer);
    return { answer, body: parsed };
  };

  const write = async (tenant: Tenant) => {
    const content: Content = { text: sentence(8), key: randomUUID() };
    ledger.writes.set(content.key, undefined);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { answer, body } = await call('write', tenant, 'POST', '/v1/memory/facts', { type: FACT_TYPE, content }, { 'idempotency-key': content.key });
      if (answer.status === 201) {
        if (body.version !== 1 || body.content?.key !== content.key) ledger.anomalies.push(`write ${content.key} acknowledged as ${JSON.stringify(body)}`);
        ledger.writes.set(content.key, body.id);
        if (!ledger.facts.has(body.id)) {
          ledger.facts.set(body.id, { tenantId: tenant.id, versions: new Map([[1, body.content]]) });
          const ids = ledger.byTenant.get(tenant.id) ?? [];
          ids.push(body.id);
          ledger.byTenant.set(tenant.id, ids);
        }
        return;
      }
      if (!retryable(answer)) return;
      counters.writeRetries++;
      await sleep(100);
    }
  };

  const supersede = async (tenant: Tenant) => {
    const ids = ledger.byTenant.get(tenant.id);
    if (!ids?.length) return write(tenant);
    const id = pick(ids);
    const content: Content = { text: sentence(8), key: randomUUID() };
    let sent = false;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const read = await call('read', tenant, 'GET', `/v1/memory/facts/${id}`);
      if (read.answer.status !== 200) {
        if (!retryable(read.answer)) return;
        await sleep(100);
        continue;
      }
      if (sent && read.body.content?.key === content.key) {
        // An earlier attempt committed though its answer was lost: not acknowledged, but there.
        counters.supersedesFoundCommitted++;
        return;
      }
      const expectVersion: number = read.body.version;
      sent = true;
      const { answer, body } = await call('supersede', tenant, 'POST', `/v1/memory/facts/${id}/supersede`, { content, expectVersion });
      if (answer.status === 200) {
        if (body.version !== expectVersion + 1 || body.content?.key !== content.key) {
          ledger.anomalies.push(`supersede of ${id} at ${expectVersion} acknowledged as ${JSON.stringify(body)}`);
        }
        ledger.facts.get(id)!.versions.set(body.version, body.content);
        return;
      }
      if (answer.status === 409 && answer.code === 'fact-changed') {
        counters.conflicts++;
        continue;
      }
      if (!retryable(answer)) return;
      await sleep(100);
    }
  };

  const search = (op: 'keyword' | 'semantic' | 'both' | 'context', tenant: Tenant) =>
    op === 'context'
      ? call(op, tenant, 'POST', '/v1/memory/context', { query: sentence(2), limit: 5 })
      : call(op, tenant, 'POST', '/v1/memory/retrieve', { mode: op, query: sentence(2), limit: 10 });

  const startedAt = performance.now();
  const deadline = startedAt + durationMs;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < deadline) {
        const tenant = pick(tenants);
        const op = chooseOperation();
        if (op === 'write') await write(tenant);
        else if (op === 'supersede') await supersede(tenant);
        else await search(op, tenant);
      }
    }),
  );
  return { answers, counters, startedAt, endedAt: performance.now() };
}

export interface OperationFigures {
  op: Operation;
  count: number;
  /** Answers per second over the run. */
  perSecond: number;
  p50: number;
  p99: number;
  /** How many answers had each status. */
  statuses: Record<number, number>;
}

const percentile = (sorted: readonly number[], p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/** Throughput and latency per operation (and `all`), over every answer of the run. */
export function figures(run: LoadRun): { seconds: number; total: number; perSecond: number; rows: OperationFigures[] } {
  const seconds = (run.endedAt - run.startedAt) / 1000;
  const rows = operations.map((op) => {
    const mine = run.answers.filter((a) => a.op === op);
    const latencies = mine.map((a) => a.doneAt - a.sentAt).sort((a, b) => a - b);
    const statuses: Record<number, number> = {};
    for (const a of mine) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
    return { op, count: mine.length, perSecond: mine.length / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), statuses };
  });
  return { seconds, total: run.answers.length, perSecond: run.answers.length / seconds, rows };
}

/** The figures as a table for stdout. */
export function formatFigures(title: string, run: LoadRun): string {
  const f = figures(run);
  const all = run.answers.map((a) => a.doneAt - a.sentAt).sort((a, b) => a - b);
  const line = (cells: string[]) => `  ${cells[0]!.padEnd(10)}${cells.slice(1).map((c) => c.padStart(9)).join('')}  `;
  const ms = (value: number) => (Number.isNaN(value) ? '-' : value.toFixed(1));
  const status = (s: Record<number, number>) =>
    Object.entries(s)
      .map(([code, n]) => `${code}×${n}`)
      .join(' ');
  return [
    `${title}: ${f.total} requests in ${f.seconds.toFixed(1)} s = ${f.perSecond.toFixed(0)}/s`,
    line(['operation', 'count', 'per s', 'p50 ms', 'p99 ms']) + 'statuses',
    ...f.rows.map((r) => line([r.op, String(r.count), r.perSecond.toFixed(1), ms(r.p50), ms(r.p99)]) + status(r.statuses)),
    line(['all', String(f.total), f.perSecond.toFixed(1), ms(percentile(all, 50)), ms(percentile(all, 99))]),
  ].join('\n');
}
