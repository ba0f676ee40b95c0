/**
 * The coverage keys restated in SQL (drizzle/0006_episode_coverage.sql: mnemo_merge_keys,
 * mnemo_episode_keys, mnemo_coverage_path, mnemo_trim_space) must give the answers of the TS
 * rules (src/kiwifs/coverage.ts: entryKeys, episodeKeys), which test/unit/coverage.test.ts
 * holds to DESIGN §6 and KiwiFS. The API's report runs on the SQL; the CLI runs on the TS.
 */
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../../src/db/client.ts';
import { facts, type ProvenanceRef } from '../../src/db/schema.ts';
import { appendMergedFrom, buildReport, entryKeys, episodeKeys } from '../../src/kiwifs/coverage.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { insertFact, uniqueTenant } from '../helpers/factories.ts';

/** What the TS rules say a list covers: the sorted, distinct union of its entries' keys. */
const tsMergeKeys = (list: readonly unknown[]): string[] => [...new Set(list.flatMap((entry) => entryKeys(entry)))].sort();

/** mergedFrom lists, each with what it exercises. */
const lists: Array<[string, unknown[]]> = [
  ['empty list', []],
  ['one episode by id', [{ type: 'episode', id: 'ep-1' }]],
  ['the same entry in two cases (duplicate key)', [{ type: 'EPISODE', id: 'ep-1' }, { type: 'episode', id: 'ep-1' }]],
  ['run, mixed case, padded id', [{ type: 'Run', id: ' run-7 ' }]],
  ['session with tab and newline', [{ type: ' session\t', id: '\nsess-1' }]],
  ['trace, event, ingest in odd cases', [{ type: 'TRACE', id: 'tr-1' }, { type: 'Event', id: 'ev-1' }, { type: 'iNgEsT', id: 'in-1' }]],
  ['every kind of ASCII space around an id', [{ type: 'episode', id: '\r\n\tep-9\v\f ' }]],
  ['non-covering type with an id only', [{ type: 'note', id: 'ep-1' }]],
  ['non-covering type with id and path', [{ type: 'note', id: 'ep-1', path: 'episodes/a.md' }]],
  ['path with slashes on both ends', [{ type: 'episode', path: '/episodes/a.md/' }]],
  ['path with spaces and doubled slashes on both ends', [{ type: 'episode', path: '  //episodes/a.md//  ' }]],
  ['path with backslashes', [{ type: 'episode', path: 'episodes\\2026\\a.md' }]],
  ['path with backslashes on both ends', [{ type: 'Session', path: '\\episodes\\a.md\\' }]],
  ['path of slashes only', [{ type: 'episode', path: '///' }]],
  ['path with inner spaces and doubled slash', [{ type: 'episode', path: '/ dir with space//a b.md /' }]],
  ['empty id and path', [{ type: 'episode', id: '', path: '' }]],
  ['blank id, path of a slash and spaces', [{ type: 'episode', id: '   ', path: ' / ' }]],
  ['empty type', [{ type: '', id: 'ep-1', path: 'episodes/a.md' }]],
  ['blank type', [{ type: '  \t', id: 'ep-1', path: 'episodes/a.md' }]],
  ['no type', [{ id: 'ep-1', path: 'episodes/a.md' }]],
  ['numeric type', [{ type: 5, id: 'ep-1', path: 'episodes/a.md' }]],
  ['null type', [{ type: null, id: 'ep-1' }]],
  ['numeric id and path', [{ type: 'episode', id: 42, path: 7 }]],
  ['boolean id, numeric id with a string path', [{ type: 'episode', id: true }, { type: 'run', id: 3, path: 'episodes/n.md' }]],
  ['null id and path', [{ type: 'episode', id: null, path: null }]],
  ['object id, array path', [{ type: 'episode', id: { id: 'ep-1' }, path: ['episodes/a.md'] }]],
  ['non-object items around one entry', ['episodes/a.md', 42, null, true, ['episode', 'ep-1'], { type: 'episode', id: 'ep-2' }]],
  ['only non-object items', ['episode:ep-1', 0, false, [], [{ type: 'episode', id: 'nested' }]]],
  [
    'the same keys from several entries',
    [
      { type: 'episode', id: 'ep-1', path: 'episodes/a.md' },
      { type: 'run', id: 'ep-1' },
      { type: 'note', path: '/episodes/a.md' },
      { type: 'Episode', id: ' ep-1' },
    ],
  ],
  ['an id that looks like a key', [{ type: 'episode', id: 'path:episodes/a.md' }, { type: 'run', id: 'id:x' }]],
  ['colons in the id, every optional field', [{ type: 'episode', id: 'ep:1:2', path: 'a/b/c.md', date: '2026-01-01', actor: 'x', note: 'n' }]],
  ['near-miss types', [{ type: 'Épisode', id: 'x' }, { type: 'episodes', id: 'y' }, { type: 'run-id', id: 'z' }]],
  ['non-ASCII id and path', [{ type: 'episode', id: 'ünïcødé-1', path: 'épisodes/ä.md' }]],
  ['an entry nested inside an entry', [{ type: 'episode', id: 'ep-1', extra: { type: 'run', id: 'nested' } }]],
  [
    'many entries, mixed',
    [
      { type: 'episode', id: 'b' },
      { type: 'episode', id: 'a' },
      { type: 'note', path: 'z.md' },
      { type: 'RUN', id: 'c', path: '\\y.md' },
      { type: 'ingest', path: 'x.md/' },
      {},
      { type: 'trace', id: 'a' },
    ],
  ],
];

