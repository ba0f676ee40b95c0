-- Keyword search ranks by BM25 (src/memory/keyword.ts), which needs each document's length in
-- tokens. The document is now defined once, by a function, and both generated columns use it.
-- Written by hand around drizzle-kit's output: re-adding a generated column drops its GIN index,
-- which drizzle-kit does not recreate.
CREATE FUNCTION mnemo_search_document(p_type text, p_content jsonb) RETURNS tsvector
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT to_tsvector('english'::regconfig, translate(p_type, '._-', '   '))
            || jsonb_to_tsvector('english'::regconfig, coalesce(p_content, '{}'::jsonb), '["string"]'::jsonb) $$;
--> statement-breakpoint
-- Tokens in a document: the positions of every lexeme (a lexeme stored without positions counts once).
CREATE FUNCTION mnemo_token_count(p_document tsvector) RETURNS integer
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0)::integer FROM unnest(p_document) $$;
--> statement-breakpoint
-- A one-lexeme tsquery for a lexeme exactly as stored (no parsing, no stemming): per-term
-- document frequencies are counted through the GIN index with it.
CREATE FUNCTION mnemo_lexeme_query(p_lexeme text) RETURNS tsquery
  LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
  AS $$ SELECT ('''' || replace(replace(p_lexeme, '\', '\\'), '''', '''''') || '''')::tsquery $$;
--> statement-breakpoint
ALTER TABLE "facts" DROP COLUMN "search_vector";
--> statement-breakpoint
ALTER TABLE "facts" ADD COLUMN "search_vector" "tsvector" GENERATED ALWAYS AS (mnemo_search_document(type, content)) STORED NOT NULL;
--> statement-breakpoint
ALTER TABLE "facts" ADD COLUMN "search_length" integer GENERATED ALWAYS AS (mnemo_token_count(mnemo_search_document(type, content))) STORED NOT NULL;
--> statement-breakpoint
CREATE INDEX "facts_search_idx" ON "facts" USING gin ("tenant_id","search_vector");
