-- Conversation sequences (issue 27; src/memory/facts/sequence.ts,
-- docs/decisions/0105-conversation-expand.md): episodic facts of one thread or session, ordered by
-- coalesce(observed_at, created_at) then id. This partial index serves "the turns before and after
-- this one" (retrieve's and context's `expand`, one lateral lookup per hit) and indexing that reads
-- a turn's neighbours. Tenant first, so on Citus it lives on each shard beside the tenant's rows.
-- Thread and session are coalesced to '' because a sequence matches NULL to NULL, which `=`
-- cannot, and `is not distinct from` is no index condition. Building it reads the episodic facts
-- once (no table rewrite); writes of facts wait meanwhile, reads do not
-- (docs/operations/workers-and-migrations.md).
CREATE INDEX "facts_sequence_idx" ON "facts" USING btree ("tenant_id",coalesce(thread_id, ''),coalesce(session_id, ''),coalesce(observed_at, created_at),"id") WHERE "facts"."memory_kind" = 'episodic';