/** (episode id, path) pairs, nulls included. */
const episodes: Array<[string | null, string | null]> = [
  ['ep-1', 'episodes/a.md'],
  [null, null],
  [null, 'episodes/a.md'],
  ['ep-1', null],
  ['', ''],
  ['  ', '  '],
  [' ep-1\t', '/episodes/a.md/'],
  ['\r\nep-9\v', '\t//episodes/a.md//\n'],
  ['ep-1', '\\episodes\\a.md'],
  ['ep-1', '///'],
  [null, '/ dir with space//a b.md /'],
  ['path:episodes/a.md', 'x'],
  ['ünïcødé-1', 'épisodes/ä.md'],
  ['run-7', 'episodes\\2026\\a.md'],
  ['a', 'x.md'],
];

describe('coverage keys: SQL and TS agree', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(() => t.drop());

  async function sqlMergeKeys(value: unknown): Promise<string[]> {
    const [row] = await t.admin<{ keys: string[] }[]>`select mnemo_merge_keys(${JSON.stringify(value)}::text::jsonb) as keys`;
    return row!.keys;
  }

  async function sqlEpisodeKeys(id: string | null, path: string | null): Promise<string[]> {
    const [row] = await t.admin<{ keys: string[] }[]>`select mnemo_episode_keys(${id}::text, ${path}::text) as keys`;
    return row!.keys;
  }

  it('has a varied table to compare', () => {
    expect(lists.length).toBeGreaterThanOrEqual(25);
    expect(episodes.length).toBeGreaterThanOrEqual(10);
    // the table is not trivially keyless
    expect(lists.filter(([, list]) => tsMergeKeys(list).length > 0).length).toBeGreaterThanOrEqual(15);
  });

  it.each(lists)('mnemo_merge_keys = sorted distinct union of entryKeys: %s', async (_, list) => {
    expect(await sqlMergeKeys(list)).toEqual(tsMergeKeys(list));
  });

  it.each(episodes)('mnemo_episode_keys(%j, %j) = episodeKeys', async (id, path) => {
    expect(await sqlEpisodeKeys(id, path)).toEqual(episodeKeys({ episodeId: id, path }));
  });

  it('pins a few answers outright (so agreement is not agreement on nothing)', async () => {
    expect(await sqlMergeKeys([{ type: ' Run ', id: ' r-1 ', path: '\\\\episodes\\a.md/' }, { type: 'note', id: 'n' }])).toEqual([
      'id:r-1',
      'path:episodes/a.md',
    ]);
    expect(await sqlMergeKeys([{ type: 'episode', id: 'b' }, { type: 'episode', id: 'a' }, { type: 'EPISODE', id: 'a' }])).toEqual(['id:a', 'id:b']);
    expect(await sqlEpisodeKeys(' ep-1 ', '//episodes/a.md/')).toEqual(['id:ep-1', 'path:episodes/a.md']);
    expect(await sqlEpisodeKeys(null, null)).toEqual([]);
    const [helpers] = await t.admin<{ trimmed: string; path: string; nullPath: string | null }[]>`
      select mnemo_trim_space(${' \t x y \n'}) as trimmed, mnemo_coverage_path(${' /a\\b/ '}) as path,
             mnemo_coverage_path(null) as "nullPath"`;
    expect(helpers).toEqual({ trimmed: 'x y', path: 'a/b', nullPath: null });
  });

  it('decides coverage as buildReport does, for every list against every episode', async () => {
    const rows = await t.admin<{ i: number; j: number; covered: boolean }[]>`
      select (l.ord - 1)::int as i, (e.ord - 1)::int as j,
             mnemo_merge_keys(l.value) && mnemo_episode_keys(e.value ->> 0, e.value ->> 1) as covered
      from jsonb_array_elements(${JSON.stringify(lists.map(([, list]) => list))}::text::jsonb) with ordinality as l(value, ord),
           jsonb_array_elements(${JSON.stringify(episodes)}::text::jsonb) with ordinality as e(value, ord)
      order by 1, 2`;
    expect(rows).toHaveLength(lists.length * episodes.length);
    let coveredPairs = 0;
    for (const { i, j, covered } of rows) {
      const [id, path] = episodes[j]!;
      const report = buildReport([
        { path, memoryKind: 'episodic', episodeId: id, mergedFrom: [] },
        { path: 'concepts/summary.md', memoryKind: 'semantic', episodeId: null, mergedFrom: lists[i]![1] },
      ]);
      expect(report.episodic_count).toBe(1);
      const tsCovered = report.unmerged_count === 0;
      expect(covered, `list "${lists[i]![0]}" against episode ${JSON.stringify(episodes[j])}`).toBe(tsCovered);
      if (covered) coveredPairs++;
    }
    // both answers occur, many times
    expect(coveredPairs).toBeGreaterThanOrEqual(20);
    expect(rows.length - coveredPairs).toBeGreaterThanOrEqual(20);
  });

  // Whitespace beyond ASCII and case mapping beyond ASCII: JS trim()/toLowerCase() and the
  // database's \s / lower() (its locale) must still give one answer.
  const unicode: Array<[string, unknown[]]> = [
    ['no-break space around an id (U+00A0)', [{ type: 'episode', id: '\u00a0ep-1\u00a0' }]],
    ['narrow no-break space before a type (U+202F)', [{ type: '\u202fsession', id: 's-1' }]],
    ['byte order mark before a path (U+FEFF)', [{ type: 'episode', path: '\ufeff/episodes/a.md' }]],
    ['em space around an id (U+2003)', [{ type: 'run', id: '\u2003r-1\u2003' }]],
    ['dotted capital I in a type (U+0130)', [{ type: 'EP\u0130SODE', id: 'x' }]],
  ];
  it.each(unicode)('mnemo_merge_keys = entryKeys beyond ASCII: %s', async (_, list) => {
    expect(await sqlMergeKeys(list)).toEqual(tsMergeKeys(list));
  });

  it.each<[string | null, string | null]>([
    ['\u00a0ep-1', 'episodes/a.md\u00a0'],
    ['\ufeffep-1', '\ufeff/episodes/a.md'],
    ['\u2003ep-1\u3000', '\u2003episodes/a.md'],
  ])('mnemo_episode_keys(%j, %j) = episodeKeys beyond ASCII', async (id, path) => {
    expect(await sqlEpisodeKeys(id, path)).toEqual(episodeKeys({ episodeId: id, path }));
  });
});

