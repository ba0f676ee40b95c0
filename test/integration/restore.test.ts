/**
 * `mnemo restore` checks the file before it commits (issue 24): every row against its table's
 * columns, the counts of the header exactly, and the rules the schema implies across tables
 * (there are no foreign keys between them by design): every tenant has its tenants row, every
 * fact its revisions 1 to its version, every embedding a revision and a model, the keyword
 * statistics the facts they count. Each refusal is worded exactly, and a refused restore leaves
 * the target as it was. The export is written from a server database filled through the domain
 * verbs (the same writer `mnemo export` uses on the embedded one; test/integration/move-up.test.ts
 * runs the whole move from PGlite).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { withTenant } from '../../src/db/client.ts';
import { writeExport } from '../../src/embedded/export.ts';
import { type ExportHeader, publicTables } from '../../src/embedded/export-format.ts';
import { restore, RestoreRefused } from '../../src/embedded/restore.ts';
import { registerModel, storeEmbeddings } from '../../src/memory/facts/vectors.ts';
import { writeFact } from '../../src/memory/facts/insert.ts';
import { deleteFact, supersedeFact } from '../../src/memory/facts/revise.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { startProcess } from '../helpers/process.ts';

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin-1', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });
const tenantA = admin('restore-a');
const tenantB = admin('restore-b');
const GHOST = '00000000-0000-4000-8000-000000000001';

type Row = Record<string, unknown>;
interface Export {
  header: ExportHeader;
  rows: { table: string; row: Row }[];
}

describe('mnemo restore checks the file before it commits', () => {
  let dir: string;
  let source: TestDatabase;
  let target: TestDatabase;
  let original: Export;
  let originalFile: string;
  /** The fact superseded twice (versions 1 to 3) and its embedding's model. */
  let revised: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mnemo-restore-'));
    source = await createTestDatabase();
    const a = { db: source.app.db, principal: tenantA };
    const note = (ctx: typeof a, text: string) => writeFact(ctx, { type: 'acme.note', content: { text } });
    const fact = await note(a, 'The harvester needs a belt.');
    revised = fact.id;
    await supersedeFact(a, fact.id, { content: { text: 'The harvester needs a new belt.' } });
    await supersedeFact(a, fact.id, { content: { text: 'The harvester needs a new belt by May.' } });
    await note(a, 'The quarterly tax filing is due in April.');
    const gone = await note(a, 'A note to delete.');
    await deleteFact(a, gone.id);
    await note({ db: source.app.db, principal: tenantB }, 'Tenant B owns a washing machine.');
    const model = await registerModel(source.app.db, 'restore-3', 3);
    await withTenant(source.app.db, tenantA.tenantId, (tx) => storeEmbeddings(tx, tenantA.tenantId, model.model, 3, [{ id: fact.id, version: 3, embedding: [0.25, -0.5, 1] }]));
    // A keyed request refused with a 4xx keeps its answer while its other writes, the tenant's
    // registration included, roll back: a tenant may have idempotency keys and no tenants row.
    await source.admin`insert into idempotency_keys (tenant_id, key, request_hash, response_status, response_body, expires_at)
                       values ('restore-keys-only', 'k-1', 'h', 404, '{"error":{"code":"not-found"}}', now() + interval '1 day')`;
    originalFile = join(dir, 'export.jsonl');
    await writeExport(source.admin, { out: originalFile });
    const [first, ...lines] = readFileSync(originalFile, 'utf8').trimEnd().split('\n');
    original = { header: JSON.parse(first!), rows: lines.map((line) => JSON.parse(line)) };
    target = await createTestDatabase();
  }, 60_000);

  afterAll(async () => {
    await source?.drop();
    await target?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  let edits = 0;
  /** The export changed by `edit` (a copy: the original is left alone), written to a file of its own. */
  const edited = (edit: (copy: Export) => void): string => {
    const copy: Export = structuredClone(original);
    edit(copy);
    const file = join(dir, `edited-${++edits}.jsonl`);
    writeFileSync(file, [JSON.stringify(copy.header), ...copy.rows.map((r) => JSON.stringify(r))].join('\n') + '\n');
    return file;
  };
  /** The line of the file the row at `index` is on (the header is line 1). */
  const lineOf = (index: number) => index + 2;
  const find = (copy: Export, table: string, test: (row: Row) => boolean = () => true) => {
    const index = copy.rows.findIndex((r) => r.table === table && test(r.row));
    if (index < 0) throw new Error(`no ${table} row to edit`);
    return { index, row: copy.rows[index]!.row };
  };
  /** Adds a row and counts it in the header, as a hand-edited file would. */
  const add = (copy: Export, table: string, row: Row) => {
    copy.rows.push({ table, row });
    copy.header.tables[table]!.rows++;
  };
  const remove = (copy: Export, index: number) => {
    const [removed] = copy.rows.splice(index, 1);
    copy.header.tables[removed!.table]!.rows--;
  };
  const factOf = (copy: Export, id: string) => find(copy, 'facts', (row) => row.id === id).row;

  /** Tables of the target that hold rows: none, whatever was refused. */
  const filledTables = async () => {
    const filled: string[] = [];
    for (const { name } of await publicTables(target.admin)) {
      const [row] = await target.admin.unsafe<{ any: boolean }[]>(`select exists (select from "${name}") as any`);
      if (row!.any) filled.push(name);
    }
    return filled;
  };
  const refused = async (file: string, message: string) => {
    const error = await restore({ url: target.adminUrl, file }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RestoreRefused);
    expect((error as Error).message).toBe(message);
    expect(await filledTables()).toEqual([]);
  };

  it('(the unedited export has every kind of row the rules below are about)', () => {
    for (const table of ['tenants', 'facts', 'fact_revisions', 'fact_embeddings', 'embedding_models', 'keyword_stat_changes', 'idempotency_keys']) {
      expect(original.header.tables[table]!.rows, table).toBeGreaterThan(0);
    }
    expect(original.rows.some((r) => r.table === 'tenants' && r.row.id === 'restore-keys-only')).toBe(false);
    expect(original.rows.filter((r) => r.table === 'fact_revisions' && r.row.fact_id === revised).map((r) => r.row.version)).toEqual([1, 2, 3]);
  });

  describe('every row against its table\'s columns, with its line', () => {
    it('a column the table does not have', async () => {
      let line = 0;
      const file = edited((copy) => {
        const { index, row } = find(copy, 'facts');
        row.colour = 'red';
        line = lineOf(index);
      });
      await refused(file, `${file}:${line}: facts has no column "colour"; nothing was restored`);
    });

    it('a column missing from the row', async () => {
      let line = 0;
      const file = edited((copy) => {
        const { index, row } = find(copy, 'fact_revisions');
        delete row.trust;
        line = lineOf(index);
      });
      await refused(file, `${file}:${line}: the row of fact_revisions has no "trust" (an export writes every column, null ones too); nothing was restored`);
    });

    it('null in a column that may not be null', async () => {
      let line = 0;
      const file = edited((copy) => {
        const { index, row } = find(copy, 'facts');
        row.asserted_by_id = null;
        line = lineOf(index);
      });
      await refused(file, `${file}:${line}: facts.asserted_by_id is null, which the column does not allow; nothing was restored`);
    });

    it('a value of the wrong kind for the column\'s type', async () => {
      const cases: [string, Row, string][] = [
        ['version', { version: 'two' }, 'facts.version holds "two", not an integer'],
        ['id', { id: 'not-a-uuid' }, 'facts.id holds "not-a-uuid", not a uuid'],
        ['legal_hold', { legal_hold: 'no' }, 'facts.legal_hold holds "no", not true or false'],
        ['type', { type: 7 }, 'facts.type holds 7, not a string'],
      ];
      for (const [, change, problem] of cases) {
        let line = 0;
        const file = edited((copy) => {
          const { index, row } = find(copy, 'facts');
          Object.assign(row, change);
          line = lineOf(index);
        });
        await refused(file, `${file}:${line}: ${problem}; nothing was restored`);
      }
    });

    it('a row the target\'s own checks refuse (a constraint, a value PostgreSQL cannot read, a duplicate)', async () => {
      let line = 0;
      const bogusTrust = edited((copy) => {
        const { index, row } = find(copy, 'facts');
        row.trust = 'bogus';
        line = lineOf(index);
      });
      await refused(
        bogusTrust,
        `${bogusTrust}:${line}: the target refuses this row of facts: new row for relation "facts" violates check constraint "facts_trust_known"; nothing was restored`,
      );
      const badTime = edited((copy) => {
        const { index, row } = find(copy, 'fact_revisions');
        row.recorded_at = 'yesterday at noon';
        line = lineOf(index);
      });
      await refused(
        badTime,
        `${badTime}:${line}: the target refuses this row of fact_revisions: invalid input syntax for type timestamp with time zone: "yesterday at noon"; nothing was restored`,
      );
      const twice = edited((copy) => {
        const { row } = find(copy, 'tenants');
        add(copy, 'tenants', { ...row });
        line = copy.rows.length + 1;
      });
      await refused(
        twice,
        `${twice}:${line}: the target refuses this row of tenants: duplicate key value violates unique constraint "tenants_pkey"; nothing was restored`,
      );
    });

    it('a line that is not a row of a table the header names', async () => {
      const file = edited((copy) => {
        copy.rows.push({ table: 'secrets', row: { value: 'x' } });
      });
      await refused(file, `${file}:${original.rows.length + 2}: not a row of a table the header names (secrets); nothing was restored`);
    });
  });

  describe('the header\'s counts, exactly', () => {
    it('more rows than the header declares', async () => {
      const file = edited((copy) => {
        const { row } = find(copy, 'facts', (r) => r.id === revised);
        copy.rows.push({ table: 'facts', row: { ...row, id: GHOST } });
      });
      const declared = original.header.tables.facts!.rows;
      await refused(file, `${file} has more rows than its header declares: facts has ${declared + 1} rows, its header ${declared}; nothing was restored`);
    });

    it('fewer rows than the header declares', async () => {
      const file = edited((copy) => {
        copy.rows.splice(find(copy, 'fact_revisions').index, 1);
      });
      const declared = original.header.tables.fact_revisions!.rows;
      await refused(file, `${file} is incomplete: fact_revisions has ${declared - 1} of ${declared} rows; nothing was restored`);
    });

    it('a header without a table the target has', async () => {
      const file = edited((copy) => {
        delete copy.header.tables.outbox;
        copy.rows = copy.rows.filter((r) => r.table !== 'outbox');
      });
      await refused(file, `${file}: its header has no table outbox, which the target has (an export holds every table); nothing was restored`);
    });
  });

  describe('the rules across tables', () => {
    it('a fact of a tenant that has no tenants row (an invented tenant, counted in the header)', async () => {
      const file = edited((copy) => {
        add(copy, 'facts', { ...factOf(copy, revised), tenant_id: 'ghost', id: GHOST, version: 1 });
      });
      await refused(file, `${file}: tenant "ghost" has rows in facts but no row in tenants; nothing was restored`);
    });

    it('`mnemo restore` says a refusal in one line named for the command, and exits 1', async () => {
      const file = edited((copy) => {
        add(copy, 'facts', { ...factOf(copy, revised), tenant_id: 'ghost', id: GHOST, version: 1 });
      });
      const run = startProcess('bin/mnemo.js', ['restore', '--in', file], { DATABASE_ADMIN_URL: target.adminUrl });
      expect(await run.exited).toBe(1);
      expect(run.stderr()).toBe(`mnemo restore: ${file}: tenant "ghost" has rows in facts but no row in tenants; nothing was restored\n`);
      expect(await filledTables()).toEqual([]);
    });

    it('a fact without its revisions, or with revisions missing or beyond its version', async () => {
      const none = edited((copy) => {
        add(copy, 'facts', { ...factOf(copy, revised), id: GHOST, version: 1 });
      });
      await refused(none, `${none}: fact ${GHOST} of tenant "restore-a" is at version 1, so fact_revisions must hold its versions 1 to 1; it holds none; nothing was restored`);
      const gap = edited((copy) => {
        remove(copy, find(copy, 'fact_revisions', (row) => row.fact_id === revised && row.version === 2).index);
      });
      await refused(gap, `${gap}: fact ${revised} of tenant "restore-a" is at version 3, so fact_revisions must hold its versions 1 to 3; it holds 1, 3; nothing was restored`);
      const behind = edited((copy) => {
        factOf(copy, revised).version = 2;
      });
      await refused(behind, `${behind}: fact ${revised} of tenant "restore-a" is at version 2, so fact_revisions must hold its versions 1 to 2; it holds 1, 2, 3; nothing was restored`);
    });

    it('a revision of a fact that facts does not have', async () => {
      const file = edited((copy) => {
        add(copy, 'fact_revisions', { ...find(copy, 'fact_revisions', (row) => row.fact_id === revised).row, fact_id: GHOST });
      });
      await refused(file, `${file}: fact_revisions holds version 1 of fact ${GHOST} of tenant "restore-a", which facts does not have; nothing was restored`);
    });

    it('an embedding of a version that has no revision, or of a model that is not registered or has other dimensions', async () => {
      const version = edited((copy) => {
        find(copy, 'fact_embeddings').row.version = 4;
      });
      await refused(version, `${version}: fact_embeddings holds an embedding of version 4 of fact ${revised} of tenant "restore-a", which fact_revisions does not have; nothing was restored`);
      const model = edited((copy) => {
        find(copy, 'fact_embeddings').row.model = 'unregistered';
      });
      await refused(model, `${model}: fact_embeddings holds an embedding of fact ${revised} of tenant "restore-a" by model "unregistered", which embedding_models does not have; nothing was restored`);
      const dims = edited((copy) => {
        find(copy, 'embedding_models', (row) => row.model === 'restore-3').row.dims = 4;
      });
      await refused(dims, `${dims}: fact_embeddings holds an embedding of fact ${revised} of tenant "restore-a" with 3 dimensions, and model "restore-3" has 4; nothing was restored`);
    });

    it('keyword statistics that do not count the facts there are', async () => {
      const file = edited((copy) => {
        // A live fact marked deleted in facts and its current revision: every other rule holds.
        const row = factOf(copy, revised);
        row.invalidated_at = row.recorded_at;
        row.invalidation_reason = 'deleted';
      });
      const live = original.rows.filter((r) => r.table === 'facts' && r.row.tenant_id === 'restore-a' && r.row.invalidated_at === null).length;
      await refused(
        file,
        `${file}: the keyword statistics of tenant "restore-a" count ${live} live facts, but facts holds ${live - 1}; nothing was restored`,
      );
    });
  });

  it('restores the unedited export into the same target afterwards (the refusals left it as it was), idempotency keys of an unregistered tenant included', async () => {
    const restored = await restore({ url: target.adminUrl, file: originalFile });
    for (const [name, { rows }] of Object.entries(original.header.tables)) expect(restored[name], name).toBe(rows);
    const [row] = await target.admin<{ n: number }[]>`select count(*)::int as n from fact_revisions where fact_id = ${revised}`;
    expect(row!.n).toBe(3);
  });
});
