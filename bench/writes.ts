/**
 * Write throughput (issue 12, parts 4 and 5): the API over HTTP against the raw SQL of the same
 * writes, in the same run, so the ratio holds however loaded the machine is.
 *
 *   const rows = await writesBench({ clients: [1, 2, 8, 32], log: console.error });
 *
 * A scratch database is created and migrated (dropped at the end with its roles); the API runs as
 * its own process (`src/server.ts`, the way operators run it, without embeddings so no vector
 * work competes) on that database; the load comes from this process over keep-alive HTTP.
 *
 * Modes, each measured for `seconds` per client count, raw and API interleaved `repeats` times
 * (the median of each is reported):
 * - `single`: `POST /v1/memory/facts` vs the statements a write needs, raw: begin, the tenant and
 *   timeouts (one set_config select), the tenant registered, the clock, the fact, its revision,
 *   commit — prepared, through postgres.js as the app role (row-level security applies);
 * - `single-keyed`: the same with an `Idempotency-Key`, raw adding the insert of the key's record;
 * - `batch`: `POST /v1/memory/facts:batch` of `batchSize` facts vs begin, set_config, the tenant,
 *   one multi-row insert of the facts and one of their revisions from the same JSON, commit.
 *
 * Every client writes to its own tenant, as independent callers do.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { mintDevToken } from '../src/auth/dev-token.ts';
import { uuidv7 } from '../src/core/ids.ts';
import { loadAverage, UNREACHED_RATE_LIMIT, withScratchDatabase } from './harness.ts';

import { freePort } from '../support/ports.ts';
import { hasExited, type RunningProcess, startNode, stopProcess } from '../support/processes.ts';
import { sleep } from '../support/wait.ts';

export type WriteMode = 'single' | 'single-keyed' | 'batch';

export interface WritesBenchOptions {
  /** Concurrent clients for single writes (e.g. 1, 2, 8, 32). */
  clients: number[];
  /** Concurrent clients for batches (default 1, 2, 8). */
  batchClients?: number[];
  log: (line: string) => void;
  modes?: WriteMode[];
  /** Seconds per measurement (default 4). */
  seconds?: number;
  /** Raw and API measured alternately this many times; the medians are reported (default 2). */
  repeats?: number;
  /** Facts per batch (default 1000). */
  batchSize?: number;
}

export interface Row {
  mode: WriteMode;
  clients: number;
  /** Facts per second. */
  api: number;
  raw: number;
  /** api / raw. */
  ratio: number;
  /** 1-minute load average when the measurement ended. */
  load: number;
}

const SECRET = randomBytes(32).toString('hex');
const STATEMENT_TIMEOUT_MS = 5000;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const factBody = (client: number, n: number) => ({
  type: 'bench.note',
  content: { text: `client ${client} note ${n}: the delivery of spare part ${n % 97} moved to next week` },
});


/** Runs `clients` loops of `once` for `seconds`; facts per second. */
async function throughput(clients: number, seconds: number, factsPerCall: number, once: (client: number, n: number) => Promise<void>): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  let calls = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      for (let n = 0; performance.now() < deadline; n++) {
        await once(client, n);
        calls++;
      }
    }),
  );
  return (calls * factsPerCall) / ((performance.now() - started) / 1000);
}

/** The raw statements of one write, as the API's transaction has to make them. */
async function rawWrite(sql: Sql, tenantId: string, body: ReturnType<typeof factBody>, key: string | undefined): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`select set_config('app.tenant_id', ${tenantId}, true), set_config('jit', 'off', true), set_config('statement_timeout', ${String(STATEMENT_TIMEOUT_MS)}, true)`;
    await tx`insert into tenants (id) values (${tenantId}) on conflict (id) do nothing`;
    const [{ now }] = (await tx`select clock_timestamp() as now`) as unknown as [{ now: Date }];
    const id = uuidv7(now.getTime());
    const row = {
      tenant_id: tenantId,
      version: 1,
      type: body.type,
      content: tx.json(body.content),
      trust: 'asserted',
      asserted_by_kind: 'user',
      asserted_by_id: 'bench',
      created_at: now,
      recorded_at: now,
    };
    await tx`insert into facts ${tx({ ...row, id })}`;
    await tx`insert into fact_revisions ${tx({ ...row, fact_id: id })}`;
    if (key) {
      await tx`insert into idempotency_keys (tenant_id, key, request_hash, response_status, response_body, expires_at)
               values (${tenantId}, ${key}, ${'0'.repeat(64)}, 201, ${JSON.stringify({ id, ...body })}, now() + interval '24 hours')`;
    }
  });
}

/** The raw statements of one batch: one multi-row insert per table from the same JSON. */
async function rawBatch(sql: Sql, tenantId: string, bodies: ReturnType<typeof factBody>[]): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`select set_config('app.tenant_id', ${tenantId}, true), set_config('jit', 'off', true), set_config('statement_timeout', ${String(STATEMENT_TIMEOUT_MS)}, true)`;
    await tx`insert into tenants (id) values (${tenantId}) on conflict (id) do nothing`;
    const now = Date.now();
    const rows = bodies.map((body, i) => ({ id: uuidv7(now + i), type: body.type, content: body.content }));
    const columns = sql`tenant_id, version, type, content, trust, asserted_by_kind, asserted_by_id, created_at, recorded_at`;
    const values = sql`${tenantId}, 1, r.type, r.content, 'asserted', 'user', 'bench', clock_timestamp(), clock_timestamp()`;
    await tx`insert into facts (id, ${columns})
             select r.id, ${values} from jsonb_to_recordset(${tx.json(rows)}) as r(id uuid, type text, content jsonb)`;
    await tx`insert into fact_revisions (fact_id, ${columns})
             select r.id, ${values} from jsonb_to_recordset(${tx.json(rows)}) as r(id uuid, type text, content jsonb)`;
  });
}

