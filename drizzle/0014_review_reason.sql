-- Why a revision is held for review (issue 31): the instruction-like check's signals, its learned
-- model's score and the threshold it was held at, for the person reviewing it. Null when nothing
-- is held, and on every revision written before this (their holds name no reason).
ALTER TABLE "fact_revisions" ADD COLUMN "review_reason" jsonb;
--> statement-breakpoint
ALTER TABLE "facts" ADD COLUMN "review_reason" jsonb;
