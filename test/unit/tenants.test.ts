import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { forEachTenant } from '../../src/db/tenants.ts';

const dialect = new PgDialect();

/** A `tenants` table of `ids` behind `execute`, answering the listing's keyset query; logs each read. */
function tenantsTable(ids: string[], log: string[]) {
  const sorted = [...ids].sort();
  return {
    execute: async (query: SQL) => {
      const { sql, params } = dialect.sqlToQuery(query);
      expect(sql).toMatch(/from tenants where id > \$1 order by id limit \$2/);
      const [after, limit] = params as [string, number];
      log.push(`read after '${after}'`);
      return sorted.filter((id) => id > after).slice(0, limit).map((id) => ({ id }));
    },
  } as unknown as Parameters<typeof forEachTenant>[0];
}

const manyIds = Array.from({ length: 1203 }, (_, i) => `tenant-${String(i).padStart(5, '0')}`);

describe('forEachTenant', () => {
  it('visits every tenant once, in id order, across pages', async () => {
    const visited: string[] = [];
    await forEachTenant(tenantsTable([...manyIds].reverse(), []), async (tenantId) => {
      visited.push(tenantId);
    });
    expect(visited).toEqual(manyIds);
  });

  it('reads every page before the first tenant is worked on', async () => {
    const log: string[] = [];
    await forEachTenant(tenantsTable(manyIds, log), async (tenantId) => {
      log.push(`work ${tenantId}`);
    });
    const firstWork = log.findIndex((entry) => entry.startsWith('work '));
    expect(log.slice(0, firstWork)).toEqual([
      "read after ''",
      `read after '${manyIds[499]}'`,
      `read after '${manyIds[999]}'`,
    ]);
    expect(log.slice(firstWork).every((entry) => entry.startsWith('work '))).toBe(true);
  });

  it('stops at the first tenant whose work fails, and throws its error', async () => {
    const visited: string[] = [];
    const failure = new Error('tenant b failed');
    const visit = forEachTenant(tenantsTable(['a', 'b', 'c'], []), async (tenantId) => {
      visited.push(tenantId);
      if (tenantId === 'b') throw failure;
    });
    await expect(visit).rejects.toBe(failure);
    expect(visited).toEqual(['a', 'b']);
  });

  it('visits nobody when there are no tenants', async () => {
    const log: string[] = [];
    await forEachTenant(tenantsTable([], log), async (tenantId) => {
      log.push(`work ${tenantId}`);
    });
    expect(log).toEqual(["read after ''"]);
  });
});
