import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { withTenant } from '../../src/db/client.ts';
import { live } from '../../src/memory/facts/conditions.ts';
import { writeFact } from '../../src/memory/facts/insert.ts';
import { deleteFact, supersedeFact, verifyFact } from '../../src/memory/facts/revise.ts';
import { BM25, keywordSearch } from '../../src/memory/retrieval/keyword.ts';
import { type ErasureTarget, requestErasure, runErasure } from '../../src/lifecycle/erasure.ts';
import { sweepTenant } from '../../src/lifecycle/retention.ts';
import { foldKeywordStatistics, type KeywordStatistics, keywordStatistics } from '../../src/memory/retrieval/term-statistics.ts';
import { previousKeywordSearch } from '../../bench/keyword-scale.ts';
import { TEST_ERASURE_KEY } from '../helpers/api.ts';
import { parseSearchQuery, SEARCH_EXCLUDES_MAX, SEARCH_LEXEMES_MAX, SEARCH_PHRASES_MAX, SEARCH_WORDS_MAX } from '../../src/memory/retrieval/search-query.ts';
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

  it('reaches the BM25 reference on med (nDCG@10 within 0.02 of 0.661); ranks as scoring every match did, also when pruning', async () => {
    const tenant = uniqueTenant('med');
    const p = admin(tenant);
    const med = fixtureCollection('med');
    const docOf = await indexCollection(t.app.db, p, med);
    const ndcg = await meanNdcg10(med, docOf, async (query, depth) => (await search(p, query, depth)).map((r) => r.id));
    console.log(`med keyword nDCG@10 = ${ndcg.toFixed(3)}`);
    expect(ndcg).toBeGreaterThanOrEqual(0.641);

    // The search before issue 12 counted every statistic per query and scored every match. With
    // a first round of 20 documents and no cap, most queries need several rounds of pruning, and
    // each answer must still be exactly the exhaustive one.
    const pruning = { ...BM25, candidates: { first: 20, growth: 2, max: Number.POSITIVE_INFINITY } };
    for (const { text } of med.queries.slice(0, 15)) {
      await withTenant(t.app.db, tenant, async (tx) => {
        const before = await previousKeywordSearch(tx, p, text, [live()], 10);
        const now = await keywordSearch(tx, p, text, [live()], 10);
        const pruned = await keywordSearch(tx, p, text, [live()], 10, pruning);
        for (const found of [now, pruned]) {
          expect(found.map((r) => r.id)).toEqual(before.map((r) => r.id));
          found.forEach((r, i) => expect(r.score).toBeCloseTo(before[i]!.score, 9));
        }
      });
    }
  }, 120_000);

  /** What a fresh count over the tenant's live facts gives (as the app role: its own tenant only). */
  const freshCount = (tenantId: string) =>
    withTenant(t.app.db, tenantId, async (tx): Promise<KeywordStatistics> => {
      const [corpus] = (await tx.execute(sql`
        select count(*)::float8 as documents, coalesce(sum(search_length), 0)::float8 as tokens from facts
        where tenant_id = ${tenantId} and invalidated_at is null`)) as unknown as {
        documents: number;
        tokens: number;
      }[];
      const rows = (await tx.execute(sql`
        select lexeme, count(*)::float8 as documents from facts, unnest(tsvector_to_array(search_vector)) as lexeme
        where tenant_id = ${tenantId} and invalidated_at is null group by lexeme`)) as unknown as { lexeme: string; documents: number }[];
      return { ...corpus!, terms: new Map(rows.map((r) => [r.lexeme, r.documents])) };
    });
  const statistics = (tenantId: string) => withTenant(t.app.db, tenantId, (tx) => keywordStatistics(tx, tenantId));
  const fold = (tenantId: string) => withTenant(t.app.db, tenantId, (tx) => foldKeywordStatistics(tx, tenantId));
  const pendingChanges = async (tenantId: string) =>
    Number((await t.admin`select count(*)::int as n from keyword_stat_changes where tenant_id = ${tenantId}`)[0]!.n);

  it('keeps statistics equal to a fresh count through writes, supersedes, deletes, expiry, erasure and purge, each tenant its own', async () => {
    const tenantA = uniqueTenant('kw-stats-a');
    const tenantB = uniqueTenant('kw-stats-b');
    const a = { db: t.app.db, principal: admin(tenantA) };
    const b = { db: t.app.db, principal: admin(tenantB) };
    const write = (ctx: typeof a, text: string, extra: object = {}) => writeFact(ctx, { type: 'acme.note', content: { text }, ...extra });

    const notes = [];
    for (let i = 0; i < 12; i++) notes.push(await write(a, `Gearbox note ${i}: the tractor needs oil${i % 3 === 0 ? ' and a clutch' : ''}.`));
    const private1 = await write(a, 'The quokka sanctuary visit with end-9', { scope: { projectId: 'p1', participantId: 'end-9' } });
    const expiring = await write(a, 'A temporary ocelot reminder');
    await write(b, 'Tenant B alone mentions the narwhal and the gearbox');
    expect(await statistics(tenantA)).toEqual(await freshCount(tenantA));

    await supersedeFact(a, notes[0]!.id, { content: { text: 'Rewritten: the harvester needs a new belt.' } });
    await supersedeFact(a, notes[1]!.id, { retention: { keepDays: 30 } });
    await verifyFact(a, notes[2]!.id, {});
    await deleteFact(a, notes[3]!.id);
    await deleteFact(a, notes[4]!.id);
    expect(await statistics(tenantA)).toEqual(await freshCount(tenantA));
    expect((await statistics(tenantA)).terms.get('harvest')).toBe(1);

    // Expiry: the sweep invalidates the fact; with no grace it also purges the deleted ones' content.
    await t.admin`update facts set expires_at = now() - interval '1 minute' where tenant_id = ${tenantA} and id = ${expiring.id}`;
    expect(await sweepTenant(t.app.db, tenantA, { purgeGraceMs: 0 })).toEqual({ expired: 1, purged: 3, idempotencyRecords: 0 });
    expect(await statistics(tenantA)).toEqual(await freshCount(tenantA));
    expect((await statistics(tenantA)).terms.has('ocelot')).toBe(false);

    // Erasure removes content, and with it every trace of its lexemes: none pending, none folded.
    const target: ErasureTarget = { kind: 'participant', id: 'end-9' };
    const { erasure } = await requestErasure(a, target, TEST_ERASURE_KEY);
    expect(await runErasure(t.app.db, tenantA, erasure.id, target)).toBe('completed');
    expect(await statistics(tenantA)).toEqual(await freshCount(tenantA));
    const traces = await t.admin`
      select (select count(*)::int from keyword_term_stats where lexeme in ('quokka', 'sanctuari', 'ocelot')) as folded,
             (select count(*)::int from keyword_stat_changes where lexemes && array['quokka', 'sanctuari', 'ocelot']) as pending`;
    expect(traces[0]).toEqual({ folded: 0, pending: 0 });
    expect(private1.id).toBeTruthy();

    // A fold changes nothing but where the counts are kept.
    await fold(tenantA);
    expect(await pendingChanges(tenantA)).toBe(0);
    expect(await statistics(tenantA)).toEqual(await freshCount(tenantA));
    await write(a, 'After the fold: one more gearbox');
    expect(await statistics(tenantA)).toEqual(await freshCount(tenantA));

    // Tenant B sees only its own: the narwhal is not in A's statistics, A's notes not in B's.
    expect(await statistics(tenantB)).toEqual(await freshCount(tenantB));
    expect((await statistics(tenantB)).terms.get('gearbox')).toBe(1);
    expect((await statistics(tenantA)).terms.has('narwhal')).toBe(false);
    const crossTenant = await withTenant(t.app.db, tenantA, (tx) =>
      tx.execute(sql`
        select (select count(*)::int from keyword_term_stats where tenant_id = ${tenantB})
             + (select count(*)::int from keyword_stat_changes where tenant_id = ${tenantB})
             + (select count(*)::int from keyword_corpus_stats where tenant_id = ${tenantB}) as n`),
    );
    expect(crossTenant[0]!.n).toBe(0);
  });

  it('counts every write of concurrent writers, and a large change is folded by its own writer', async () => {
    const tenant = uniqueTenant('kw-concurrent');
    const ctx = { db: t.app.db, principal: admin(tenant) };
    const vocabulary = Array.from({ length: 400 }, (_, i) => `term${i.toString(36)}q`);
    const text = (seed: number) => vocabulary.filter((_, w) => (w * 7 + seed * 13) % 5 < 3).join(' ');
    await Promise.all(
      Array.from({ length: 6 }, async (_, stream) => {
        for (let i = 0; i < 10; i++) await writeFact(ctx, { type: 'acme.note', content: { text: text(stream * 10 + i) } });
      }),
    );
    expect(await statistics(tenant)).toEqual(await freshCount(tenant));

    // One statement of 100 facts of 240 lexemes of their own: a change of 24,000 lexemes, past the
    // 20,000 at which a writer always folds (the fold takes its own change and every committed one).
    // VALUES, not INSERT … SELECT from generate_series: Citus would copy those rows to the shard
    // with COPY, which PostgreSQL refuses on a table under row-level security (test:citus runs this).
    const bulk = Array.from({ length: 100 }, (_, f) =>
      Array.from({ length: 240 }, (_, w) => `bulk${f + 1}x${w + 1}q`).join(' '),
    );
    await withTenant(t.app.db, tenant, (tx) =>
      tx.execute(sql`
        insert into facts (tenant_id, id, version, type, content, trust, asserted_by_kind, asserted_by_id, created_at)
        values ${sql.join(
          bulk.map((words) => sql`(${tenant}, ${randomUUID()}::uuid, 1, 'acme.bulk', ${JSON.stringify({ text: words })}::jsonb, 'asserted', 'service', 'test', now())`),
          sql`, `,
        )}`),
    );
    expect(await pendingChanges(tenant)).toBe(0);
    expect(await statistics(tenant)).toEqual(await freshCount(tenant));
  });
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
