-- Keyword search at scale (issue 12, part 1; src/memory/keyword.ts, docs/decisions.md "Keyword at
-- scale"): BM25's corpus statistics per tenant, kept as the facts change instead of counted per query.
--
-- What is counted: every fact of the tenant that is not invalidated (deleted, expired by the sweep,
-- erased), whoever may see it and whatever its type or scope. A fact counts with its search_vector
-- and search_length.
--
-- How it stays right without serialising writers: every statement that changes facts appends ONE
-- row to keyword_stat_changes (per tenant), the net change it makes (documents, tokens, and per
-- lexeme the change in documents holding it). Nothing is updated in place by writers, so concurrent
-- writers never wait for each other. The changes are folded into keyword_corpus_stats and
-- keyword_term_stats by mnemo_keyword_fold: by a writer now and then (when it can take the
-- tenant's fold lock without waiting; otherwise it leaves the fold to the next one), and always,
-- waiting for the lock, by a statement that removes content (erasure, the retention purge), so no
-- lexeme of removed content stays behind in a pending change or in a term row (a term row whose
-- count reaches 0 is deleted). A search reads folded statistics plus the pending changes in its
-- own snapshot: the statistics it uses are exactly a fresh count over that snapshot.
CREATE TABLE "keyword_corpus_stats" (
	"tenant_id" text PRIMARY KEY NOT NULL,
	"documents" bigint NOT NULL,
	"tokens" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "keyword_term_stats" (
	"tenant_id" text NOT NULL,
	"lexeme" text NOT NULL,
	"documents" bigint NOT NULL,
	CONSTRAINT "keyword_term_stats_pkey" PRIMARY KEY("tenant_id","lexeme")
);
--> statement-breakpoint
CREATE TABLE "keyword_stat_changes" (
	"tenant_id" text NOT NULL,
	"id" bigserial NOT NULL,
	"documents" bigint NOT NULL,
	"tokens" bigint NOT NULL,
	-- Parallel arrays: lexemes[i] is held by counts[i] more (or, negative, fewer) documents.
	"lexemes" text[] NOT NULL,
	"counts" integer[] NOT NULL,
	CONSTRAINT "keyword_stat_changes_pkey" PRIMARY KEY("tenant_id","id")
);
--> statement-breakpoint
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['keyword_corpus_stats', 'keyword_term_stats', 'keyword_stat_changes']
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
-- Folds the tenant's pending changes into its statistics. With p_wait false it gives up at once
-- (returning false) when another transaction holds the tenant's fold lock. The delete runs after
-- the lock is taken, so in READ COMMITTED it sees every change an earlier fold left; a change
-- committed meanwhile by a writer is simply left for the next fold.
CREATE FUNCTION mnemo_keyword_fold(p_tenant text, p_wait boolean) RETURNS boolean
  LANGUAGE plpgsql SET search_path = public, pg_temp
  AS $$
DECLARE
  emptied text[];
BEGIN
  IF p_wait THEN
    PERFORM pg_advisory_xact_lock(hashtext('mnemo_keyword_fold'), hashtext(p_tenant));
  ELSIF NOT pg_try_advisory_xact_lock(hashtext('mnemo_keyword_fold'), hashtext(p_tenant)) THEN
    RETURN false;
  END IF;

  WITH folded AS (
    DELETE FROM keyword_stat_changes WHERE tenant_id = p_tenant RETURNING documents, tokens, lexemes, counts
  ),
  corpus AS (
    INSERT INTO keyword_corpus_stats AS s (tenant_id, documents, tokens)
    SELECT p_tenant, sum(documents), sum(tokens) FROM folded HAVING count(*) > 0
    ON CONFLICT (tenant_id) DO UPDATE SET documents = s.documents + excluded.documents, tokens = s.tokens + excluded.tokens
  ),
  terms AS (
    INSERT INTO keyword_term_stats AS s (tenant_id, lexeme, documents)
    SELECT p_tenant, c.lexeme, sum(c.n) FROM folded, unnest(folded.lexemes, folded.counts) AS c(lexeme, n)
    GROUP BY c.lexeme HAVING sum(c.n) <> 0
    ORDER BY c.lexeme
    ON CONFLICT (tenant_id, lexeme) DO UPDATE SET documents = s.documents + excluded.documents
    RETURNING s.lexeme, s.documents
  )
  SELECT array_agg(lexeme) INTO emptied FROM terms WHERE documents = 0;

  IF emptied IS NOT NULL THEN
    DELETE FROM keyword_term_stats WHERE tenant_id = p_tenant AND lexeme = ANY (emptied);
  END IF;
  RETURN true;
END
$$;
--> statement-breakpoint
-- How many pending lexeme entries a tenant carries, on average, before a writer folds them: each
-- change of n entries folds with probability n / 20000. A search reads every pending entry of its
-- tenant, so this bounds that part of its work (about 20,000 entries, a few milliseconds) without
-- any writer counting what is pending; a fold of that many entries takes tens of milliseconds.
CREATE FUNCTION mnemo_keyword_fold_entries() RETURNS integer
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT 20000 $$;
--> statement-breakpoint
-- Statement trigger on facts: appends the statement's net change per tenant (transition tables
-- old_rows / new_rows, as the trigger declares them), then folds as described above.
CREATE FUNCTION mnemo_keyword_capture() RETURNS trigger
  LANGUAGE plpgsql SET search_path = public, pg_temp
  AS $$
DECLARE
  tenants text[];
  signs integer[];
  vectors tsvector[];
  lengths integer[];
  removes_content boolean := false;
  change record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(tenant_id), array_agg(1), array_agg(search_vector), array_agg(search_length)
      INTO tenants, signs, vectors, lengths
      FROM new_rows WHERE invalidated_at IS NULL;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(tenant_id), array_agg(-1), array_agg(search_vector), array_agg(search_length)
      INTO tenants, signs, vectors, lengths
      FROM old_rows WHERE invalidated_at IS NULL;
  ELSE
    SELECT array_agg(tenant_id), array_agg(sign), array_agg(search_vector), array_agg(search_length)
      INTO tenants, signs, vectors, lengths
      FROM (
        SELECT tenant_id, -1 AS sign, search_vector, search_length FROM old_rows WHERE invalidated_at IS NULL
        UNION ALL
        SELECT tenant_id, 1, search_vector, search_length FROM new_rows WHERE invalidated_at IS NULL
      ) d;
    removes_content := EXISTS (
      SELECT FROM old_rows o JOIN new_rows n ON n.tenant_id = o.tenant_id AND n.id = o.id
      WHERE o.content IS NOT NULL AND n.content IS NULL);
  END IF;

  FOR change IN
    WITH d AS (
      SELECT * FROM unnest(tenants, signs, vectors, lengths) AS d(tenant_id, sign, search_vector, search_length)
    ),
    corpus AS (
      SELECT tenant_id, sum(sign)::bigint AS documents, sum(sign * search_length)::bigint AS tokens FROM d GROUP BY tenant_id
    ),
    terms AS (
      SELECT tenant_id, array_agg(lexeme ORDER BY lexeme) AS lexemes, array_agg(n ORDER BY lexeme) AS counts
      FROM (
        SELECT d.tenant_id, l.lexeme, sum(d.sign)::integer AS n
        FROM d, unnest(tsvector_to_array(d.search_vector)) AS l(lexeme)
        GROUP BY d.tenant_id, l.lexeme
        HAVING sum(d.sign) <> 0
      ) per_lexeme
      GROUP BY tenant_id
    )
    INSERT INTO keyword_stat_changes (tenant_id, documents, tokens, lexemes, counts)
    SELECT tenant_id, c.documents, c.tokens, coalesce(t.lexemes, '{}'), coalesce(t.counts, '{}')
    FROM corpus c LEFT JOIN terms t USING (tenant_id)
    WHERE c.documents <> 0 OR c.tokens <> 0 OR t.lexemes IS NOT NULL
    RETURNING tenant_id, cardinality(lexemes) AS entries
  LOOP
    -- Only in READ COMMITTED, where the fold's delete sees what an earlier fold left; an older
    -- snapshot could meet rows a fold deleted since, and fail the write with a serialization error.
    IF current_setting('transaction_isolation') = 'read committed'
       AND random() < change.entries::float8 / mnemo_keyword_fold_entries() THEN
      PERFORM mnemo_keyword_fold(change.tenant_id, false);
    END IF;
  END LOOP;

  IF removes_content THEN
    FOR change IN SELECT DISTINCT tenant_id FROM new_rows LOOP
      PERFORM mnemo_keyword_fold(change.tenant_id, true);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER keyword_capture_insert AFTER INSERT ON facts
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mnemo_keyword_capture();
--> statement-breakpoint
CREATE TRIGGER keyword_capture_update AFTER UPDATE ON facts
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mnemo_keyword_capture();
--> statement-breakpoint
CREATE TRIGGER keyword_capture_delete AFTER DELETE ON facts
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mnemo_keyword_capture();
--> statement-breakpoint
-- The facts already written, tenant by tenant under each tenant's own row-level-security setting
-- (the registry of tenants is not under RLS; the owner may be subject to FORCE like the app).
DO $$
DECLARE
  t text;
BEGIN
  FOR t IN SELECT id FROM tenants LOOP
    PERFORM set_config('app.tenant_id', t, true);
    INSERT INTO keyword_corpus_stats (tenant_id, documents, tokens)
      SELECT t, count(*), coalesce(sum(search_length), 0) FROM facts WHERE tenant_id = t AND invalidated_at IS NULL;
    INSERT INTO keyword_term_stats (tenant_id, lexeme, documents)
      SELECT t, l.lexeme, count(*) FROM facts, unnest(tsvector_to_array(search_vector)) AS l(lexeme)
      WHERE tenant_id = t AND invalidated_at IS NULL GROUP BY l.lexeme;
  END LOOP;
  PERFORM set_config('app.tenant_id', '', true);
END
$$;
--> statement-breakpoint
-- Under row-level security PostgreSQL uses a query's condition as an index condition only if its
-- function is LEAKPROOF, and `@@` (ts_match_vq) is not marked so: the app role's searches never
-- used the GIN index on (tenant_id, search_vector), and read every fact of the tenant instead.
-- ts_match_vq returns a boolean computed from its two arguments, with no side effect, and the
-- errors it can raise (stack depth, memory) depend on the query, never on a row's vector, so it
-- leaks nothing that RLS hides. Only a superuser may mark a function LEAKPROOF: a migration run
-- by another role leaves it (searches stay correct, at a cost that grows with the tenant) and says
-- so; a superuser can run this statement later (docs/decisions.md, "Keyword at scale").
DO $$
BEGIN
  IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;
  ELSE
    RAISE WARNING 'keyword search: ts_match_vq is not LEAKPROOF, so under row-level security the GIN index is not used; a superuser should run ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF';
  END IF;
END
$$;
