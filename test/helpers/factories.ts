import { randomUUID } from 'node:crypto';
import type { Db } from '../../src/db/client.ts';
import { withTenant } from '../../src/db/client.ts';
import { factRevisions, facts } from '../../src/db/schema.ts';
import { registerTenant } from '../../src/db/tenants.ts';

/** A unique tenant id per call, so tests never share rows by accident. */
export const uniqueTenant = (label = 'tenant') => `${label}-${randomUUID().slice(0, 8)}`;

type FactRow = typeof facts.$inferInsert;

/**
 * Writes version 1 of a fact (current row and its revision) for `tenantId`, through the app
 * role and RLS, as the facts API will. Overrides win over the defaults.
 */
export async function insertFact(db: Db, tenantId: string, overrides: Partial<FactRow> = {}) {
  const now = new Date();
  const row: FactRow = {
    tenantId,
    id: randomUUID(),
    version: 1,
    type: 'test.note',
    content: { text: `note ${randomUUID()}` },
    trust: 'asserted',
    assertedByKind: 'service',
    assertedById: 'test-app',
    createdAt: now,
    recordedAt: now,
    ...overrides,
  };
  return withTenant(db, tenantId, async (tx) => {
    await registerTenant(tx, tenantId);
    const [current] = await tx.insert(facts).values(row).returning();
    const { id, ...revision } = row;
    await tx.insert(factRevisions).values({ ...revision, factId: id });
    return current!;
  });
}
