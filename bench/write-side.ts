/**
 * Writes and the embed pipeline side by side (bench/side-by-side.ts).
 *
 * Writes: `POST /v1/memory/facts` from 1/2/8/32 concurrent clients, without and with an
 * Idempotency-Key, against the statements a write needs run raw as the app role in one
 * transaction each (tenant setting, tenant row, clock, fact, revision); and the batch route when
 * the API has one, against the same rows as multi-row inserts.
 *
 * Embed pipeline: with the worker running against an instant endpoint, facts written through
 * the API (8 clients) until every one has a vector; then a backlog written behind the API's back
 * (as an import or an outage leaves one) until the reconciler and the jobs have embedded it.
 */
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { type Api, call, idempotencyKey, progress, type Scratch, throughput, timed, tokenFor } from './harness.ts';
import { addServerTiming, type BreakdownRow, breakdownRow } from './search-scale.ts';
import { textFor } from './synthetic.ts';
import { sleep } from '../support/wait.ts';

export interface WriteRow {
  clients: number;
  api: number;
  apiIdempotent: number;
  raw: number;
}

export interface BatchRow {
  clients: number;
  batch: number;
  api: number | null;
  raw: number;
  route: string | null;
}

const uuid = () => randomUUID();

export async function writesSideBySide(
  api: Api,
  scratch: Scratch,
  sentences: readonly string[],
  options: { clients: readonly number[]; seconds: number; timedApi?: Api | undefined },
): Promise<{ single: WriteRow[]; batch: BatchRow[]; breakdown: BreakdownRow[] }> {
  const tenantId = 'bench-writes';
  const token = await tokenFor(tenantId);
  const raw = postgres(scratch.appUrl, { max: Math.max(...options.clients), onnotice: () => {} });
  let n = 0;
  const body = () => ({ type: 'bench.write', content: { text: textFor(sentences, 1_000_000 + n++) } });
  const rawRow = () => {
    const b = body();
    return { tenant_id: tenantId, id: uuid(), version: 1, type: b.type, content: b.content, trust: 'asserted', asserted_by_kind: 'user', asserted_by_id: 'bench' };
  };
  const rawWrite = async (rows: ReturnType<typeof rawRow>[]) => {
    await raw.begin(async (tx) => {
      await tx`select set_config('app.tenant_id', ${tenantId}, true), set_config('jit', 'off', true)`;
      await tx`insert into tenants (id) values (${tenantId}) on conflict (id) do nothing`;
      const [{ now }] = await tx<[{ now: Date }]>`select now() as now`;
      const stamped = rows.map((r) => ({ ...r, created_at: now, recorded_at: now }));
      await tx`insert into facts ${tx(stamped)}`;
      await tx`insert into fact_revisions ${tx(stamped.map(({ id, ...rest }) => ({ ...rest, fact_id: id })))}`;
    });
    return rows.length;
  };
  const apiWrite = async (headers: Record<string, string>) => {
    const answer = await call(api, token, 'POST', '/v1/memory/facts', body(), headers);
    if (answer.status !== 201) throw new Error(`write answered ${answer.status}: ${JSON.stringify(answer.body)}`);
    return 1;
  };
  try {
    // Warm both paths (connections, plans).
    await throughput(4, 1, () => apiWrite({}));
    await throughput(4, 1, () => rawWrite([rawRow()]));
    const single: WriteRow[] = [];
    for (const clients of options.clients) {
      const row = {
        clients,
        api: await throughput(clients, options.seconds, () => apiWrite({})),
        raw: await throughput(clients, options.seconds, () => rawWrite([rawRow()])),
        apiIdempotent: await throughput(clients, options.seconds, () => apiWrite(idempotencyKey())),
      };
      progress(`writes ${clients} clients: API ${row.api.toFixed(0)}/s, with Idempotency-Key ${row.apiIdempotent.toFixed(0)}/s, raw ${row.raw.toFixed(0)}/s`);
      single.push(row);
    }

    const batchSize = 500;
    const route = await findBatchRoute(api, token, body);
    const batch: BatchRow[] = [];
    for (const clients of [1, 2, 8]) {
      const apiRate = route
        ? await throughput(clients, options.seconds, async () => {
            const answer = await call(api, token, 'POST', route, { facts: Array.from({ length: batchSize }, body) }, idempotencyKey());
            if (answer.status >= 300) throw new Error(`${route} answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`);
            return batchSize;
          })
        : null;
      const rawRate = await throughput(clients, options.seconds, () => rawWrite(Array.from({ length: batchSize }, rawRow)));
      progress(`batch of ${batchSize}, ${clients} clients: API ${apiRate === null ? 'no batch route' : `${apiRate.toFixed(0)}/s`}, raw ${rawRate.toFixed(0)}/s`);
      batch.push({ clients, batch: batchSize, api: apiRate, raw: rawRate, route });
    }
    // Where a single write's milliseconds go: one client, through the API answering Server-Timing.
    const breakdown: BreakdownRow[] = [];
    if (options.timedApi) {
      for (const [mode, headers] of [['write', () => ({})], ['write, Idempotency-Key', idempotencyKey]] as const) {
        const client: number[] = [];
        const totals = new Map<string, number>();
        for (let i = 0; i < 220; i++) {
          const { ms, value } = await timed(() => call(options.timedApi!, token, 'POST', '/v1/memory/facts', body(), headers()));
          if (value.status !== 201) throw new Error(`write answered ${value.status}: ${JSON.stringify(value.body)}`);
          // The first 20 warm the process up.
          if (i < 20) continue;
          client.push(ms);
          addServerTiming(totals, value.headers.get('server-timing'));
        }
        breakdown.push(breakdownRow(null, mode, client, totals));
      }
    }
    return { single, batch, breakdown };
  } finally {
    await raw.end({ timeout: 5 });
  }
}

