import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { withTenant } from '../../src/db/client.ts';
import { live } from '../../src/memory/conditions.ts';
import { writeFact } from '../../src/memory/facts.ts';
import { keywordSearch } from '../../src/memory/keyword.ts';
import { indexCollection, loadCollection, meanNdcg10 } from '../../bench/ir.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';

const admin = (tenantId: string, sub = 'admin'): Principal => ({ tenantId, sub, role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

describe('keyword search (BM25 in SQL)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(() => t.drop());

  const search = (principal: Principal, query: string, depth = 10) =>
    withTenant(t.app.db, principal.tenantId, (tx) => keywordSearch(tx, principal, query, [live()], depth));

  it('matches any word, ranks rare words higher, honours phrases and -word', async () => {
    const tenant = uniqueTenant('kw');
    const p = admin(tenant);
    const write = (text: string) => writeFact({ db: t.app.db, principal: p }, { type: 'acme.note', content: { text } });
    const parts = await write('end-7 orders spare parts for a washing machine.');
    const tax = await write('The quarterly tax filing is due in April.');
    const both = await write('Machine learning notes: the washing of data.');

    const appliance = await search(p, 'appliance parts');
    expect(appliance.map((r) => r.id)).toEqual([parts.id]);

    const washing = await search(p, 'washing machine');
    expect(washing.map((r) => r.id).sort()).toEqual([parts.id, both.id].sort());
    expect(washing.every((r) => r.score > 0)).toBe(true);

    expect((await search(p, '"spare parts"')).map((r) => r.id)).toEqual([parts.id]);
    expect(await search(p, '"parts spare"')).toEqual([]);
    expect((await search(p, 'washing -learning')).map((r) => r.id)).toEqual([parts.id]);
    expect((await search(p, 'tax or april')).map((r) => r.id)).toEqual([tax.id]);
    expect(await search(p, 'the of and')).toEqual([]);
    expect(await search(p, '-tax')).toEqual([]);
    // The type is searchable too: "note" is in acme.note.
    expect((await search(p, 'note'))).toHaveLength(3);
  });

  it('searches only the facts the principal can see, in its own tenant', async () => {
    const tenantA = uniqueTenant('kw-a');
    const tenantB = uniqueTenant('kw-b');
    const a = admin(tenantA);
    const mine = await writeFact({ db: t.app.db, principal: a }, { type: 'acme.note', content: 'zebra crossing' });
    const secret = await writeFact({ db: t.app.db, principal: a }, { type: 'acme.note', content: 'zebra secret', scope: { userId: 'u-1' } });
    await writeFact({ db: t.app.db, principal: admin(tenantB) }, { type: 'acme.note', content: 'zebra elsewhere' });

    expect((await search(a, 'zebra')).map((r) => r.id).sort()).toEqual([mine.id, secret.id].sort());
    const member: Principal = { ...a, sub: 'u-2', role: 'member' };
    expect((await search(member, 'zebra')).map((r) => r.id)).toEqual([mine.id]);
  });

  it('reaches the BM25 reference on med (nDCG@10 within 0.02 of 0.661)', async () => {
    const tenant = uniqueTenant('med');
    const p = admin(tenant);
    const med = loadCollection('med');
    const docOf = await indexCollection(t.app.db, p, med);
    const ndcg = await meanNdcg10(med, docOf, async (query, depth) => (await search(p, query, depth)).map((r) => r.id));
    console.log(`med keyword nDCG@10 = ${ndcg.toFixed(3)}`);
    expect(ndcg).toBeGreaterThanOrEqual(0.641);
  }, 120_000);
});
