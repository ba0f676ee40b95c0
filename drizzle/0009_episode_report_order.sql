-- The coverage report at a million episodes (issue 12, part 7; src/episodes/report.ts,
-- docs/decisions.md "Coverage report at 1M episodes"): each fact's episode coverage keys stored
-- once per write instead of trimmed with regular expressions per report, and an index in the
-- report's order (path bytewise, then id) so a page of episodes is read in order, without sorting
-- every episode. Adding a stored generated column rewrites facts (docs/operations.md, upgrades).
ALTER TABLE "facts" ADD COLUMN "episode_keys" text[] GENERATED ALWAYS AS (mnemo_episode_keys(coalesce(episode_id, id::text), path)) STORED NOT NULL;--> statement-breakpoint
CREATE INDEX "facts_report_order_idx" ON "facts" USING btree ("tenant_id",(coalesce(path, '') collate "C"),"id");