-- Tenant isolation in the database itself (DESIGN §3, §8), written by hand because drizzle-kit
-- cannot say FORCE ROW LEVEL SECURITY.
--
-- mnemo_app is the role the API and the workers act as: not the tables' owner, not a superuser,
-- no BYPASSRLS. It is a NOLOGIN group; `mnemo migrate` grants it to the login role named in
-- DATABASE_URL (see src/db/migrate.ts). Roles are cluster-wide, hence IF NOT EXISTS.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mnemo_app') THEN
    CREATE ROLE mnemo_app NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
  END IF;
END
$$;
--> statement-breakpoint
GRANT USAGE ON SCHEMA public TO mnemo_app;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO mnemo_app;
--> statement-breakpoint
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO mnemo_app;
--> statement-breakpoint
-- Tables created by later migrations (run by the same owner) are granted the same way.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO mnemo_app;
--> statement-breakpoint
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO mnemo_app;
--> statement-breakpoint
-- The tenant a transaction acts for, set by withTenant() with set_config('app.tenant_id', $1, true).
-- NULL when unset; '' (never a valid tenant id) after a transaction that set it has ended.
-- STABLE so the planner evaluates it once per statement and can use it in index conditions.
CREATE FUNCTION mnemo_current_tenant() RETURNS text
  LANGUAGE sql STABLE PARALLEL SAFE
  AS $$ SELECT nullif(current_setting('app.tenant_id', true), '') $$;
--> statement-breakpoint
-- One policy per tenant table: rows are visible and writable only under their own tenant, and
-- with no tenant set nothing is. FORCE applies it to the tables' owner too.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['facts', 'fact_revisions', 'fact_embeddings', 'outbox',
                           'idempotency_keys', 'erasures', 'coverage_reports']
  LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format(
      'CREATE POLICY tenant_isolation ON %I USING (tenant_id = mnemo_current_tenant()) '
      'WITH CHECK (tenant_id = mnemo_current_tenant())', t);
  END LOOP;
END
$$;
--> statement-breakpoint
-- Each embedding model gets its own partial HNSW index, cast to its dimension, the first time it
-- is used. The app role does not own fact_embeddings, so it cannot create indexes itself; this
-- owner-run function creates exactly one well-formed index per model and nothing else.
-- On a large table, operators may instead create the same index CONCURRENTLY ahead of time
-- (docs/operations.md); the function then finds it and does nothing.
CREATE FUNCTION ensure_embedding_index(p_model text, p_dims integer) RETURNS text
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
  AS $$
DECLARE
  index_name text := 'fact_embeddings_hnsw_' || substr(md5(p_model), 1, 16);
BEGIN
  IF p_model IS NULL OR length(p_model) NOT BETWEEN 1 AND 200 THEN
    RAISE EXCEPTION 'embedding model name must be 1 to 200 characters';
  END IF;
  -- HNSW indexes vectors of at most 2000 dimensions.
  IF p_dims IS NULL OR p_dims NOT BETWEEN 1 AND 2000 THEN
    RAISE EXCEPTION 'embedding dimension % is outside 1..2000 (the HNSW limit)', p_dims;
  END IF;
  -- Serialise concurrent first uses of the same model.
  PERFORM pg_advisory_xact_lock(hashtext('ensure_embedding_index'), hashtext(p_model));
  IF to_regclass(index_name) IS NULL THEN
    EXECUTE format(
      'CREATE INDEX %I ON fact_embeddings USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE model = %L',
      index_name, p_dims, p_model);
  END IF;
  RETURN index_name;
END
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION ensure_embedding_index(text, integer) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION ensure_embedding_index(text, integer) TO mnemo_app;
