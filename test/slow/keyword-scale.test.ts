/**
 * Keyword search at a size where its pruning and the GIN index matter (issue 12, part 1): 20,000
 * facts in one tenant (med's abstracts and cranfield's titles recombined, bench/keyword-scale.ts)
 * beside 4,000 in another. Checks, as the app role under row-level security:
 *
 * - the statistics equal a fresh count over the tenant after the bulk load and a few deletes;
 * - the search reads the GIN index on (tenant_id, search_vector) (it did not before migration
 *   0008 made `@@` usable there under RLS);
 * - the answers equal those of the search that scored every match (bench/keyword-scale.ts's
 *   previousKeywordSearch), query by query, at depth 10 and 100.
 *
 * No timing is asserted; bench/keyword-scale.ts measures it.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { withTenant } from '../../src/db/client.ts';
import { live } from '../../src/memory/facts/conditions.ts';
import { deleteFact } from '../../src/memory/facts/revise.ts';
import { keywordSearch } from '../../src/memory/retrieval/keyword.ts';
import { keywordStatistics } from '../../src/memory/retrieval/term-statistics.ts';
import { loadSyntheticFacts, previousKeywordSearch } from '../../bench/keyword-scale.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { fixtureCollection } from '../helpers/fixtures.ts';

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'admin', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

describe('keyword search at 20,000 facts', () => {
  let t: TestDatabase;
  const tenant = uniqueTenant('kw-20k');
  const p = admin(tenant);
  const med = fixtureCollection('med');
  const cranfield = fixtureCollection('cranfield-titles');

  beforeAll(async () => {
    t = await createTestDatabase();
    const docs = [...med.docs, ...cranfield.docs];
    await loadSyntheticFacts(t.app.db, tenant, docs, 0, 20_000);
    await loadSyntheticFacts(t.app.db, uniqueTenant('kw-20k-other'), docs, 0, 4_000, 1);
    const ids = await withTenant(t.app.db, tenant, (tx) => tx.execute(sql`select id from facts order by id limit 25`));
    for (const { id } of ids as unknown as { id: string }[]) await deleteFact({ db: t.app.db, principal: p }, id);
    await t.admin`vacuum analyze facts`;
  }, 300_000);
  afterAll(() => t?.drop());

  it('keeps the statistics equal to a fresh count', async () => {
    const { documents, tokens, terms } = await withTenant(t.app.db, tenant, (tx) => keywordStatistics(tx, tenant));
    const [fresh] = await t.admin<{ documents: number; tokens: number; lexemes: number; postings: number }[]>`
      select count(*)::float8 as documents, sum(search_length)::float8 as tokens,
        (select count(distinct l)::float8 from facts, unnest(tsvector_to_array(search_vector)) l where tenant_id = ${tenant} and invalidated_at is null) as lexemes,
        (select count(*)::float8 from facts, unnest(tsvector_to_array(search_vector)) l where tenant_id = ${tenant} and invalidated_at is null) as postings
      from facts where tenant_id = ${tenant} and invalidated_at is null`;
    expect({ documents, tokens }).toEqual({ documents: fresh!.documents, tokens: fresh!.tokens });
    expect(documents).toBe(20_000 - 25);
    expect(terms.size).toBe(fresh!.lexemes);
    expect([...terms.values()].reduce((sum, n) => sum + n, 0)).toBe(fresh!.postings);
  });

  it('reads the GIN index and answers as scoring every match did', async () => {
    const queries = [...med.queries, ...cranfield.queries.slice(0, 30)].map((q) => q.text);
    for (const query of queries) {
      await withTenant(t.app.db, tenant, async (tx) => {
        const ginScans = async () =>
          Number((await tx.execute(sql`select pg_stat_get_xact_numscans('facts_search_idx'::regclass)::int as n`))[0]!.n);
        for (const depth of [10, 100]) {
          const before = await ginScans();
          const now = await keywordSearch(tx, p, query, [live()], depth);
          expect(await ginScans()).toBeGreaterThan(before);
          const exhaustive = await previousKeywordSearch(tx, p, query, [live()], depth);
          expect(now.map((r) => r.id)).toEqual(exhaustive.map((r) => r.id));
        }
      });
    }
  }, 300_000);
});
