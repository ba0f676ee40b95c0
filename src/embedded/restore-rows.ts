/**
 * What `mnemo restore` checks of each row of an export before PostgreSQL sees it: that it has
 * exactly its table's columns (an export writes every one, null ones too; a key the table does not
 * have would otherwise be dropped without a word by jsonb_populate_recordset), no null where the
 * column allows none, and values of the kind the column's type takes. Only the JSON kind is checked
 * here (and a uuid's form): what PostgreSQL itself would refuse (a timestamp it cannot read, a
 * check constraint, a duplicate key) it refuses when the row is inserted, and restore names the
 * line then.
 */
import type { ColumnShape } from './export-format.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const isString = (value: unknown) => typeof value === 'string';
const isInteger = (value: unknown) => Number.isInteger(value);
const arrayOf = (element: (value: unknown) => boolean) => (value: unknown) => Array.isArray(value) && value.every((v) => v === null || element(v));

/** By type: what a value must be, and how the refusal names it. Types not listed are left to PostgreSQL. */
const KINDS: Record<string, { test: (value: unknown) => boolean; is: string }> = {
  uuid: { test: (value) => isString(value) && UUID.test(value as string), is: 'a uuid' },
  text: { test: isString, is: 'a string' },
  'character varying': { test: isString, is: 'a string' },
  smallint: { test: isInteger, is: 'an integer' },
  integer: { test: isInteger, is: 'an integer' },
  bigint: { test: isInteger, is: 'an integer' },
  real: { test: (value) => typeof value === 'number', is: 'a number' },
  'double precision': { test: (value) => typeof value === 'number', is: 'a number' },
  numeric: { test: (value) => typeof value === 'number', is: 'a number' },
  boolean: { test: (value) => typeof value === 'boolean', is: 'true or false' },
  'timestamp with time zone': { test: isString, is: 'a timestamp' },
  'timestamp without time zone': { test: isString, is: 'a timestamp' },
  date: { test: isString, is: 'a date' },
  // row_to_json has no JSON form for a vector: it writes the vector's text, `[0.25,-0.5,1]`.
  vector: { test: isString, is: 'a vector' },
  'text[]': { test: arrayOf(isString), is: 'an array of strings' },
  'integer[]': { test: arrayOf(isInteger), is: 'an array of integers' },
  'bigint[]': { test: arrayOf(isInteger), is: 'an array of integers' },
};

/** A value as a refusal shows it: JSON, cut short. */
const shown = (value: unknown) => {
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
};

/** What is wrong with `row` as a row of `table`, or undefined when nothing is. */
export function rowProblem(table: string, shapes: ColumnShape[], row: unknown): string | undefined {
  if (typeof row !== 'object' || row === null || Array.isArray(row)) return `the row of ${table} is not a JSON object`;
  const values = row as Record<string, unknown>;
  const known = new Set(shapes.map((c) => c.name));
  const unknown = Object.keys(values).find((key) => !known.has(key));
  if (unknown !== undefined) return `${table} has no column ${JSON.stringify(unknown)}`;
  for (const { name, type, notNull } of shapes) {
    if (!(name in values)) return `the row of ${table} has no "${name}" (an export writes every column, null ones too)`;
    const value = values[name];
    if (value === null) {
      if (notNull) return `${table}.${name} is null, which the column does not allow`;
      continue;
    }
    const kind = KINDS[type];
    if (kind && !kind.test(value)) return `${table}.${name} holds ${shown(value)}, not ${kind.is}`;
  }
  return undefined;
}
