/**
 * `mnemo export` (export-format.ts has the file's format): every row of the embedded database,
 * from one snapshot, to a JSON Lines file.
 */
import { once } from 'node:events';
import { createWriteStream, existsSync, renameSync, rmSync } from 'node:fs';
import postgres, { type Sql } from 'postgres';
import { displayDataDir } from './data-dir.ts';
import { startEmbeddedServer } from './database.ts';
import { appliedMigrations, EXPORT_FORMAT, EXPORT_FORMAT_VERSION, type ExportHeader, ident, publicTables } from './export-format.ts';

/** Rows per FETCH from the embedded database (content is at most 64 KiB a row). */
const FETCH_ROWS = 500;

export interface ExportOptions {
  dataDir: string;
  out: string;
  /** Progress is reported every this many rows. */
  progressEvery?: number;
  log?: (message: string) => void;
}

/**
 * Writes every row of the embedded database in `dataDir` to `out`, from one snapshot. Takes the
 * directory's lock (a running API holds it: the export refuses with the lock's message).
 */
export async function exportEmbedded({ dataDir, out, progressEvery = 10_000, log = () => {} }: ExportOptions): Promise<ExportHeader> {
  if (!existsSync(dataDir)) throw new Error(`${displayDataDir(dataDir)} does not exist; set MNEMO_DATA_DIR to the directory the API used`);
  const server = await startEmbeddedServer({ dataDir, mustExist: true });
  // The one connection the socket server takes; as every connection there, the superuser.
  const sql = postgres(server.url('postgres'), { max: 1, max_lifetime: 0, onnotice: () => {}, ...(server.socket.socketPath ? { path: server.socket.socketPath } : {}) });
  try {
    return await writeExport(sql, { out, progressEvery, log });
  } finally {
    await sql.end({ timeout: 5 }).catch(() => {});
    await server.close();
  }
}

/**
 * Writes every row the connection `sql` (a superuser: no row-level security) reads to `out`, from
 * one snapshot; `out` is written under a temporary name first, so a file by that name is always
 * complete. The embedded database is the one exported, but any Mnemo database reads the same.
 */
export async function writeExport(sql: Sql, { out, progressEvery = 10_000, log = () => {} }: Omit<ExportOptions, 'dataDir'>): Promise<ExportHeader> {
  const partial = `${out}.partial`;
  try {
    const header = await sql.begin('isolation level repeatable read read only', async (tx) => {
      await tx`set local timezone = 'UTC'`;
      const tables = await publicTables(tx);
      const header: ExportHeader = {
        format: EXPORT_FORMAT,
        version: EXPORT_FORMAT_VERSION,
        migrations: await appliedMigrations(tx),
        exportedAt: new Date().toISOString(),
        tables: {},
      };
      for (const table of tables) {
        const [row] = await tx.unsafe<{ n: string }[]>(`select count(*)::text as n from ${ident(table.name)}`);
        header.tables[table.name] = { rows: Number(row!.n), columns: table.columns };
      }
      const total = Object.values(header.tables).reduce((sum, t) => sum + t.rows, 0);

      const file = createWriteStream(partial, { mode: 0o600 });
      const failed = new Promise<never>((_, reject) => file.on('error', reject));
      failed.catch(() => {});
      const write = async (line: string) => {
        if (!file.write(line)) await Promise.race([once(file, 'drain'), failed]);
      };
      await write(`${JSON.stringify(header)}\n`);
      let written = 0;
      for (const table of tables) {
        const columns = table.columns.map(ident).join(', ');
        const jsonNull = table.nullableJson.length ? table.nullableJson.map((c) => `${ident(c)} = 'null'::jsonb`).join(' or ') : 'false';
        await tx.unsafe(`declare mnemo_export no scroll cursor for
          select row_to_json(r)::text as row, (${jsonNull}) as json_null from (select ${columns} from ${ident(table.name)}) r`);
        const prefix = `{"table":${JSON.stringify(table.name)},"row":`;
        for (;;) {
          const rows = await tx.unsafe<{ row: string; json_null: boolean }[]>(`fetch ${FETCH_ROWS} from mnemo_export`);
          if (rows.length === 0) break;
          for (const { row, json_null } of rows) {
            if (json_null) {
              throw new Error(`a row of ${table.name} holds JSON null in one of ${table.nullableJson.join(', ')}, which the export cannot tell from SQL NULL: ${row.slice(0, 200)}`);
            }
            await write(`${prefix}${row}}\n`);
            if (++written % progressEvery === 0) log(`export: ${written} of ${total} rows`);
          }
        }
        await tx`close mnemo_export`;
      }
      file.end();
      await Promise.race([once(file, 'finish'), failed]);
      if (written !== total) throw new Error(`export: wrote ${written} rows, counted ${total}`);
      return header;
    });
    renameSync(partial, out);
    return header;
  } catch (error) {
    rmSync(partial, { force: true });
    throw error;
  }
}
