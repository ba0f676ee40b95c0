/**
 * Moving up (issue 13, part 5): an embedded data directory, written through the domain verbs,
 * exported with `mnemo export` and restored with `mnemo restore` into a migrated PostgreSQL
 * server, loses nothing: every row of every table (generated columns included, which the server
 * computes again), every revision, the coverage report, and keyword search ranks the same.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Sql, TransactionSql } from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import type { Db } from '../../src/db/client.ts';
import { withTenant } from '../../src/db/client.ts';
import { openEmbeddedDatabase } from '../../src/embedded/database.ts';
import { exportEmbedded } from '../../src/embedded/export.ts';
import { publicTables } from '../../src/embedded/export-format.ts';
import { restore, RestoreRefused } from '../../src/embedded/restore.ts';
import { coverageReport } from '../../src/episodes/coverage-report.ts';
import { putSchedule, requestReport } from '../../src/episodes/stored-reports.ts';
import { requestErasure, runErasure } from '../../src/lifecycle/erasure.ts';
import { registerModel, storeEmbeddings } from '../../src/memory/facts/vectors.ts';
import { writeFact } from '../../src/memory/facts/insert.ts';
import { listRevisions } from '../../src/memory/facts/read.ts';
import { deleteFact, supersedeFact } from '../../src/memory/facts/revise.ts';
import { retrieve } from '../../src/memory/retrieval/retrieve.ts';
import { TEST_ERASURE_KEY } from '../helpers/api.ts';
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { projectRoot } from '../../support/processes.ts';
import { startProcess } from '../helpers/process.ts';

/** The migrations this checkout ships (its SQL files), which an export's header counts. */
const MIGRATIONS = readdirSync(join(projectRoot, 'drizzle')).filter((name) => name.endsWith('.sql')).length;

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin-1', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });
const tenantA = admin('move-a');
const tenantB = admin('move-b');
const QUERIES = ['washing machine', 'tax april', 'harvester belt'];

interface Snapshot {
  /** Every row of every table as PostgreSQL prints it (all columns), sorted, by table. */
  rows: Record<string, string[]>;
  revisions: Record<string, unknown>;
  searches: Record<string, string[]>;
  report: unknown;
}

async function allRows(sql: Sql | TransactionSql): Promise<Record<string, string[]>> {
  const rows: Record<string, string[]> = {};
  for (const { name } of await publicTables(sql)) {
    const found = await sql.unsafe<{ row: string }[]>(`select row_to_json(t)::text as row from "${name}" t`);
    rows[name] = found.map((r) => r.row).sort();
  }
  return rows;
}

/** What the domain verbs read back for tenant A. */
async function readBack(db: Db, factIds: string[]): Promise<Omit<Snapshot, 'rows'>> {
  const ctx = { db, principal: tenantA };
  const revisions: Record<string, unknown> = {};
  // A deleted fact answers not found on both sides; its revisions are compared as rows above.
  for (const id of factIds) revisions[id] = await listRevisions(ctx, id).catch((error: Error) => error.name);
  const searches: Record<string, string[]> = {};
  for (const query of QUERIES) {
    searches[query] = (await retrieve(ctx, { query, mode: 'keyword' })).results.map((r) => r.fact.id);
  }
  return { revisions, searches, report: await coverageReport(ctx, {}) };
}

const mnemo = (args: string[], env: Record<string, string>) => {
  const run = startProcess('bin/mnemo.js', args, env);
  return run.exited.then((code) => ({ code, stdout: run.stdout(), stderr: run.stderr() }));
};

