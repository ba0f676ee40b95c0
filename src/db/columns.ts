import { sql } from 'drizzle-orm';
import { type AnyPgColumn, customType, text, timestamp } from 'drizzle-orm/pg-core';
import pgvector from 'pgvector';

/** Every tenant table starts with this column; it leads every primary key and index (DESIGN §8). */
export const tenantId = () => text('tenant_id').notNull();

export const timestamptz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * A pgvector column with no fixed dimension: one table holds every model's embeddings, and each
 * model gets its own partial HNSW expression index cast to its dimension (see `ensure_embedding_index`).
 */
export const untypedVector = customType<{ data: number[]; driverData: string }>({
  dataType: () => 'vector',
  toDriver: (value) => pgvector.toSql(value) as string,
  fromDriver: (value) => pgvector.fromSql(value) as number[],
});

export const tsvector = customType<{ data: string }>({
  dataType: () => 'tsvector',
});

/** A CHECK expression keeping a text column inside a closed set (values are code constants). */
export const oneOf = (column: AnyPgColumn, values: readonly string[]) =>
  sql`${column} in (${sql.raw(values.map((value) => `'${value}'`).join(', '))})`;