export async function writesBench(options: WritesBenchOptions): Promise<Row[]> {
  const { log, seconds = 4, repeats = 2, batchSize = 1000 } = options;
  const modes = options.modes ?? ['single', 'single-keyed', 'batch'];
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  return withScratchDatabase('writes', async ({ appUrl }) => {
  let raw: Sql | undefined;
  let api: RunningProcess | undefined;
  try {
    raw = postgres(appUrl, { max: 40, onnotice: () => {} });

    const port = await freePort();
    api = startNode(['--import', 'tsx', 'src/server.ts'], {
      PORT: String(port),
      DATABASE_URL: appUrl,
      REDIS_URL: redisUrl,
      MNEMO_JWT_SECRET: SECRET,
      MNEMO_QUEUE_PREFIX: `bench-writes-${runId}`,
      MNEMO_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      // Counted on every request as in production, so their cost is in the figures, but never reached.
      MNEMO_RATE_LIMIT_WRITES: UNREACHED_RATE_LIMIT,
      MNEMO_RATE_LIMIT_SEARCHES: UNREACHED_RATE_LIMIT,
      MNEMO_RATE_LIMIT_REPORTS: UNREACHED_RATE_LIMIT,
      MNEMO_RATE_LIMIT_READS: UNREACHED_RATE_LIMIT,
      LOG_LEVEL: 'warn',
    });
    const baseUrl = `http://127.0.0.1:${port}`;
    for (let waited = 0; ; waited += 100) {
      if (hasExited(api)) throw new Error(`the API exited: ${api.stdout()}${api.stderr()}`);
      if (waited > 60_000) throw new Error(`the API did not start: ${api.stdout()}${api.stderr()}`);
      const ready = await fetch(`${baseUrl}/readyz`).then((r) => r.ok, () => false);
      if (ready) break;
      await sleep(100);
    }

    const maxClients = Math.max(...options.clients, ...(options.batchClients ?? [1, 2, 8]));
    const tenants = Array.from({ length: maxClients }, (_, i) => `bench-writes-${i}`);
    const tokens = await Promise.all(
      tenants.map(async (tid) => (await mintDevToken({ secret: SECRET, ttlSeconds: 3600, claims: { tid, sub: 'bench', role: 'admin' } })).token),
    );
    const post = async (client: number, path: string, body: unknown, key?: string) => {
      const response = await fetch(`${baseUrl}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${tokens[client]}`,
          'content-type': 'application/json',
          ...(key ? { 'idempotency-key': key } : {}),
        },
        body: JSON.stringify(body),
      });
      const text = await response.text();
      if (response.status !== 201) throw new Error(`POST ${path} answered ${response.status}: ${text.slice(0, 300)}`);
    };

    const measures: Record<WriteMode, { clients: number[]; facts: number; api: (c: number, n: number) => Promise<void>; raw: (c: number, n: number) => Promise<void> }> = {
      single: {
        clients: options.clients,
        facts: 1,
        api: (c, n) => post(c, '/v1/memory/facts', factBody(c, n)),
        raw: (c, n) => rawWrite(raw!, tenants[c]!, factBody(c, n), undefined),
      },
      'single-keyed': {
        clients: options.clients,
        facts: 1,
        api: (c, n) => post(c, '/v1/memory/facts', factBody(c, n), randomUUID()),
        raw: (c, n) => rawWrite(raw!, tenants[c]!, factBody(c, n), randomUUID()),
      },
      batch: {
        clients: options.batchClients ?? [1, 2, 8],
        facts: batchSize,
        api: (c, n) => post(c, '/v1/memory/facts:batch', { facts: Array.from({ length: batchSize }, (_, i) => factBody(c, n * batchSize + i)) }, randomUUID()),
        raw: (c, n) => rawBatch(raw!, tenants[c]!, Array.from({ length: batchSize }, (_, i) => factBody(c, n * batchSize + i))),
      },
    };

    const rows: Row[] = [];
    for (const mode of modes) {
      const measure = measures[mode];
      // Warm up both paths (connections, prepared statements, JIT of the API's code).
      await throughput(Math.min(2, maxClients), 1, measure.facts, measure.raw);
      await throughput(Math.min(2, maxClients), 1, measure.facts, measure.api);
      for (const clients of measure.clients) {
        const apiRates: number[] = [];
        const rawRates: number[] = [];
        for (let repeat = 0; repeat < repeats; repeat++) {
          rawRates.push(await throughput(clients, seconds, measure.facts, measure.raw));
          apiRates.push(await throughput(clients, seconds, measure.facts, measure.api));
        }
        const row: Row = {
          mode,
          clients,
          api: Math.round(median(apiRates)),
          raw: Math.round(median(rawRates)),
          ratio: Math.round((median(apiRates) / median(rawRates)) * 100) / 100,
          load: loadAverage(),
        };
        rows.push(row);
        log(
          `writes ${mode.padEnd(12)} ${String(clients).padStart(2)} clients: API ${String(row.api).padStart(6)}/s  raw ${String(row.raw).padStart(6)}/s  ratio ${row.ratio.toFixed(2)}  ` +
            `(API ${apiRates.map(Math.round).join(', ')}; raw ${rawRates.map(Math.round).join(', ')}; load ${row.load})`,
        );
      }
    }
    return rows;
  } finally {
    if (api) await stopProcess(api);
    await raw?.end({ timeout: 5 }).catch(() => {});
  }
  });
}
