-- The counterpart of ensure_embedding_index: when a model is retired after a switch (DESIGN §9)
-- its vectors are deleted and its partial HNSW index is dropped. Owner-run for the same reason.
CREATE FUNCTION retire_embedding_index(p_model text) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
  AS $$
DECLARE
  index_name text := 'fact_embeddings_hnsw_' || substr(md5(p_model), 1, 16);
BEGIN
  IF EXISTS (SELECT 1 FROM embedding_models WHERE model = p_model AND state <> 'retired') THEN
    RAISE EXCEPTION 'embedding model % is not retired', p_model;
  END IF;
  EXECUTE format('DROP INDEX IF EXISTS %I', index_name);
END
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION retire_embedding_index(text) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION retire_embedding_index(text) TO mnemo_app;