describe('facts.merge_keys (generated from merged_from)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(() => t.drop());

  async function mergeKeysOf(tenant: string, id: string): Promise<string[]> {
    const rows = await t.admin<{ merge_keys: string[] }[]>`select merge_keys from facts where tenant_id = ${tenant} and id = ${id}`;
    expect(rows).toHaveLength(1);
    return rows[0]!.merge_keys;
  }

  it('is empty for a fact without mergedFrom', async () => {
    const tenant = uniqueTenant();
    const fact = await insertFact(t.app.db, tenant);
    expect(await mergeKeysOf(tenant, fact.id)).toEqual([]);
  });

  // Lists of the table above with keys, plus the awkward ones, as facts would hold them.
  const stored = lists.filter(([name]) =>
    [
      'one episode by id',
      'the same entry in two cases (duplicate key)',
      'trace, event, ingest in odd cases',
      'non-covering type with id and path',
      'path with backslashes on both ends',
      'non-object items around one entry',
      'numeric id and path',
      'the same keys from several entries',
      'many entries, mixed',
      'empty list',
    ].includes(name),
  );

  it('has the lists it means to store', () => {
    expect(stored).toHaveLength(10);
  });

  it.each(stored)('holds the keys entryKeys gives, written through the app role: %s', async (_, list) => {
    const tenant = uniqueTenant();
    const fact = await insertFact(t.app.db, tenant, { mergedFrom: list as ProvenanceRef[] });
    expect(await mergeKeysOf(tenant, fact.id)).toEqual(tsMergeKeys(list));
  });

  it('is recomputed when a supersede adds to merged_from, and when merged_from is replaced', async () => {
    const tenant = uniqueTenant();
    const first: ProvenanceRef[] = [{ type: 'episode', id: 'ep-1' }];
    const fact = await insertFact(t.app.db, tenant, { mergedFrom: first, memoryKind: 'semantic' });
    expect(await mergeKeysOf(tenant, fact.id)).toEqual(['id:ep-1']);

    // As updateFact does: the entries it has, plus the new ones (appendMergedFrom), as the next version.
    const next = appendMergedFrom(
      first,
      [{ type: 'Episode', id: ' ep-1 ' }, { type: 'Run', id: 'run-2' }, { type: 'note', path: '/episodes/b.md' }],
      new Date('2026-02-02T00:00:00Z'),
    );
    expect(next).toHaveLength(3);
    await withTenant(t.app.db, tenant, (tx) =>
      tx
        .update(facts)
        .set({ mergedFrom: next, version: 2, recordedAt: new Date() })
        .where(and(eq(facts.tenantId, tenant), eq(facts.id, fact.id))),
    );
    expect(await mergeKeysOf(tenant, fact.id)).toEqual(['id:ep-1', 'id:run-2', 'path:episodes/b.md']);
    expect(await mergeKeysOf(tenant, fact.id)).toEqual(tsMergeKeys(next));

    // Replaced outright (as the owner, behind the app's back): the keys follow.
    await t.admin`update facts set merged_from = ${JSON.stringify([{ type: 'session', id: 's-9' }])}::text::jsonb, version = 3
                  where tenant_id = ${tenant} and id = ${fact.id}`;
    expect(await mergeKeysOf(tenant, fact.id)).toEqual(['id:s-9']);
    await t.admin`update facts set merged_from = '[]'::jsonb, version = 4 where tenant_id = ${tenant} and id = ${fact.id}`;
    expect(await mergeKeysOf(tenant, fact.id)).toEqual([]);
  });

  it('finds the covering fact through the keys, as the report anti-join does', async () => {
    const tenant = uniqueTenant();
    const summary = await insertFact(t.app.db, tenant, { mergedFrom: [{ type: 'TRACE', id: ' tr-5 ' }, { type: 'note', path: 'episodes\\c.md/' }] });
    await insertFact(t.app.db, tenant, { mergedFrom: [{ type: 'note', id: 'tr-5' }] });
    const covering = async (id: string | null, path: string | null) =>
      (
        await t.admin<{ id: string }[]>`
          select id from facts where tenant_id = ${tenant} and merge_keys && mnemo_episode_keys(${id}::text, ${path}::text)`
      ).map((r) => r.id);
    expect(await covering('tr-5', null)).toEqual([summary.id]);
    expect(await covering(null, '/episodes/c.md')).toEqual([summary.id]);
    expect(await covering('tr-6', 'episodes/d.md')).toEqual([]);
  });

  it('cannot be written, and merged_from must be a list (so a single-object shape never reaches mnemo_merge_keys)', async () => {
    const tenant = uniqueTenant();
    const fact = await insertFact(t.app.db, tenant, { mergedFrom: [{ type: 'episode', id: 'ep-1' }] });
    await expect(t.admin`update facts set merge_keys = '{id:forged}' where tenant_id = ${tenant} and id = ${fact.id}`).rejects.toThrow(
      /merge_keys/,
    );
    await expect(
      t.admin`update facts set merged_from = '{"type": "episode", "id": "ep-2"}'::jsonb where tenant_id = ${tenant} and id = ${fact.id}`,
    ).rejects.toThrow(/facts_merged_from_array/);
    expect(await mergeKeysOf(tenant, fact.id)).toEqual(['id:ep-1']);
  });
});

