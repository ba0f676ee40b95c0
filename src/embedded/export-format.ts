/**
 * Moving up (issue 13, part 5): `mnemo export` writes every row of an embedded data directory to
 * a JSON Lines file (export.ts), `mnemo restore` loads that file into a PostgreSQL server migrated
 * to the same version (restore.ts). This is the file's format and what both read of a database's
 * catalog. docs/guide/embedded-to-server.md is the operator's page.
 *
 * Why not pg_dump: the embedded server is PostgreSQL 18 (PGlite), and pg_dump refuses a server
 * newer than itself, so an operator with the usual pg_dump 15-17 could not dump it; and a dump
 * would also carry the schema, while the target's schema comes from `npm run migrate`.
 *
 * The file: a header line `{format, version, migrations, exportedAt, tables: {name: {rows,
 * columns}}}`, then one line per row `{"table": name, "row": {...}}`, the row without its
 * generated columns (the server computes them again). Rows are written by PostgreSQL itself
 * (`row_to_json`) and handed back to it unparsed, so nothing passes through a JavaScript number:
 * bigints, numbers in JSON content of any precision and timestamps to the microsecond come back
 * as they were, and vectors as their shortest exact text. The one value JSON cannot tell from
 * SQL NULL is a jsonb column holding JSON `null`; Mnemo never writes one, and the export refuses
 * a row that has one rather than lose the difference.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Sql, TransactionSql } from 'postgres';
import { migrationsFolder } from '../db/migrate.ts';

export const EXPORT_FORMAT = 'mnemo-export';
export const EXPORT_FORMAT_VERSION = 1;

export interface TableInfo {
  name: string;
  /** Columns in order, without the generated ones. */
  columns: string[];
  /** The same columns' types and nullability, which restore checks each row against. */
  shapes: ColumnShape[];
  /** Nullable jsonb columns: JSON `null` in them would come back as SQL NULL. */
  nullableJson: string[];
}

export interface ColumnShape {
  name: string;
  /** As `format_type` prints it without a modifier: `uuid`, `text[]`, `timestamp with time zone`. */
  type: string;
  notNull: boolean;
}

export interface ExportHeader {
  format: typeof EXPORT_FORMAT;
  version: number;
  /** Migrations applied to the exported database (drizzle's count). */
  migrations: number;
  exportedAt: string;
  tables: Record<string, { rows: number; columns: string[] }>;
}

export const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The tables of the `public` schema (from the catalog: a table a migration adds is moved without
 * a change here), with their stored columns. drizzle's migration table is not data: each side
 * has its own, written by `npm run migrate`.
 */
export async function publicTables(sql: Sql | TransactionSql): Promise<TableInfo[]> {
  const rows = await sql<{ name: string; columns: string[]; types: string[]; not_null: boolean[]; nullable_json: string[] }[]>`
    select c.relname as name,
           array_agg(a.attname::text order by a.attnum) filter (where a.attgenerated = '') as columns,
           array_agg(format_type(a.atttypid, null) order by a.attnum) filter (where a.attgenerated = '') as types,
           array_agg(a.attnotnull order by a.attnum) filter (where a.attgenerated = '') as not_null,
           coalesce(array_agg(a.attname::text order by a.attnum)
             filter (where a.attgenerated = '' and not a.attnotnull and a.atttypid = 'jsonb'::regtype), '{}') as nullable_json
    from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
      and c.relname <> '__drizzle_migrations'
    group by c.relname order by c.relname`;
  return rows.map((r) => ({
    name: r.name,
    columns: r.columns,
    // A type of an extension's schema off the search path comes schema-qualified (`extensions.vector`).
    shapes: r.columns.map((name, i) => ({ name, type: r.types[i]!.replace(/^.*\./, ''), notNull: r.not_null[i]! })),
    nullableJson: r.nullable_json,
  }));
}

export async function appliedMigrations(sql: Sql | TransactionSql): Promise<number> {
  const [table] = await sql<{ exists: boolean }[]>`select to_regclass('drizzle.__drizzle_migrations') is not null as exists`;
  if (!table?.exists) return 0;
  const [count] = await sql<{ n: number }[]>`select count(*)::int as n from drizzle.__drizzle_migrations`;
  return count!.n;
}

/** The migrations this version of Mnemo has. */
export function shippedMigrations(): number {
  return (JSON.parse(readFileSync(join(migrationsFolder, 'meta', '_journal.json'), 'utf8')) as { entries: unknown[] }).entries.length;
}
