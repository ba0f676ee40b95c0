-- Episodic memory (DESIGN §6): the coverage keys as a generated column of facts,
-- report progress, and nightly report schedules. Functions written by hand before drizzle-kit's output.
-- The coverage keys of src/episodes/coverage.ts (entryKeys, episodeKeys, normalizePath), restated
-- in SQL for the report's anti-join; test/integration/coverage-keys.test.ts holds the two to the
-- same answers. Whitespace trimmed (exactly the characters JavaScript's trim() removes, whatever the
-- database's locale), types lowercased in ASCII only, backslashes as slashes, paths without leading
-- or trailing '/'.
CREATE FUNCTION mnemo_trim_space(p text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
  AS $$ SELECT regexp_replace(p, '^[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+|[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+$', '', 'g') $$;
--> statement-breakpoint
CREATE FUNCTION mnemo_coverage_path(p text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
  AS $$ SELECT btrim(replace(mnemo_trim_space(p), '\', '/'), '/') $$;
--> statement-breakpoint
-- What a fact's mergedFrom covers: `id:<id>` for an entry whose type (any case) is a covering type,
-- `path:<path>` for an entry with any non-empty type and a path. Other entries cover nothing.
CREATE FUNCTION mnemo_merge_keys(p jsonb) RETURNS text[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
  AS $$
    SELECT coalesce(array_agg(DISTINCT key ORDER BY key), '{}') FROM (
      SELECT CASE WHEN translate(type, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') IN ('episode', 'run', 'session', 'trace', 'event', 'ingest') AND id <> '' THEN 'id:' || id END AS id_key,
             CASE WHEN path <> '' THEN 'path:' || path END AS path_key
      FROM (
        SELECT mnemo_trim_space(e->>'type') AS type,
               CASE WHEN jsonb_typeof(e->'id') = 'string' THEN mnemo_trim_space(e->>'id') END AS id,
               CASE WHEN jsonb_typeof(e->'path') = 'string' THEN mnemo_coverage_path(e->>'path') END AS path
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p) = 'array' THEN p ELSE '[]'::jsonb END) AS e
        WHERE jsonb_typeof(e) = 'object' AND jsonb_typeof(e->'type') = 'string'
      ) entries
      WHERE type <> ''
    ) keyed, LATERAL (VALUES (id_key), (path_key)) AS k(key)
    WHERE key IS NOT NULL
  $$;
--> statement-breakpoint
-- The keys that would cover an episode: its identity and its path.
CREATE FUNCTION mnemo_episode_keys(p_id text, p_path text) RETURNS text[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$
    SELECT array_remove(ARRAY[
      CASE WHEN mnemo_trim_space(p_id) <> '' THEN 'id:' || mnemo_trim_space(p_id) END,
      CASE WHEN mnemo_coverage_path(p_path) <> '' THEN 'path:' || mnemo_coverage_path(p_path) END
    ], NULL)
  $$;
--> statement-breakpoint
CREATE TABLE "coverage_report_schedules" (
	"tenant_id" text PRIMARY KEY NOT NULL,
	"cron" text NOT NULL,
	"params" jsonb NOT NULL,
	"principal" jsonb NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "facts" ADD COLUMN "merge_keys" text[] GENERATED ALWAYS AS (mnemo_merge_keys(merged_from)) STORED NOT NULL;--> statement-breakpoint
ALTER TABLE "coverage_reports" ADD COLUMN "progress_done" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "coverage_reports" ADD COLUMN "progress_total" integer;--> statement-breakpoint
ALTER TABLE "coverage_reports" ADD COLUMN "unmerged_count" integer;--> statement-breakpoint
ALTER TABLE "coverage_reports" ADD COLUMN "scheduled" boolean DEFAULT false NOT NULL;--> statement-breakpoint
-- Under the same tenant isolation as every tenant table (0002).
ALTER TABLE "coverage_report_schedules" ENABLE ROW LEVEL SECURITY;
--> statement-breakpoint
ALTER TABLE "coverage_report_schedules" FORCE ROW LEVEL SECURITY;
--> statement-breakpoint
CREATE POLICY tenant_isolation ON "coverage_report_schedules" USING (tenant_id = mnemo_current_tenant()) WITH CHECK (tenant_id = mnemo_current_tenant());
