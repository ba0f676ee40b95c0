import { pgTable, text } from 'drizzle-orm/pg-core';
import { timestamptz } from '../columns.ts';

/**
 * Every tenant that has written anything. A tenant exists once a token names it (DESIGN §3);
 * this registry exists so that cross-tenant housekeeping (reconcile, retention) can visit each
 * tenant under its own row-level-security setting instead of needing a role that bypasses RLS.
 * It holds ids only, never tenant data, so it is not itself under RLS.
 */
export const tenants = pgTable('tenants', {
  id: text('id').primaryKey(),
  firstSeenAt: timestamptz('first_seen_at').notNull().defaultNow(),
});
