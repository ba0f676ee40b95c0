-- Review before retrieval (issue 17): text an agent remembered through MCP that reads like an
-- instruction is stored with review = 'pending' and no retrieval mode returns it until a person
-- verifies the fact, which clears it. Nullable without a default: no table rewrite. The partial
-- index serves the review queue (GET /v1/memory/facts?review=pending) without scanning a tenant.
ALTER TABLE "fact_revisions" ADD COLUMN "review" text;--> statement-breakpoint
ALTER TABLE "facts" ADD COLUMN "review" text;--> statement-breakpoint
CREATE INDEX "facts_review_idx" ON "facts" USING btree ("tenant_id","id") WHERE "facts"."review" is not null;--> statement-breakpoint
ALTER TABLE "fact_revisions" ADD CONSTRAINT "fact_revisions_review_known" CHECK ("fact_revisions"."review" in ('pending'));--> statement-breakpoint
ALTER TABLE "facts" ADD CONSTRAINT "facts_review_known" CHECK ("facts"."review" in ('pending'));