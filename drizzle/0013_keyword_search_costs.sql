-- What a keyword search costs (issue 30; npm run bench's breakdown, docs/decisions/0110-server-timing-and-the-fixed-cost.md).
--
-- 1. The GIN index of the searchable text without a pending list. With fastupdate (PostgreSQL's
-- default) new entries wait in an unsorted list of up to gin_pending_list_limit (4 MB) that every
-- search must read whole, whatever the tenant, and that only VACUUM, autovacuum's ANALYZE or an
-- insert past the limit empties. The planner counts that cost: with 162 pending pages it read a
-- 10,000-fact tenant by sequential scan (12.6 ms for one two-word query, 1.6 ms once the list was
-- emptied), and a 10,000-fact tenant's searches took 57 ms on average against 40 ms without the
-- list. Writes measured no slower without it (raw single writes, 1-32 clients, same run).
ALTER INDEX facts_search_idx SET (fastupdate = off);
--> statement-breakpoint
-- Entries already pending go into the index now, not at the next vacuum.
SELECT gin_clean_pending_list('facts_search_idx'::regclass);
--> statement-breakpoint
-- 2. Keyword statistics folded sooner (drizzle/0008_keyword_statistics.sql): a writer folds its
-- tenant's pending changes with probability (its entries) / mnemo_keyword_fold_entries(), and
-- every keyword search reads all the pending entries of its tenant. At 20,000 a write-busy tenant
-- carried 20,000 entries on average (59,000 seen in a bench run) and each search spent 5-12 ms on
-- them (keyword-statistics 11.8 ms at 23,000 entries, 2.5 ms at none). At 2,000 a search reads
-- about a tenth of that; a writer folds ten times as often a fold a tenth the size, about the same
-- work in all.
CREATE OR REPLACE FUNCTION mnemo_keyword_fold_entries() RETURNS integer
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT 2000 $$;
