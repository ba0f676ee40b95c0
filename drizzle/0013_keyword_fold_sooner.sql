-- Keyword statistics folded sooner (issue 30; drizzle/0008_keyword_statistics.sql): a writer folds
-- its tenant's pending changes with probability (its entries) / mnemo_keyword_fold_entries(), and
-- every keyword search reads all the pending entries of its tenant. At 20,000 a write-busy tenant
-- carried 20,000 entries on average (59,000 seen in a bench run) and each search spent 5-12 ms on
-- them (npm run bench's breakdown: keyword-statistics 11.8 ms at 23,000 entries, 2.5 ms at none).
-- At 2,000 a search reads about a tenth of that; a writer folds ten times as often a fold a tenth
-- the size, about the same work in all.
CREATE OR REPLACE FUNCTION mnemo_keyword_fold_entries() RETURNS integer
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT 2000 $$;
