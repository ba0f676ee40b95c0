/**
 * `mnemo restore` (export-format.ts has the file's format): loads an export into an empty
 * PostgreSQL database migrated to the export's version, in one transaction, after checking every
 * row, the header's counts and the rules across tables.
 */
import { createReadStream, existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import postgres, { type Sql, type TransactionSql } from 'postgres';
import { appliedMigrations, EXPORT_FORMAT, EXPORT_FORMAT_VERSION, type ExportHeader, ident, publicTables, shippedMigrations } from './export-format.ts';
import { rowProblem } from './restore-rows.ts';
import { brokenRule } from './restore-rules.ts';

/** An insert is sent once it holds this many rows or this many bytes of JSON, whichever is first. */
const BATCH_ROWS = 1000;
const BATCH_BYTES = 8 * 1024 * 1024;

export class RestoreRefused extends Error {
  override name = 'RestoreRefused';
}

export interface RestoreOptions {
  /** The owner's connection to the target database (DATABASE_ADMIN_URL, else DATABASE_URL). */
  url: string;
  file: string;
  log?: (message: string) => void;
}

const ROW_LINE = /^\{"table":("(?:[^"\\]|\\.)*"),"row":(\{.*\})\}$/;

/** A refusal of what the file holds: the transaction is rolled back, rows already sent included. */
const refuseContent = (where: string, problem: string) => new RestoreRefused(`${where}: ${problem}; nothing was restored`);

/** An error PostgreSQL raises for the data of a row (class 22, data exception; 23, a constraint). */
const refusedByTarget = (error: unknown): error is InstanceType<typeof postgres.PostgresError> =>
  error instanceof postgres.PostgresError && /^2[23]/.test(error.code);

/**
 * Loads an export into the database at `url`, which must be migrated to the export's migrations
 * and hold no rows. Each row is checked against its table's columns (restore-rows.ts) before it is
 * sent, the counts against the header, and the rules across tables (restore-rules.ts) once every
 * row is in, all before the one transaction commits: a refused or failed restore leaves the
 * database as it was. Triggers are off for it (`session_replication_role = replica`): the keyword
 * statistics are copied as they were, and the capture trigger must not count the facts a second
 * time. Returns the rows restored per table.
 */
export async function restore({ url, file, log = () => {} }: RestoreOptions): Promise<Record<string, number>> {
  if (!existsSync(file)) throw new RestoreRefused(`${file} does not exist`);
  const reader = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  const lines = reader[Symbol.asyncIterator]();
  let sql: Sql | undefined;
  try {
    const header = parseHeader((await lines.next()).value, file);
    sql = postgres(url, { max: 1, onnotice: () => {} });
    const restored = await sql.begin(async (tx) => {
      await checkTarget(tx, header, file);
      await tx`set local timezone = 'UTC'`;
      const tables = new Map((await publicTables(tx)).map((t) => [t.name, t]));

      const restored: Record<string, number> = Object.fromEntries(Object.keys(header.tables).map((name) => [name, 0]));
      const pending = new Map<string, { rows: { json: string; line: number }[]; bytes: number }>();
      const flush = async (name: string) => {
        const batch = pending.get(name);
        if (!batch || batch.rows.length === 0) return;
        pending.delete(name);
        const table = ident(name);
        const columns = header.tables[name]!.columns.map(ident).join(', ');
        // OVERRIDING SYSTEM VALUE: an identity column, if a table gains one, keeps its values.
        const insert = (sp: TransactionSql, rows: { json: string }[]) =>
          sp.unsafe(
            `insert into ${table} (${columns}) overriding system value
             select ${columns} from jsonb_populate_recordset(null::${table}, $1::text::jsonb)`,
            [`[${rows.map((r) => r.json).join(',')}]`],
          );
        try {
          await tx.savepoint((sp) => insert(sp, batch.rows));
        } catch (error) {
          if (!refusedByTarget(error)) throw error;
          // Which row: one at a time, each in a savepoint of its own (only on the way to a refusal).
          for (const row of batch.rows) {
            try {
              await tx.savepoint((sp) => insert(sp, [row]));
            } catch (rowError) {
              if (!refusedByTarget(rowError)) throw rowError;
              throw refuseContent(`${file}:${row.line}`, `the target refuses this row of ${name}: ${rowError.message}`);
            }
          }
          throw error;
        }
      };
      let lineNumber = 1;
      let total = 0;
      for (let next = await lines.next(); !next.done; next = await lines.next()) {
        lineNumber++;
        const line: string = next.value;
        if (line === '') continue;
        const where = `${file}:${lineNumber}`;
        const match = ROW_LINE.exec(line);
        const name = match ? (JSON.parse(match[1]!) as string) : undefined;
        if (!match || !name || !(name in header.tables)) {
          throw refuseContent(where, `not a row of a table the header names${name ? ` (${name})` : ''}`);
        }
        let row: unknown;
        try {
          row = JSON.parse(match[2]!);
        } catch {
          throw refuseContent(where, `the row of ${name} is not valid JSON`);
        }
        const problem = rowProblem(name, tables.get(name)!.shapes, row);
        if (problem) throw refuseContent(where, problem);
        // The text as written, not the parsed row, is what PostgreSQL reads: no JavaScript number on the way.
        const batch = pending.get(name) ?? { rows: [], bytes: 0 };
        pending.set(name, batch);
        batch.rows.push({ json: match[2]!, line: lineNumber });
        batch.bytes += match[2]!.length;
        restored[name]!++;
        if (batch.rows.length >= BATCH_ROWS || batch.bytes >= BATCH_BYTES) await flush(name);
        if (++total % 10_000 === 0) log(`restore: ${total} rows`);
      }
      for (const name of [...pending.keys()]) await flush(name);

      const counted = Object.entries(header.tables);
      const over = counted.filter(([name, t]) => restored[name]! > t.rows);
      if (over.length > 0) {
        throw new RestoreRefused(
          `${file} has more rows than its header declares: ${over.map(([name, t]) => `${name} has ${restored[name]} rows, its header ${t.rows}`).join(', ')}; nothing was restored`,
        );
      }
      const short = counted.filter(([name, t]) => restored[name]! < t.rows);
      if (short.length > 0) {
        throw new RestoreRefused(
          `${file} is incomplete: ${short.map(([name, t]) => `${name} has ${restored[name]} of ${t.rows} rows`).join(', ')}; nothing was restored`,
        );
      }
      // The planner has no statistics for tables filled in this transaction until autovacuum runs:
      // the rules' joins need them, and so do the first queries after the commit. ANALYZE counts
      // the transaction's own rows, and its statistics commit with them.
      for (const name of Object.keys(header.tables)) await tx.unsafe(`analyze ${ident(name)}`);
      const broken = await brokenRule(tx, [...tables.values()]);
      if (broken) throw refuseContent(file, broken);
      await advanceSequences(tx);
      return restored;
    });
    for (const [name, rows] of Object.entries(restored)) log(`restore: ${name}: ${rows} rows`);
    return restored;
  } finally {
    reader.close();
    await sql?.end({ timeout: 5 });
  }
}

function parseHeader(line: string | undefined, file: string): ExportHeader {
  let header: Partial<ExportHeader> | undefined;
  try {
    header = line ? (JSON.parse(line) as Partial<ExportHeader>) : undefined;
  } catch {
    // Said below.
  }
  const counts = (t: unknown) => {
    const { rows, columns } = (t ?? {}) as { rows?: unknown; columns?: unknown };
    return Number.isInteger(rows) && (rows as number) >= 0 && Array.isArray(columns) && columns.every((c) => typeof c === 'string');
  };
  if (
    header?.format !== EXPORT_FORMAT ||
    typeof header.migrations !== 'number' ||
    typeof header.tables !== 'object' ||
    header.tables === null ||
    !Object.values(header.tables).every(counts)
  ) {
    throw new RestoreRefused(`${file} is not a Mnemo export (its first line is not a ${EXPORT_FORMAT} header)`);
  }
  if (header.version !== EXPORT_FORMAT_VERSION) {
    throw new RestoreRefused(`${file} is in ${EXPORT_FORMAT} format version ${header.version}; this Mnemo reads version ${EXPORT_FORMAT_VERSION}`);
  }
  return header as ExportHeader;
}

/** Same migrations, same tables and columns, no rows, and a role that may write every tenant's. */
async function checkTarget(tx: TransactionSql, header: ExportHeader, file: string): Promise<void> {
  const shipped = shippedMigrations();
  if (header.migrations > shipped) {
    throw new RestoreRefused(
      `the export is from a newer Mnemo (${header.migrations} migrations; this version has ${shipped}): restore it with the version that made it`,
    );
  }
  const target = await appliedMigrations(tx);
  if (target < header.migrations) {
    throw new RestoreRefused(
      `the target database has ${target} of the export's ${header.migrations} migrations: run \`npm run migrate\` first (DATABASE_ADMIN_URL, else DATABASE_URL)`,
    );
  }
  if (target > header.migrations) {
    throw new RestoreRefused(
      `the export is from an older Mnemo (${header.migrations} migrations; the target database has ${target}): ` +
        'start this version of Mnemo once on the data directory (it migrates it), stop it, and export again',
    );
  }

  const tables = new Map((await publicTables(tx)).map((t) => [t.name, t]));
  for (const [name, { columns }] of Object.entries(header.tables)) {
    const there = tables.get(name);
    if (!there || there.columns.join(',') !== columns.join(',')) {
      throw new RestoreRefused(`the target's table ${name} ${there ? `has columns (${there.columns.join(', ')}), the export (${columns.join(', ')})` : 'does not exist'}`);
    }
  }
  // With the same migrations both have the same tables; a header without one was edited.
  const missing = [...tables.keys()].find((name) => !(name in header.tables));
  if (missing) throw refuseContent(file, `its header has no table ${missing}, which the target has (an export holds every table)`);

  const [role] = await tx<{ name: string; superuser: boolean; bypassrls: boolean }[]>`
    select rolname as name, rolsuper as superuser, rolbypassrls as bypassrls from pg_roles where rolname = current_user`;
  if (!role?.superuser && !role?.bypassrls) {
    throw new RestoreRefused(
      `restore connects as "${role?.name}", which row-level security would confine to one tenant; ` +
        'set DATABASE_ADMIN_URL to a superuser (the tables\' owner is not enough: their row-level security is forced)',
    );
  }
  try {
    await tx`set local session_replication_role = replica`;
  } catch (error) {
    throw new RestoreRefused(`restore must switch triggers off (session_replication_role), which "${role.name}" may not: ${(error as Error).message}`);
  }

  // Nobody writes to the tables until the restore commits (the API must be stopped anyway).
  const names = Object.keys(header.tables).map(ident);
  if (names.length > 0) await tx.unsafe(`lock table ${names.join(', ')} in exclusive mode`);
  const filled: string[] = [];
  for (const name of Object.keys(header.tables)) {
    const [row] = await tx.unsafe<{ any: boolean }[]>(`select exists (select from ${ident(name)}) as any`);
    if (row!.any) filled.push(name);
  }
  if (filled.length > 0) {
    throw new RestoreRefused(
      `the target database is not empty (rows in ${filled.join(', ')}); restore only into a freshly migrated database, it does not merge`,
    );
  }
}

/** Every sequence owned by a column (serial, identity) continues after the restored rows. */
async function advanceSequences(tx: TransactionSql): Promise<void> {
  const owned = await tx<{ sequence: string; table: string; column: string }[]>`
    select s.oid::regclass::text as sequence, c.relname as table, a.attname as column
    from pg_class s
    join pg_depend d on d.classid = 'pg_class'::regclass and d.objid = s.oid and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')
    join pg_class c on c.oid = d.refobjid
    join pg_attribute a on a.attrelid = c.oid and a.attnum = d.refobjsubid
    where s.relkind = 'S' and c.relnamespace = 'public'::regnamespace`;
  for (const { sequence, table, column } of owned) {
    await tx.unsafe(`select setval($1::regclass, m) from (select max(${ident(column)}) as m from ${ident(table)}) x where m is not null`, [sequence]);
  }
}
