-- In-process jobs (issue 13, part 2; src/jobs/in-process.ts, docs/decisions.md "In-process jobs"):
-- without Redis, the API process runs outbox rows itself. A process claims a row for a while
-- (claimed_until, claimed_by) in a short transaction with FOR UPDATE SKIP LOCKED, so processes
-- sharing one database never run the same row at once, and a crashed process's row is taken again
-- once its lease lapses; a failed attempt's retry waits in Postgres (next_attempt_at), so backoff
-- survives a restart. BullMQ's path leaves the three columns null. Nullable columns without a
-- default: no table rewrite. The table's grants and row-level security cover them as they are.
ALTER TABLE "outbox" ADD COLUMN "claimed_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "outbox" ADD COLUMN "claimed_by" uuid;--> statement-breakpoint
ALTER TABLE "outbox" ADD COLUMN "next_attempt_at" timestamp with time zone;
