CREATE TABLE "fact_revisions" (
	"tenant_id" text NOT NULL,
	"fact_id" uuid NOT NULL,
	"version" integer NOT NULL,
	"type" text NOT NULL,
	"org_id" text,
	"project_id" text,
	"user_id" text,
	"participant_id" text,
	"thread_id" text,
	"session_id" text,
	"content" jsonb,
	"trust" text NOT NULL,
	"asserted_by_kind" text NOT NULL,
	"asserted_by_id" text NOT NULL,
	"verified_by_id" text,
	"verified_at" timestamp with time zone,
	"keep_days" integer,
	"keep_until" timestamp with time zone,
	"legal_hold" boolean DEFAULT false NOT NULL,
	"expires_at" timestamp with time zone,
	"subjects" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"valid_from" timestamp with time zone,
	"valid_until" timestamp with time zone,
	"observed_at" timestamp with time zone,
	"memory_kind" text,
	"episode_id" text,
	"path" text,
	"derived_from" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"merged_from" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL,
	"invalidated_at" timestamp with time zone,
	"invalidation_reason" text,
	CONSTRAINT "fact_revisions_pkey" PRIMARY KEY("tenant_id","fact_id","version"),
	CONSTRAINT "fact_revisions_version_positive" CHECK ("fact_revisions"."version" >= 1),
	CONSTRAINT "fact_revisions_trust_known" CHECK ("fact_revisions"."trust" in ('asserted', 'unverified', 'verified')),
	CONSTRAINT "fact_revisions_asserted_by_kind_known" CHECK ("fact_revisions"."asserted_by_kind" in ('service', 'user')),
	CONSTRAINT "fact_revisions_memory_kind_known" CHECK ("fact_revisions"."memory_kind" in ('episodic', 'semantic', 'consolidation', 'working')),
	CONSTRAINT "fact_revisions_invalidation_reason_known" CHECK ("fact_revisions"."invalidation_reason" in ('deleted', 'expired', 'erased')),
	CONSTRAINT "fact_revisions_keep_days_positive" CHECK ("fact_revisions"."keep_days" >= 1),
	CONSTRAINT "fact_revisions_validity_ordered" CHECK ("fact_revisions"."valid_from" <= "fact_revisions"."valid_until"),
	CONSTRAINT "fact_revisions_subjects_array" CHECK (jsonb_typeof("fact_revisions"."subjects") = 'array'),
	CONSTRAINT "fact_revisions_derived_from_array" CHECK (jsonb_typeof("fact_revisions"."derived_from") = 'array'),
	CONSTRAINT "fact_revisions_merged_from_array" CHECK (jsonb_typeof("fact_revisions"."merged_from") = 'array')
);
--> statement-breakpoint
CREATE TABLE "facts" (
	"tenant_id" text NOT NULL,
	"id" uuid NOT NULL,
	"version" integer NOT NULL,
	"type" text NOT NULL,
	"org_id" text,
	"project_id" text,
	"user_id" text,
	"participant_id" text,
	"thread_id" text,
	"session_id" text,
	"content" jsonb,
	"trust" text NOT NULL,
	"asserted_by_kind" text NOT NULL,
	"asserted_by_id" text NOT NULL,
	"verified_by_id" text,
	"verified_at" timestamp with time zone,
	"keep_days" integer,
	"keep_until" timestamp with time zone,
	"legal_hold" boolean DEFAULT false NOT NULL,
	"expires_at" timestamp with time zone,
	"subjects" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"valid_from" timestamp with time zone,
	"valid_until" timestamp with time zone,
	"observed_at" timestamp with time zone,
	"memory_kind" text,
	"episode_id" text,
	"path" text,
	"derived_from" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"merged_from" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL,
	"invalidated_at" timestamp with time zone,
	"invalidation_reason" text,
	"search_vector" "tsvector" GENERATED ALWAYS AS (to_tsvector('english'::regconfig, translate(type, '._-', '   ')) || jsonb_to_tsvector('english'::regconfig, coalesce(content, '{}'::jsonb), '["string"]'::jsonb)) STORED NOT NULL,
	CONSTRAINT "facts_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "facts_version_positive" CHECK ("facts"."version" >= 1),
	CONSTRAINT "facts_trust_known" CHECK ("facts"."trust" in ('asserted', 'unverified', 'verified')),
	CONSTRAINT "facts_asserted_by_kind_known" CHECK ("facts"."asserted_by_kind" in ('service', 'user')),
	CONSTRAINT "facts_memory_kind_known" CHECK ("facts"."memory_kind" in ('episodic', 'semantic', 'consolidation', 'working')),
	CONSTRAINT "facts_invalidation_reason_known" CHECK ("facts"."invalidation_reason" in ('deleted', 'expired', 'erased')),
	CONSTRAINT "facts_keep_days_positive" CHECK ("facts"."keep_days" >= 1),
	CONSTRAINT "facts_validity_ordered" CHECK ("facts"."valid_from" <= "facts"."valid_until"),
	CONSTRAINT "facts_subjects_array" CHECK (jsonb_typeof("facts"."subjects") = 'array'),
	CONSTRAINT "facts_derived_from_array" CHECK (jsonb_typeof("facts"."derived_from") = 'array'),
	CONSTRAINT "facts_merged_from_array" CHECK (jsonb_typeof("facts"."merged_from") = 'array')
);
--> statement-breakpoint
CREATE TABLE "embedding_models" (
	"model" text PRIMARY KEY NOT NULL,
	"dims" integer NOT NULL,
	"state" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"activated_at" timestamp with time zone,
	"retired_at" timestamp with time zone,
	CONSTRAINT "embedding_models_dims_range" CHECK ("embedding_models"."dims" between 1 and 16000),
	CONSTRAINT "embedding_models_state_known" CHECK ("embedding_models"."state" in ('backfilling', 'active', 'retired'))
);
--> statement-breakpoint
CREATE TABLE "fact_embeddings" (
	"tenant_id" text NOT NULL,
	"fact_id" uuid NOT NULL,
	"model" text NOT NULL,
	"version" integer NOT NULL,
	"dims" integer NOT NULL,
	"embedding" vector NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "fact_embeddings_pkey" PRIMARY KEY("tenant_id","fact_id","model"),
	CONSTRAINT "fact_embeddings_dims_match" CHECK (vector_dims("fact_embeddings"."embedding") = "fact_embeddings"."dims")
);
--> statement-breakpoint
CREATE TABLE "tenants" (
	"id" text PRIMARY KEY NOT NULL,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "outbox" (
	"tenant_id" text NOT NULL,
	"id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"queue" text NOT NULL,
	"payload" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"done_at" timestamp with time zone,
	"failed_at" timestamp with time zone,
	CONSTRAINT "outbox_pkey" PRIMARY KEY("tenant_id","id")
);
--> statement-breakpoint
CREATE TABLE "idempotency_keys" (
	"tenant_id" text NOT NULL,
	"key" text NOT NULL,
	"request_hash" text NOT NULL,
	"response_status" integer,
	"response_body" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY("tenant_id","key")
);
--> statement-breakpoint
CREATE TABLE "erasures" (
	"tenant_id" text NOT NULL,
	"id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"target_kind" text NOT NULL,
	"fact_id" uuid,
	"subject_kind" text,
	"target_hash" text,
	"status" text DEFAULT 'pending' NOT NULL,
	"requested_by" text NOT NULL,
	"facts_erased" integer DEFAULT 0 NOT NULL,
	"revisions_erased" integer DEFAULT 0 NOT NULL,
	"embeddings_deleted" integer DEFAULT 0 NOT NULL,
	"error_code" text,
	"blocking_fact_ids" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	CONSTRAINT "erasures_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "erasures_status_known" CHECK ("erasures"."status" in ('pending', 'running', 'completed', 'failed')),
	CONSTRAINT "erasures_target_known" CHECK ("erasures"."target_kind" in ('fact', 'subject', 'conversation')),
	CONSTRAINT "erasures_target_present" CHECK (("erasures"."target_kind" = 'fact' and "erasures"."fact_id" is not null) or ("erasures"."target_kind" <> 'fact' and "erasures"."target_hash" is not null))
);
--> statement-breakpoint
CREATE TABLE "coverage_reports" (
	"tenant_id" text NOT NULL,
	"id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"params" jsonb NOT NULL,
	"principal" jsonb NOT NULL,
	"result" jsonb,
	"error_code" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	CONSTRAINT "coverage_reports_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "coverage_reports_status_known" CHECK ("coverage_reports"."status" in ('pending', 'running', 'completed', 'failed'))
);
--> statement-breakpoint
CREATE INDEX "facts_search_idx" ON "facts" USING gin ("tenant_id","search_vector");--> statement-breakpoint
CREATE INDEX "facts_subjects_idx" ON "facts" USING gin ("tenant_id","subjects" jsonb_path_ops);--> statement-breakpoint
CREATE INDEX "facts_created_idx" ON "facts" USING btree ("tenant_id","created_at","id");--> statement-breakpoint
CREATE INDEX "facts_type_idx" ON "facts" USING btree ("tenant_id","type","created_at");--> statement-breakpoint
CREATE INDEX "facts_expiry_idx" ON "facts" USING btree ("tenant_id","expires_at") WHERE "facts"."expires_at" is not null and "facts"."invalidated_at" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "embedding_models_one_active" ON "embedding_models" USING btree ((true)) WHERE "embedding_models"."state" = 'active';--> statement-breakpoint
CREATE INDEX "outbox_pending_idx" ON "outbox" USING btree ("tenant_id","created_at") WHERE "outbox"."done_at" is null and "outbox"."failed_at" is null;--> statement-breakpoint
CREATE INDEX "idempotency_keys_expiry_idx" ON "idempotency_keys" USING btree ("tenant_id","expires_at");--> statement-breakpoint
CREATE INDEX "erasures_open_idx" ON "erasures" USING btree ("tenant_id","target_hash") WHERE "erasures"."status" in ('pending', 'running');--> statement-breakpoint
CREATE INDEX "coverage_reports_created_idx" ON "coverage_reports" USING btree ("tenant_id","created_at");