/** The batch route the API offers (issue 12 names two spellings), or null. */
async function findBatchRoute(api: Api, token: string, body: () => unknown): Promise<string | null> {
  for (const route of ['/v1/memory/facts:batch', '/v1/memory/facts/batch']) {
    const answer = await call(api, token, 'POST', route, { facts: [body()] }, idempotencyKey());
    if (answer.status < 300) return route;
    if (answer.status !== 404 && answer.status !== 405) progress(`${route} answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 200)}`);
  }
  return null;
}

export interface EmbedRow {
  phase: 'live writes' | 'backlog';
  facts: number;
  seconds: number;
  factsPerSecond: number;
}

/**
 * How fast the worker embeds, end to end. The caller has started the worker; `writeApi` writes
 * the live phase through the API, `backlog` facts go in raw. Waits (at most `timeoutSeconds` a
 * phase) until no live fact of the tenant lacks a vector.
 */
export async function embedPipeline(
  api: Api,
  scratch: Scratch,
  sentences: readonly string[],
  model: string,
  options: { live: number; backlog: number; timeoutSeconds: number },
): Promise<EmbedRow[]> {
  const tenantId = 'bench-embed';
  const token = await tokenFor(tenantId);
  const pending = async () => {
    const [{ n }] = await scratch.admin<[{ n: number }]>`
      select count(*)::int as n from facts f
      where f.tenant_id = ${tenantId} and f.invalidated_at is null and not exists (
        select 1 from fact_embeddings e where e.tenant_id = f.tenant_id and e.fact_id = f.id and e.model = ${model} and e.version = f.version)`;
    return n;
  };
  const waitEmbedded = async (label: string, started: number) => {
    const deadline = started + options.timeoutSeconds * 1000;
    let last = 0;
    for (;;) {
      const left = await pending();
      if (left === 0) return (performance.now() - started) / 1000;
      if (performance.now() > deadline) throw new Error(`embed ${label}: ${left} facts still without a vector after ${options.timeoutSeconds} s`);
      if (performance.now() - last > 5000) {
        last = performance.now();
        progress(`embed ${label}: ${left} facts waiting for a vector`);
      }
      await sleep(100);
    }
  };
  const rows: EmbedRow[] = [];

  let written = 0;
  let started = performance.now();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (written < options.live) {
        const i = written++;
        const answer = await call(api, token, 'POST', '/v1/memory/facts', { type: 'bench.embed', content: { text: textFor(sentences, 2_000_000 + i) } });
        if (answer.status !== 201) throw new Error(`write answered ${answer.status}`);
      }
    }),
  );
  let seconds = await waitEmbedded('live writes', started);
  rows.push({ phase: 'live writes', facts: options.live, seconds, factsPerSecond: options.live / seconds });
  progress(`embed live writes: ${options.live} facts written and embedded in ${seconds.toFixed(1)} s (${(options.live / seconds).toFixed(0)}/s)`);

  // The backlog: rows written behind the API's back, so only the reconciler can find them.
  started = performance.now();
  for (let start = 0; start < options.backlog; start += 1000) {
    const rowsChunk = Array.from({ length: Math.min(1000, options.backlog - start) }, (_, k) => ({
      tenant_id: tenantId,
      id: uuid(),
      version: 1,
      type: 'bench.backlog',
      content: { text: textFor(sentences, 3_000_000 + start + k) },
      trust: 'asserted',
      asserted_by_kind: 'service',
      asserted_by_id: 'bench',
      created_at: new Date(),
    }));
    await scratch.admin.begin(async (tx) => {
      await tx`insert into facts ${tx(rowsChunk)}`;
      await tx`insert into fact_revisions ${tx(rowsChunk.map(({ id, ...rest }) => ({ ...rest, fact_id: id })))}`;
    });
  }
  seconds = await waitEmbedded('backlog', started);
  rows.push({ phase: 'backlog', facts: options.backlog, seconds, factsPerSecond: options.backlog / seconds });
  progress(`embed backlog: ${options.backlog} facts embedded in ${seconds.toFixed(1)} s (${(options.backlog / seconds).toFixed(0)}/s)`);
  return rows;
}
