-- Extensions the schema needs. drizzle-kit does not emit CREATE EXTENSION, so they live here,
-- before the generated schema that uses them.
-- vector: embeddings and HNSW indexes. btree_gin: tenant_id inside GIN indexes.
CREATE EXTENSION IF NOT EXISTS vector;
--> statement-breakpoint
CREATE EXTENSION IF NOT EXISTS btree_gin;