describe('facts.episode_keys (generated from episode_id, else the fact id, and path)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(() => t.drop());

  const episodeKeysOf = async (tenant: string, id: string) =>
    (await t.admin<{ episode_keys: string[] }[]>`select episode_keys from facts where tenant_id = ${tenant} and id = ${id}`)[0]!.episode_keys;

  // The identity the report gives an episode: its episodeId, else its fact id (report.ts).
  it.each([
    [' ep-1 ', '/episodes\\a.md/'],
    [null, 'episodes/b.md'],
    ['   ', null],
    ['\u00a0ep-2\u3000', '\u2003/x/\u2003'],
    [null, null],
  ])('holds episodeKeys for episodeId %j, path %j, written through the app role', async (episodeId, path) => {
    const tenant = uniqueTenant();
    const fact = await insertFact(t.app.db, tenant, { episodeId, path, memoryKind: 'episodic' });
    expect(await episodeKeysOf(tenant, fact.id)).toEqual(episodeKeys({ episodeId: episodeId ?? fact.id, path }));
  });

  it('follows a change of path or episode id, and cannot be written', async () => {
    const tenant = uniqueTenant();
    const fact = await insertFact(t.app.db, tenant, { episodeId: 'ep-1', path: 'episodes/a.md', memoryKind: 'episodic' });
    await t.admin`update facts set path = 'episodes/b.md', episode_id = null, version = 2 where tenant_id = ${tenant} and id = ${fact.id}`;
    expect(await episodeKeysOf(tenant, fact.id)).toEqual([`id:${fact.id}`, 'path:episodes/b.md']);
    await expect(t.admin`update facts set episode_keys = '{id:forged}' where tenant_id = ${tenant} and id = ${fact.id}`).rejects.toThrow(/episode_keys/);
  });
});
