import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { withTenant } from '../../src/db/client.ts';
import { live } from '../../src/memory/conditions.ts';
import { writeFact } from '../../src/memory/facts.ts';
import { keywordSearch } from '../../src/memory/keyword.ts';
import { parseSearchQuery, SEARCH_EXCLUDES_MAX, SEARCH_LEXEMES_MAX, SEARCH_PHRASES_MAX, SEARCH_WORDS_MAX } from '../../src/memory/search-query.ts';
import { indexCollection, meanNdcg10 } from '../../bench/ir.ts';
import { fixtureCollection } from '../helpers/fixtures.ts';
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

  it('bounds the work of a long query: the first 32 distinct words that are not stop words are searched', async () => {
    const tenant = uniqueTenant('kw-long');
    const p = admin(tenant);
    const write = (text: string) => writeFact({ db: t.app.db, principal: p }, { type: 'acme.note', content: { text } });
    const early = await write('The gearbox of the tractor needs a new clutch.');
    const late = await write('A zyzzyva is a weevil of the tropics.');
    for (let i = 0; i < 20; i++) await write(`Filler note ${i} about the weather in spring.`);
    // 300 distinct words, stop words among them; "gearbox" comes first, "zyzzyva" after 40 other searchable words.
    const filler = Array.from({ length: 300 }, (_, i) => `word${i.toString(36)}x`);
    const query = ['the', 'gearbox', 'of', ...filler.slice(0, 40), 'zyzzyva', ...filler.slice(40)].join(' ');
    expect(query.length).toBeLessThan(4000);

    const { indexScans, results } = await withTenant(t.app.db, tenant, async (tx) => {
      const scans = async () => Number((await tx.execute(sql`select coalesce(sum(idx_scan), 0)::int as n from pg_stat_xact_user_tables where relname = 'facts'`))[0]!.n);
      const before = await scans();
      const found = await keywordSearch(tx, p, query, [live()], 10);
      const long = (await scans()) - before;
      await keywordSearch(tx, p, 'gearbox clutch', [live()], 10);
      return { indexScans: { long, short: (await scans()) - before - long }, results: found };
    });
    console.log(`index scans: ${indexScans.long} for a ${query.split(' ').length}-word query, ${indexScans.short} for a 2-word one`);
    expect(results.map((r) => r.id)).toEqual([early.id]);
    expect(results.map((r) => r.id)).not.toContain(late.id);
    // One count per searched lexeme, plus the corpus and the candidates: bounded by the cap, not by the query.
    expect(indexScans.long).toBeLessThanOrEqual(SEARCH_LEXEMES_MAX + indexScans.short);
    // Within the limit nothing changes: the same word found among a few.
    expect((await search(p, 'weevil tropics gearbox')).map((r) => r.id).sort()).toEqual([early.id, late.id].sort());
  });

  it('reaches the BM25 reference on med (nDCG@10 within 0.02 of 0.661)', async () => {
    const tenant = uniqueTenant('med');
    const p = admin(tenant);
    const med = fixtureCollection('med');
    const docOf = await indexCollection(t.app.db, p, med);
    const ndcg = await meanNdcg10(med, docOf, async (query, depth) => (await search(p, query, depth)).map((r) => r.id));
    console.log(`med keyword nDCG@10 = ${ndcg.toFixed(3)}`);
    expect(ndcg).toBeGreaterThanOrEqual(0.641);
  }, 120_000);
});

describe('parseSearchQuery', () => {
  it('keeps distinct terms in query order, within limits, and every included word for the term frequencies', () => {
    const parsed = parseSearchQuery('Washing machine WASHING "spare parts" -dryer -dryer "Spare Parts" or machine');
    expect(parsed.include).toEqual([
      { text: 'Washing', phrase: false },
      { text: 'machine', phrase: false },
      { text: 'spare parts', phrase: true },
    ]);
    expect(parsed.exclude).toEqual([{ text: 'dryer', phrase: false }]);
    expect(parsed.includedText).toBe('Washing machine WASHING spare parts Spare Parts machine');

    const many = parseSearchQuery(
      [
        ...Array.from({ length: SEARCH_WORDS_MAX + 50 }, (_, i) => `w${i}`),
        ...Array.from({ length: SEARCH_PHRASES_MAX + 3 }, (_, i) => `"p${i} a b c d e f g h i j"`),
        ...Array.from({ length: SEARCH_EXCLUDES_MAX + 5 }, (_, i) => `-x${i}`),
      ].join(' '),
    );
    expect(many.include.filter((t) => !t.phrase)).toHaveLength(SEARCH_WORDS_MAX);
    const phrases = many.include.filter((t) => t.phrase);
    expect(phrases).toHaveLength(SEARCH_PHRASES_MAX);
    expect(phrases[0]!.text).toBe('p0 a b c d e f g');
    expect(many.exclude).toHaveLength(SEARCH_EXCLUDES_MAX);
  });
});
