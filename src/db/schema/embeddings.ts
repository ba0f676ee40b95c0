import { sql } from 'drizzle-orm';
import { check, integer, pgTable, primaryKey, text, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { oneOf, tenantId, timestamptz, untypedVector } from '../columns.ts';

export const embeddingModelStates = ['backfilling', 'active', 'retired'] as const;
export type EmbeddingModelState = (typeof embeddingModelStates)[number];

/**
 * The embedding models this deployment has used. Not a tenant table: the configured model is
 * the operator's choice for every tenant. Semantic search serves from the `active` model while
 * a new one is `backfilling` (DESIGN §9); at most one model is active.
 */
export const embeddingModels = pgTable(
  'embedding_models',
  {
    model: text('model').primaryKey(),
    dims: integer('dims').notNull(),
    state: text('state', { enum: embeddingModelStates }).notNull(),
    createdAt: timestamptz('created_at').notNull().defaultNow(),
    activatedAt: timestamptz('activated_at'),
    retiredAt: timestamptz('retired_at'),
  },
  (t) => [
    check('embedding_models_dims_range', sql`${t.dims} between 1 and 16000`),
    check('embedding_models_state_known', oneOf(t.state, embeddingModelStates)),
    uniqueIndex('embedding_models_one_active').on(sql`(true)`).where(sql`${t.state} = 'active'`),
  ],
);

/**
 * One embedding per fact and model. `version` is the fact revision that was embedded: an
 * embedding whose version is behind the fact's is stale and the reconciler re-embeds it.
 */
export const factEmbeddings = pgTable(
  'fact_embeddings',
  {
    tenantId: tenantId(),
    factId: uuid('fact_id').notNull(),
    model: text('model').notNull(),
    version: integer('version').notNull(),
    dims: integer('dims').notNull(),
    embedding: untypedVector('embedding').notNull(),
    createdAt: timestamptz('created_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'fact_embeddings_pkey', columns: [t.tenantId, t.factId, t.model] }),
    check('fact_embeddings_dims_match', sql`vector_dims(${t.embedding}) = ${t.dims}`),
  ],
);
