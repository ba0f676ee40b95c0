import { index, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { tenantId, timestamptz } from '../columns.ts';

/**
 * `Idempotency-Key` records (DESIGN §7): per tenant and key, the hash of the first request and,
 * once it finished, its response; kept 24 hours.
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    tenantId: tenantId(),
    key: text('key').notNull(),
    requestHash: text('request_hash').notNull(),
    /** NULL while the first request is still running. */
    responseStatus: integer('response_status'),
    /** The response body exactly as first sent, so a replay is byte for byte the same. */
    responseBody: text('response_body'),
    createdAt: timestamptz('created_at').notNull().defaultNow(),
    expiresAt: timestamptz('expires_at').notNull(),
  },
  (t) => [
    primaryKey({ name: 'idempotency_keys_pkey', columns: [t.tenantId, t.key] }),
    index('idempotency_keys_expiry_idx').on(t.tenantId, t.expiresAt),
  ],
);