describe('moving up: mnemo export, then mnemo restore into PostgreSQL', () => {
  let dir: string;
  let dataDir: string;
  let file: string;
  let factIds: string[];
  let embedded: Snapshot;
  let target: TestDatabase;
  let restoreRun: { code: number | null; stderr: string };
  let vectors: { id: string; version: number; embedding: number[] }[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mnemo-move-'));
    dataDir = join(dir, 'data');
    file = join(dir, 'export.jsonl');
    const e = await openEmbeddedDatabase({ dataDir });
    try {
      const db = e.database.db;
      const a = { db, principal: tenantA };
      const b = { db, principal: tenantB };
      const note = (ctx: typeof a, text: string, extra: object = {}) => writeFact(ctx, { type: 'acme.note', content: { text }, ...extra });
      const parts = await note(a, 'end-7 orders spare parts for a washing machine.');
      const tax = await note(a, 'The quarterly tax filing is due in April.', { scope: { projectId: 'p-1' } });
      const both = await note(a, 'Machine learning notes: the washing of data.');
      const belt = await note(a, 'The harvester needs a belt.');
      await supersedeFact(a, belt.id, { content: { text: 'Rewritten: the harvester needs a new belt.' } });
      await supersedeFact(a, belt.id, { retention: { keepDays: 30 } });
      await supersedeFact(a, tax.id, { content: { text: 'The tax filing moved to May.', amount: 1234.5 } });
      const gone = await note(a, 'A washing note to delete.');
      await deleteFact(a, gone.id);
      // Episodes, one merged into a semantic fact: the coverage report has content.
      await writeFact(a, { type: 'kiwi.page', content: { text: 'Call with Ana' }, path: 'episodes/2026-01-02.md', memoryKind: 'episodic', episodeId: 'ep-1' });
      await writeFact(a, { type: 'kiwi.page', content: { text: 'Call with Bo' }, path: 'episodes/2026-01-03.md', memoryKind: 'episodic', episodeId: 'ep-2' });
      await writeFact(a, {
        type: 'kiwi.page',
        content: { text: 'Ana prefers the washing machine delivered on Fridays' },
        path: 'concepts/ana.md',
        memoryKind: 'semantic',
        mergedFrom: [{ type: 'episode', id: 'ep-1', date: '2026-01-04T00:00:00Z' }],
      });
      // A person's facts erased.
      await note(a, 'Bo lives at 12 Elm Street', { subjects: [{ kind: 'participant', id: 'bo' }] });
      const { erasure } = await requestErasure(a, { kind: 'participant', id: 'bo' }, TEST_ERASURE_KEY);
      expect(await runErasure(db, tenantA.tenantId, erasure.id, { kind: 'participant', id: 'bo' })).toBe('completed');
      // A requested report and a nightly schedule. (Not run here: runReport's progress write
      // waits for a second connection while its report holds the only one.)
      await requestReport(a, {});
      await putSchedule(a, { hourUtc: 3 });
      await note(b, 'Tenant B also owns a washing machine.');
      // Vectors of random floats for a registered model: they must come back bit for bit.
      const model = await registerModel(db, 'move-up-3', 3);
      const live = [parts, both, { ...belt, version: 3 }];
      vectors = live.map((f) => ({ id: f.id, version: f.version, embedding: [Math.random(), -Math.random() / 7, Math.random() * 1e-3] }));
      expect(await withTenant(db, tenantA.tenantId, (tx) => storeEmbeddings(tx, tenantA.tenantId, model.model, 3, vectors))).toBe(3);
      // Behind the app's back, as the superuser: what only PostgreSQL holds exactly (a number no
      // double can, a microsecond) and a table the HTTP layer fills.
      await e.database.sql.begin(async (tx) => {
        await tx`set local role none`;
        await tx`insert into outbox (tenant_id, id, queue, payload, done_at)
                 values ('move-a', gen_random_uuid(), 'embed', '{"n": 123456789012345678901234567890.000000000000000000001}', '2026-01-01 00:00:00.123456+00')`;
        await tx`insert into idempotency_keys (tenant_id, key, request_hash, response_status, response_body, expires_at)
                 values ('move-a', 'k-1', 'h', 201, '{"id":"x"}', now() + interval '1 day')`;
      });

      factIds = (await e.database.sql.begin(async (tx) => {
        await tx`set local role none`;
        return tx<{ id: string }[]>`select id from facts where tenant_id = 'move-a' order by id`;
      })).map((r) => r.id);
      const rows = await e.database.sql.begin(async (tx) => {
        await tx`set local role none`;
        await tx`set local timezone = 'UTC'`;
        return allRows(tx);
      });
      embedded = { rows, ...(await readBack(db, factIds)) };
    } finally {
      await e.close();
    }

    const exported = await mnemo(['export', '--out', file], { MNEMO_DATA_DIR: dataDir });
    expect(exported, exported.stderr).toMatchObject({ code: 0 });
    expect(exported.stderr).toMatch(/export: \d+ rows of 13 tables .* written to /);
    target = await createTestDatabase();
    restoreRun = await mnemo(['restore', '--in', file], { DATABASE_ADMIN_URL: target.adminUrl });
  }, 90_000);

  afterAll(async () => {
    await target?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('writes a header, then one line per row without generated columns', () => {
    const [first, ...lines] = readFileSync(file, 'utf8').trimEnd().split('\n');
    const header = JSON.parse(first!);
    expect(header).toMatchObject({ format: 'mnemo-export', version: 1, migrations: MIGRATIONS });
    expect(Object.keys(header.tables).sort()).toEqual(Object.keys(embedded.rows).sort());
    expect(header.tables).not.toHaveProperty('__drizzle_migrations');
    for (const [name, rows] of Object.entries(embedded.rows)) expect(header.tables[name].rows, name).toBe(rows.length);
    expect(lines).toHaveLength(Object.values(embedded.rows).reduce((sum, rows) => sum + rows.length, 0));
    const fact = JSON.parse(lines.find((l) => l.startsWith('{"table":"facts"'))!);
    expect(fact.row).toHaveProperty('content');
    expect(fact.row).not.toHaveProperty('search_vector');
    expect(header.tables.facts.columns).not.toContain('merge_keys');
  });

  it('restores every row of every table, generated columns included', async () => {
    expect(restoreRun, restoreRun.stderr).toMatchObject({ code: 0 });
    expect(restoreRun.stderr).toContain(`restore: facts: ${embedded.rows.facts!.length} rows`);
    // Every table the app writes to has rows here, so the comparison below is not of empty sets.
    for (const name of ['tenants', 'facts', 'fact_revisions', 'fact_embeddings', 'embedding_models', 'outbox', 'idempotency_keys', 'erasures',
      'coverage_reports', 'coverage_report_schedules', 'keyword_corpus_stats', 'keyword_term_stats']) {
      expect(embedded.rows[name]!.length, name).toBeGreaterThan(0);
    }
    const server = await target.admin.begin(async (tx) => {
      await tx`set local timezone = 'UTC'`;
      return allRows(tx);
    });
    for (const name of Object.keys(embedded.rows)) expect(server[name], name).toEqual(embedded.rows[name]);
    expect(Object.keys(server).sort()).toEqual(Object.keys(embedded.rows).sort());
    // The vectors are the very floats written (float4), not only the same text.
    const stored = await target.admin<{ id: string; values: string[] }[]>`select fact_id as id, embedding::real[]::text[] as values from fact_embeddings`;
    expect(new Map(stored.map((r) => [r.id, r.values.map((v) => Math.fround(Number(v)))]))).toEqual(new Map(vectors.map((v) => [v.id, v.embedding.map(Math.fround)])));
  });

  it('reads back every revision, the same coverage report and the same keyword rankings through the domain verbs', async () => {
    const server = await readBack(target.app.db, factIds);
    expect(server.revisions).toEqual(embedded.revisions);
    expect(Object.values(server.revisions).flatMap((r) => (r as { data: unknown[] }).data).length).toBeGreaterThan(factIds.length);
    expect(server.report).toEqual(embedded.report);
    expect((embedded.report as { unmerged_count: number }).unmerged_count).toBe(1);
    expect(server.searches).toEqual(embedded.searches);
    expect(embedded.searches['washing machine']!.length).toBeGreaterThanOrEqual(3);
  });

  it('continues the sequences and the keyword statistics after the restored rows', async () => {
    const [changes] = await target.admin<{ last: string; max: string | null }[]>`
      select (select last_value::text from keyword_stat_changes_id_seq) as last, (select max(id)::text from keyword_stat_changes) as max`;
    if (changes!.max !== null) expect(BigInt(changes!.last)).toBeGreaterThanOrEqual(BigInt(changes!.max));
    const more = await writeFact({ db: target.app.db, principal: tenantA }, { type: 'acme.note', content: { text: 'Another washing machine for the harvester.' } });
    const found = await retrieve({ db: target.app.db, principal: tenantA }, { query: 'harvester', mode: 'keyword' });
    expect(found.results.map((r) => r.fact.id)).toContain(more.id);
  });

  it('refuses a target that is not empty, and changes nothing', async () => {
    const before = await target.admin<{ n: number }[]>`select count(*)::int as n from facts`;
    await expect(restore({ url: target.adminUrl, file })).rejects.toThrow(/not empty \(rows in .*facts.*\).*does not merge/);
    expect(await target.admin<{ n: number }[]>`select count(*)::int as n from facts`).toEqual(before);
  });

  it('refuses a database migrated to another number of migrations, and an export of another version', async () => {
    const empty = await createEmptyDatabase();
    try {
      await expect(restore({ url: empty.adminUrl, file })).rejects.toThrow(new RegExp(`has 0 of the export's ${MIGRATIONS} migrations: run \`npm run migrate\` first`));
    } finally {
      await empty.drop();
    }
    const [first, ...rest] = readFileSync(file, 'utf8').split('\n');
    const withMigrations = (n: number) => {
      const other = join(dir, `export-${n}.jsonl`);
      writeFileSync(other, [JSON.stringify({ ...JSON.parse(first!), migrations: n }), ...rest].join('\n'));
      return other;
    };
    const older = MIGRATIONS - 1;
    const newer = MIGRATIONS + 1;
    await expect(restore({ url: target.adminUrl, file: withMigrations(older) })).rejects.toThrow(
      `export is from an older Mnemo (${older} migrations; the target database has ${MIGRATIONS})`,
    );
    await expect(restore({ url: target.adminUrl, file: withMigrations(newer) })).rejects.toThrow(
      `export is from a newer Mnemo (${newer} migrations; this version has ${MIGRATIONS})`,
    );
  });

  it('refuses a truncated export and leaves the target empty', async () => {
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    const cut = join(dir, 'cut.jsonl');
    writeFileSync(cut, `${lines.slice(0, -1).join('\n')}\n`);
    const fresh = await createTestDatabase();
    try {
      await expect(restore({ url: fresh.adminUrl, file: cut })).rejects.toThrow(RestoreRefused);
      await expect(restore({ url: fresh.adminUrl, file: cut })).rejects.toThrow(/is incomplete: \w+ has \d+ of \d+ rows/);
      const [row] = await fresh.admin<{ n: number }[]>`select (select count(*) from facts) + (select count(*) from tenants) as n`;
      expect(Number(row!.n)).toBe(0);
    } finally {
      await fresh.drop();
    }
  });

  it('refuses to export while another process (the API) holds the data directory', async () => {
    const out = join(dir, 'busy.jsonl');
    writeFileSync(join(dataDir, 'lock'), `${process.ppid}\n`);
    try {
      await expect(exportEmbedded({ dataDir, out })).rejects.toThrow(new RegExp(`is in use by another Mnemo process \\(pid ${process.ppid}\\); stop it first`));
    } finally {
      rmSync(join(dataDir, 'lock'), { force: true });
    }
    expect(() => readFileSync(out)).toThrow();
    await expect(exportEmbedded({ dataDir: join(dir, 'nothing-here'), out })).rejects.toThrow(/does not exist/);
  });
});
