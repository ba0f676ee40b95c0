/**
 * The coverage rules of DESIGN §6 (src/kiwifs/coverage.ts) and the X-Provenance parser
 * (src/kiwifs/provenance.ts), rule by rule, then against KiwiFS v0.4.1's own cases
 * (test/fixtures/peer-cases/kiwifs/). Pure: no database. The SQL restatement of the key rules
 * is held to these same answers by test/integration/coverage-keys.test.ts.
 */
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import {
  appendMergedFrom,
  buildReport,
  COVERING_TYPES,
  cut,
  DEFAULT_EPISODES_PREFIX,
  entryKeys,
  episodeKeys,
  isEpisodic,
  mergedFromEntryKey,
  mergedFromList,
  missingEpisodeIdWarning,
  normalizeEpisodesPrefix,
  normalizePath,
  type ReportItem,
  UNSUPPORTED_MERGED_FROM_WARNING,
} from '../../src/kiwifs/coverage.ts';
import { parseProvenanceHeader } from '../../src/kiwifs/provenance.ts';
import { kiwifsCases } from '../helpers/fixtures.ts';

// ---------------------------------------------------------------------------------------------
// Helpers

const PREFIX = normalizeEpisodesPrefix(undefined);

/** An item as the report sees it; only what a case sets differs from "nothing". */
const item = (fields: Partial<ReportItem>): ReportItem => ({
  path: null,
  memoryKind: null,
  episodeId: null,
  mergedFrom: undefined,
  ...fields,
});

/** An episode (memoryKind episodic) and, optionally, a semantic fact merging `mergedFrom`. */
function coverageOf(episode: { episodeId?: string | null; path?: string | null }, mergedFrom?: unknown) {
  const items = [item({ path: episode.path ?? null, episodeId: episode.episodeId ?? null, memoryKind: 'episodic' })];
  if (mergedFrom !== undefined) items.push(item({ path: 'concepts/summary.md', memoryKind: 'semantic', mergedFrom }));
  const report = buildReport(items);
  expect(report.episodic_count).toBe(1);
  return report.unmerged_count === 0;
}


// ---------------------------------------------------------------------------------------------
// Classification

describe('normalizeEpisodesPrefix', () => {
  it.each([
    [undefined, 'episodes/'],
    [null, 'episodes/'],
    ['', 'episodes/'],
    ['episodes', 'episodes/'],
    ['episodes/', 'episodes/'],
    ['raw', 'raw/'],
    ['raw/', 'raw/'],
    ['team/raw', 'team/raw/'],
    ['raw\\', 'raw/'],
    ['team\\raw', 'team/raw/'],
  ] as const)('%j → %j', (input, expected) => {
    expect(normalizeEpisodesPrefix(input)).toBe(expected);
  });

  it('defaults to KiwiFS DefaultEpisodesPathPrefix', () => {
    expect(DEFAULT_EPISODES_PREFIX).toBe('episodes/');
  });
});

describe('isEpisodic', () => {
  const table: Array<[string | null | undefined, string | null, boolean]> = [
    // semantic / consolidation: never, even under the prefix
    ['semantic', 'episodes/a.md', false],
    ['consolidation', 'episodes/a.md', false],
    ['Semantic', 'episodes/a.md', false],
    ['SEMANTIC', 'episodes/a.md', false],
    [' CONSOLIDATION\n', 'episodes/a.md', false],
    ['\tsemantic ', 'episodes/2026/a.md', false],
    ['semantic', null, false],
    // episodic: always, even outside the prefix or with no path
    ['episodic', 'concepts/x.md', true],
    ['episodic', null, true],
    ['episodic', '', true],
    ['EPISODIC', 'concepts/x.md', true],
    ['  Episodic\t', 'concepts/x.md', true],
    ['episodic', '/episodes/a.md', true],
    // absent / working / anything else: by prefix
    [null, 'episodes/a.md', true],
    [undefined, 'episodes/a.md', true],
    ['', 'episodes/a.md', true],
    ['   ', 'episodes/a.md', true],
    ['working', 'episodes/a.md', true],
    ['WORKING ', 'episodes/2026/01/a.md', true],
    ['scratch', 'episodes/a.md', true],
    [null, 'episodes/', true],
    [null, 'concepts/a.md', false],
    [undefined, 'concepts/a.md', false],
    ['working', 'concepts/a.md', false],
    ['scratch', 'x.md', false],
    [null, null, false],
    ['working', null, false],
    [null, '', false],
    // the prefix is a plain, case-sensitive string prefix of the path as stored
    [null, 'episodes', false],
    [null, 'episodesX/a.md', false],
    [null, 'Episodes/a.md', false],
    [null, '/episodes/a.md', false],
    [null, 'notes/episodes/a.md', false],
    [null, ' episodes/a.md', false],
  ];
  it.each(table)('memoryKind %j, path %j → %j (prefix episodes/)', (kind, path, expected) => {
    expect(isEpisodic(kind, path, PREFIX)).toBe(expected);
  });

  const custom: Array<[string | null, string | null, boolean]> = [
    [null, 'raw/z.md', true],
    ['working', 'raw/z.md', true],
    [null, 'episodes/a.md', false],
    ['episodic', 'episodes/a.md', true],
    ['semantic', 'raw/z.md', false],
    ['consolidation', 'raw/z.md', false],
    [null, 'raw', false],
    [null, 'rawx/z.md', false],
  ];
  it.each(custom)('memoryKind %j, path %j → %j (prefix "raw", normalised)', (kind, path, expected) => {
    expect(isEpisodic(kind, path, normalizeEpisodesPrefix('raw'))).toBe(expected);
  });

  it('treats an empty prefix as the default one once normalised', () => {
    expect(isEpisodic(null, 'episodes/a.md', normalizeEpisodesPrefix(''))).toBe(true);
    expect(isEpisodic(null, 'raw/a.md', normalizeEpisodesPrefix(''))).toBe(false);
    expect(isEpisodic(null, 'episodes/a.md', normalizeEpisodesPrefix('episodes'))).toBe(true);
    expect(isEpisodic(null, 'episodesX/a.md', normalizeEpisodesPrefix('episodes'))).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------
// Keys

describe('normalizePath', () => {
  it.each([
    ['episodes/a.md', 'episodes/a.md'],
    ['/episodes/a.md', 'episodes/a.md'],
    ['episodes/a.md/', 'episodes/a.md'],
    ['///episodes/a.md///', 'episodes/a.md'],
    ['  /episodes/a.md/\t', 'episodes/a.md'],
    ['episodes\\2026\\a.md', 'episodes/2026/a.md'],
    ['\\episodes\\a.md\\', 'episodes/a.md'],
    ['episodes//a.md', 'episodes//a.md'],
    ['/ episodes/a.md /', ' episodes/a.md '],
    ['/', ''],
    ['', ''],
    ['   ', ''],
    ['\\/\\', ''],
  ])('%j → %j', (input, expected) => {
    expect(normalizePath(input)).toBe(expected);
  });
});

describe('entryKeys', () => {
  it('knows exactly the six covering types', () => {
    expect([...COVERING_TYPES].sort()).toEqual(['episode', 'event', 'ingest', 'run', 'session', 'trace']);
  });

  const spellings: Array<[string, (t: string) => string]> = [
    ['lower', (t) => t],
    ['upper', (t) => t.toUpperCase()],
    ['capitalised', (t) => t[0]!.toUpperCase() + t.slice(1)],
    ['alternating', (t) => [...t].map((c, i) => (i % 2 ? c.toUpperCase() : c)).join('')],
    ['padded', (t) => `  ${t}\t`],
    ['padded upper', (t) => `\n${t.toUpperCase()} `],
  ];
  const cases = COVERING_TYPES.flatMap((type) => spellings.map(([how, spell]) => ({ type, how, spelled: spell(type) })));

  it.each(cases)('covering type $type ($how: $spelled) keys its id, trimmed', ({ spelled }) => {
    expect(entryKeys({ type: spelled, id: 'ep-1' })).toEqual(['id:ep-1']);
    expect(entryKeys({ type: spelled, id: '  ep-1\t' })).toEqual(['id:ep-1']);
    expect(entryKeys({ type: spelled, id: 'ep-1', path: '/episodes/a.md' })).toEqual(['id:ep-1', 'path:episodes/a.md']);
  });

  it.each(cases)('covering type $type ($how) covers an episode by id in a report', ({ spelled }) => {
    expect(coverageOf({ episodeId: 'ep-1', path: 'episodes/a.md' }, [{ type: spelled, id: ' ep-1 ' }])).toBe(true);
    expect(coverageOf({ episodeId: ' ep-1\t', path: 'episodes/a.md' }, [{ type: spelled, id: 'ep-1' }])).toBe(true);
    // the same entry with another id does not
    expect(coverageOf({ episodeId: 'ep-1', path: 'episodes/a.md' }, [{ type: spelled, id: 'ep-2' }])).toBe(false);
  });

  const nonCovering = ['note', 'episodes', 'derived', 'commit', 'manual', 'runs', 'episode-x', 'ep isode', 'consolidation', 'semantic'];

  it.each(nonCovering)('non-covering type %j: an id covers nothing, a path still does', (type) => {
    expect(entryKeys({ type, id: 'ep-1' })).toEqual([]);
    expect(entryKeys({ type, id: 'ep-1', path: 'episodes/a.md' })).toEqual(['path:episodes/a.md']);
    expect(entryKeys({ type, path: '/episodes/a.md/' })).toEqual(['path:episodes/a.md']);
    expect(coverageOf({ episodeId: 'ep-1', path: 'episodes/a.md' }, [{ type, id: 'ep-1' }])).toBe(false);
    expect(coverageOf({ episodeId: 'ep-1', path: 'episodes/a.md' }, [{ type, id: 'other', path: 'episodes/a.md' }])).toBe(true);
  });

  it.each<[string, unknown]>([
    ['no type', { id: 'ep-1', path: 'episodes/a.md' }],
    ['empty type', { type: '', id: 'ep-1', path: 'episodes/a.md' }],
    ['blank type', { type: ' \t\n', id: 'ep-1', path: 'episodes/a.md' }],
    ['numeric type', { type: 5, id: 'ep-1', path: 'episodes/a.md' }],
    ['null type', { type: null, id: 'ep-1', path: 'episodes/a.md' }],
    ['neither id nor path', { type: 'episode' }],
    ['empty id and path', { type: 'episode', id: '', path: '' }],
    ['blank id, path of slashes', { type: 'episode', id: '   ', path: ' / ' }],
    ['numeric id and path', { type: 'episode', id: 42, path: 7 }],
    ['boolean id', { type: 'episode', id: true }],
    ['null id and path', { type: 'run', id: null, path: null }],
    ['object id, array path', { type: 'episode', id: { id: 'ep-1' }, path: ['episodes/a.md'] }],
  ])('%s → no keys', (_, entry) => {
    expect(entryKeys(entry)).toEqual([]);
  });

  it.each<[string, unknown]>([
    ['null', null],
    ['undefined', undefined],
    ['a string', 'episodes/a.md'],
    ['a type:id string', 'episode:ep-1'],
    ['a number', 42],
    ['a boolean', true],
    ['an array', ['episode', 'ep-1']],
    ['an array of an entry', [{ type: 'episode', id: 'ep-1' }]],
  ])('a non-object entry (%s) → no keys', (_, entry) => {
    expect(entryKeys(entry)).toEqual([]);
  });

  it('keys a non-string id as absent but still keys the path', () => {
    expect(entryKeys({ type: 'episode', id: 42, path: 'episodes/a.md' })).toEqual(['path:episodes/a.md']);
    expect(entryKeys({ type: 'episode', id: 'ep-1', path: 42 })).toEqual(['id:ep-1']);
  });
});

describe('episodeKeys', () => {
  it.each<[{ episodeId?: string | null; path?: string | null }, string[]]>([
    [{ episodeId: 'ep-1', path: 'episodes/a.md' }, ['id:ep-1', 'path:episodes/a.md']],
    [{ episodeId: ' ep-1\t', path: '/episodes/a.md/' }, ['id:ep-1', 'path:episodes/a.md']],
    [{ episodeId: 'ep-1', path: '\\episodes\\a.md' }, ['id:ep-1', 'path:episodes/a.md']],
    [{ episodeId: null, path: 'episodes/a.md' }, ['path:episodes/a.md']],
    [{ episodeId: 'ep-1', path: null }, ['id:ep-1']],
    [{ episodeId: 'ep-1' }, ['id:ep-1']],
    [{ path: 'x' }, ['path:x']],
    [{ episodeId: null, path: null }, []],
    [{}, []],
    [{ episodeId: '', path: '' }, []],
    [{ episodeId: '   ', path: '///' }, []],
    [{ episodeId: 'path:x', path: 'x' }, ['id:path:x', 'path:x']],
  ])('%j → %j', (episode, expected) => {
    expect(episodeKeys(episode)).toEqual(expected);
  });
});

// ---------------------------------------------------------------------------------------------
// Coverage by path

describe('path matching', () => {
  const entryPaths = [
    'episodes/a.md',
    '/episodes/a.md',
    'episodes/a.md/',
    '//episodes/a.md//',
    ' /episodes/a.md ',
    '\tepisodes/a.md\n',
    'episodes\\a.md',
    '\\episodes\\a.md\\',
  ];
  const episodePaths = ['episodes/a.md', '/episodes/a.md', 'episodes/a.md/', '/episodes/a.md/', '//episodes/a.md'];
  const matches = entryPaths.flatMap((entryPath) => episodePaths.map((episodePath) => ({ entryPath, episodePath })));

  it.each(matches)('entry path $entryPath covers episode path $episodePath', ({ entryPath, episodePath }) => {
    // no episode id: only the path can cover it
    expect(coverageOf({ path: episodePath }, [{ type: 'episode', path: entryPath }])).toBe(true);
    expect(coverageOf({ path: episodePath }, [{ type: 'note', path: entryPath }])).toBe(true);
    expect(coverageOf({ path: episodePath }, [{ type: 'Episode', id: 'unrelated', path: entryPath }])).toBe(true);
  });

  it.each(['episodes/a', 'episodes/a.md.bak', 'Episodes/a.md', 'episodes//a.md', 'other/episodes/a.md', 'a.md', 'episodes/'])(
    'entry path %j does not cover episodes/a.md',
    (entryPath) => {
      expect(coverageOf({ path: 'episodes/a.md' }, [{ type: 'episode', path: entryPath }])).toBe(false);
    },
  );

  it('does not cover by path when the entry has no type', () => {
    expect(coverageOf({ path: 'episodes/a.md' }, [{ path: 'episodes/a.md' }])).toBe(false);
    expect(coverageOf({ path: 'episodes/a.md' }, [{ type: ' ', path: 'episodes/a.md' }])).toBe(false);
  });

  it('does not confuse an id with a path', () => {
    expect(coverageOf({ path: 'episodes/a.md' }, [{ type: 'episode', id: 'episodes/a.md' }])).toBe(false);
    expect(coverageOf({ path: 'episodes/a.md' }, [{ type: 'episode', id: 'path:episodes/a.md' }])).toBe(false);
    expect(coverageOf({ episodeId: 'episodes/a.md', path: 'episodes/b.md' }, [{ type: 'episode', path: 'episodes/a.md' }])).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------
// mergedFrom shapes, counts and warnings

describe('mergedFromList', () => {
  it('takes a list as is, a single entry as a list of one, absent as none', () => {
    const list = [{ type: 'episode', id: 'a' }, 'junk'];
    expect(mergedFromList(list)).toEqual({ entries: list, unsupported: false });
    expect(mergedFromList({ type: 'episode', id: 'a' })).toEqual({ entries: [{ type: 'episode', id: 'a' }], unsupported: false });
    expect(mergedFromList(undefined)).toEqual({ entries: [], unsupported: false });
    expect(mergedFromList(null)).toEqual({ entries: [], unsupported: false });
    expect(mergedFromList([])).toEqual({ entries: [], unsupported: false });
  });

  it.each<[string, unknown]>([
    ['a string', 'episodes/a.md'],
    ['an empty string', ''],
    ['a number', 42],
    ['a boolean', false],
  ])('refuses %s', (_, value) => {
    expect(mergedFromList(value)).toEqual({ entries: [], unsupported: true });
  });
});

describe('buildReport: merged_from_refs, shapes and warnings', () => {
  const episode = item({ path: 'episodes/a.md', memoryKind: 'episodic', episodeId: 'ep-1' });

  it('counts every entry, unusable ones included, but only usable ones cover', () => {
    const unusable = [
      { id: 'ep-1' },
      { type: '', id: 'ep-1' },
      { type: 'episode' },
      { type: 'episode', id: ' ', path: '' },
      { type: 'episode', id: 42 },
    ];
    const report = buildReport([episode, item({ path: 'c.md', memoryKind: 'semantic', mergedFrom: unusable })]);
    expect(report.merged_from_refs).toBe(5);
    expect(report.unmerged_count).toBe(1);
    expect(report.unmerged.map((e) => e.path)).toEqual(['episodes/a.md']);
    expect(report).not.toHaveProperty('warnings');
  });

  it('counts only mappings and nulls among list items (as KiwiFS), and non-objects cover nothing', () => {
    const report = buildReport([
      episode,
      item({ path: 'c.md', memoryKind: 'semantic', mergedFrom: ['episode:ep-1', 'episodes/a.md', 7, null, true, ['episode', 'ep-1']] }),
    ]);
    expect(report.merged_from_refs).toBe(1);
    expect(report.unmerged_count).toBe(1);
    expect(report).not.toHaveProperty('warnings');
  });

  it('counts duplicates and sums over every item, episodic or not', () => {
    const report = buildReport([
      item({ ...episode, mergedFrom: [{ type: 'note', id: 'n' }] }),
      item({ path: 'c.md', memoryKind: 'semantic', mergedFrom: [{ type: 'episode', id: 'ep-1' }, { type: 'episode', id: 'ep-1' }] }),
      item({ path: 'd.md', mergedFrom: { type: 'run', id: 'ep-1' } }),
    ]);
    expect(report.merged_from_refs).toBe(4);
    expect(report.unmerged_count).toBe(0);
  });

  it('takes a single-object mergedFrom as one entry, which covers', () => {
    const report = buildReport([episode, item({ path: 'c.md', memoryKind: 'semantic', mergedFrom: { type: 'Episode', id: ' ep-1 ' } })]);
    expect(report.merged_from_refs).toBe(1);
    expect(report.unmerged).toEqual([]);
    expect(report.unmerged_count).toBe(0);
    expect(report).not.toHaveProperty('warnings');
  });

  it.each<[string, unknown]>([
    ['a string', 'episodes/a.md'],
    ['a type:id string', 'episode:ep-1'],
    ['a number', 3],
    ['a boolean', true],
  ])('warns about a mergedFrom of unsupported shape (%s), which counts and covers nothing', (_, mergedFrom) => {
    const report = buildReport([episode, item({ path: 'c.md', memoryKind: 'semantic', mergedFrom })]);
    expect(report.warnings).toEqual(['memory: merged-from has unsupported shape']);
    expect(UNSUPPORTED_MERGED_FROM_WARNING).toBe('memory: merged-from has unsupported shape');
    expect(report.merged_from_refs).toBe(0);
    expect(report.unmerged_count).toBe(1);
  });

  it('warns about an episode without an id, in KiwiFS words, and lists it without episode_id', () => {
    const report = buildReport([item({ path: 'episodes/b.md' })]);
    expect(report.warnings).toEqual([
      'missing episode_id in episodes/b.md — set memory_kind: episodic and episode_id, or match merged-from by path',
    ]);
    expect(missingEpisodeIdWarning('x/y.md')).toBe(
      'missing episode_id in x/y.md — set memory_kind: episodic and episode_id, or match merged-from by path',
    );
    expect(report.episodic_files).toEqual([{ path: 'episodes/b.md' }]);
    expect(report.unmerged).toEqual([{ path: 'episodes/b.md' }]);
  });

  it('warns for a blank episode id too, and never for items that are not episodes', () => {
    const report = buildReport([
      item({ path: 'episodes/b.md', episodeId: '  \t' }),
      item({ path: 'concepts/c.md' }),
      item({ path: 'episodes/s.md', memoryKind: 'semantic' }),
    ]);
    expect(report.warnings).toEqual([missingEpisodeIdWarning('episodes/b.md')]);
    expect(report.episodic_files).toEqual([{ path: 'episodes/b.md' }]);
  });

  it('has no warnings key when there is nothing to warn about', () => {
    const report = buildReport([episode]);
    expect(Object.keys(report).sort()).toEqual(['episodic_count', 'episodic_files', 'merged_from_refs', 'unmerged', 'unmerged_count']);
  });
});

// ---------------------------------------------------------------------------------------------
// limit / offset

describe('limit and offset', () => {
  // Five episodes; a summary covers 2 (by id) and 4 (by path): 1, 3, 5 are unmerged.
  const items = [
    ...[1, 2, 3, 4, 5].map((n) => item({ path: `episodes/${n}.md`, episodeId: `ep-${n}` })),
    item({ path: 'concepts/s.md', memoryKind: 'semantic', mergedFrom: [{ type: 'episode', id: 'ep-2' }, { type: 'note', path: 'episodes/4.md' }] }),
  ];
  const ids = (list: Array<{ episode_id?: string }>) => list.map((e) => e.episode_id);

  it.each<[{ limit?: number; offset?: number }, string[], string[]]>([
    [{}, ['ep-1', 'ep-2', 'ep-3', 'ep-4', 'ep-5'], ['ep-1', 'ep-3', 'ep-5']],
    [{ limit: 2 }, ['ep-1', 'ep-2'], ['ep-1', 'ep-3']],
    [{ offset: 1, limit: 2 }, ['ep-2', 'ep-3'], ['ep-3', 'ep-5']],
    [{ offset: 2 }, ['ep-3', 'ep-4', 'ep-5'], ['ep-5']],
    [{ offset: 3 }, ['ep-4', 'ep-5'], []],
    [{ limit: 0 }, [], []],
    [{ limit: 0, offset: 2 }, [], []],
    [{ offset: 5 }, [], []],
    [{ offset: 100, limit: 10 }, [], []],
    [{ limit: 100 }, ['ep-1', 'ep-2', 'ep-3', 'ep-4', 'ep-5'], ['ep-1', 'ep-3', 'ep-5']],
    [{ offset: 4, limit: 1 }, ['ep-5'], []],
  ])('%j cuts the lists, never the counts', (page, episodic, unmerged) => {
    const report = buildReport(items, page);
    expect(ids(report.episodic_files)).toEqual(episodic);
    expect(ids(report.unmerged)).toEqual(unmerged);
    expect(report.episodic_count).toBe(5);
    expect(report.unmerged_count).toBe(3);
    expect(report.merged_from_refs).toBe(2);
  });

  it('cut slices a list the same way', () => {
    expect(cut([1, 2, 3], {})).toEqual([1, 2, 3]);
    expect(cut([1, 2, 3], { limit: 0 })).toEqual([]);
    expect(cut([1, 2, 3], { offset: 1 })).toEqual([2, 3]);
    expect(cut([1, 2, 3], { offset: 1, limit: 1 })).toEqual([2]);
    expect(cut([1, 2, 3], { offset: 3 })).toEqual([]);
    expect(cut([1, 2, 3], { offset: 9, limit: 2 })).toEqual([]);
    expect(cut([1, 2, 3], { limit: undefined, offset: undefined })).toEqual([1, 2, 3]);
  });
});

// ---------------------------------------------------------------------------------------------
// End to end

describe('buildReport end to end', () => {
  function* facts(): Generator<ReportItem> {
    yield item({ path: 'episodes/2026/a.md', memoryKind: 'episodic', episodeId: ' ep-a ', factId: 'f-a' });
    yield item({ path: 'episodes/b.md', mergedFrom: [] }); // episodic by prefix, no id
    yield item({ path: 'episodes/c.md', memoryKind: 'semantic', episodeId: 'ep-c' }); // never episodic
    yield item({ path: 'notes/d.md', memoryKind: 'working', episodeId: 'ep-d' }); // outside the prefix
    yield item({ path: 'notes/e.md', memoryKind: 'Episodic', episodeId: 'ep-e' }); // episodic anywhere
    yield item({ path: null, memoryKind: 'episodic', episodeId: 'ep-f' }); // no path
    yield item({ path: 'episodes/g.md', memoryKind: 'episodic', episodeId: 'ep-g', mergedFrom: [{ type: 'episode', id: 'ep-g' }] }); // covers itself
    yield item({
      path: 'concepts/summary.md',
      memoryKind: 'semantic',
      mergedFrom: [{ type: 'Run', id: 'ep-a' }, { type: 'note', path: '/episodes/b.md' }, 'junk', { type: 'episode' }, { type: 'episode', id: 'ep-c' }],
    });
    yield item({ path: 'concepts/bad.md', memoryKind: 'consolidation', mergedFrom: 'episodes/e.md' });
  }

  it('classifies, identifies, covers, counts and warns as DESIGN §6 says', () => {
    const report = buildReport(facts());
    expect(report).toEqual({
      episodic_count: 5,
      merged_from_refs: 5,
      unmerged_count: 2,
      episodic_files: [
        { path: 'episodes/2026/a.md', episode_id: 'ep-a', memory_kind: 'episodic', fact_id: 'f-a' },
        { path: 'episodes/b.md' },
        { path: 'notes/e.md', episode_id: 'ep-e', memory_kind: 'Episodic' },
        { path: '', episode_id: 'ep-f', memory_kind: 'episodic' },
        { path: 'episodes/g.md', episode_id: 'ep-g', memory_kind: 'episodic' },
      ],
      unmerged: [
        { path: 'notes/e.md', episode_id: 'ep-e', memory_kind: 'Episodic' },
        { path: '', episode_id: 'ep-f', memory_kind: 'episodic' },
      ],
      warnings: [missingEpisodeIdWarning('episodes/b.md'), UNSUPPORTED_MERGED_FROM_WARNING],
    });
  });

  it('applies a custom prefix', () => {
    const report = buildReport(facts(), { prefix: 'notes' });
    // notes/d.md (working) joins; episodes/b.md (no kind) leaves; explicit episodics stay
    expect(report.episodic_files.map((e) => e.path)).toEqual(['episodes/2026/a.md', 'notes/d.md', 'notes/e.md', '', 'episodes/g.md']);
    expect(report.unmerged.map((e) => e.path)).toEqual(['notes/d.md', 'notes/e.md', '']);
    expect(report.warnings).toEqual([UNSUPPORTED_MERGED_FROM_WARNING]);
  });

  it('is empty over nothing', () => {
    expect(buildReport([])).toEqual({ episodic_count: 0, merged_from_refs: 0, unmerged_count: 0, episodic_files: [], unmerged: [] });
  });
});

// ---------------------------------------------------------------------------------------------
// appendMergedFrom / mergedFromEntryKey

interface Entry {
  type: string;
  id?: string;
  path?: string;
  date?: string;
  note?: string;
}

describe('mergedFromEntryKey', () => {
  it.each<[Entry, string]>([
    [{ type: 'episode', id: 'ep-1' }, 'episode:ep-1'],
    [{ type: ' Episode ', id: ' ep-1\t' }, 'episode:ep-1'],
    [{ type: 'RUN', id: 'r', path: 'ignored.md' }, 'run:r'],
    [{ type: 'episode', path: '/episodes/a.md/' }, 'episode:path:episodes/a.md'],
    [{ type: 'Note', path: 'episodes\\a.md' }, 'note:path:episodes/a.md'],
    [{ type: 'episode', id: '   ', path: 'p.md' }, 'episode:path:p.md'],
    [{ type: 'episode' }, 'episode:path:'],
  ])('%j → %j', (entry, key) => {
    expect(mergedFromEntryKey(entry)).toBe(key);
  });
});

describe('appendMergedFrom', () => {
  const now = new Date('2026-03-04T05:06:07.890Z');
  const later = new Date('2027-01-01T00:00:00.000Z');
  const injectCases = kiwifsCases<{
    merged_from_inject_cases: Array<{ name: string; entries: Entry[]; expect: Record<string, unknown> }>;
  }>('kiwifs-provenance-cases.json').merged_from_inject_cases;

  it('is idempotent (KiwiFS TestInjectMergedFrom_idempotent)', () => {
    const kiwi = injectCases.find((c) => c.name === 'TestInjectMergedFrom_idempotent')!;
    expect(kiwi).toBeDefined();
    const once = appendMergedFrom([], kiwi.entries, now);
    expect(once).toEqual([{ type: 'episode', id: 'ep-1', note: 'first', date: now.toISOString() }]);
    const twice = appendMergedFrom(once, kiwi.entries, later);
    expect(twice).toEqual(once);
    const counts = (kiwi.expect.reinject_same_entries as { count_of_substring: Record<string, number> }).count_of_substring;
    for (const [needle, count] of Object.entries(counts)) {
      expect(JSON.stringify(twice).split(needle).length - 1).toBe(count);
    }
  });

  it('accepts a path-only entry (KiwiFS TestInjectMergedFrom_acceptsPathOnly)', () => {
    const kiwi = injectCases.find((c) => c.name === 'TestInjectMergedFrom_acceptsPathOnly')!;
    const out = appendMergedFrom([], kiwi.entries, now);
    expect(JSON.stringify(out)).toContain(kiwi.expect.output_contains as string);
    expect(out).toEqual([{ type: 'episode', path: 'episodes/2026/a.md', date: now.toISOString() }]);
  });

  it('treats the same type in another case or with spaces, and a padded id, as the same entry', () => {
    const existing: Entry[] = [{ type: 'episode', id: 'ep-1', date: '2026-01-01T00:00:00Z' }];
    expect(appendMergedFrom(existing, [{ type: 'Episode', id: 'ep-1' }], now)).toEqual(existing);
    expect(appendMergedFrom(existing, [{ type: ' EPISODE\t', id: ' ep-1 ' }], now)).toEqual(existing);
    // another type with the same id is another entry
    expect(appendMergedFrom(existing, [{ type: 'run', id: 'ep-1' }], now)).toEqual([
      ...existing,
      { type: 'run', id: 'ep-1', date: now.toISOString() },
    ]);
    // an id differing in case is another entry
    expect(appendMergedFrom(existing, [{ type: 'episode', id: 'EP-1' }], now)).toHaveLength(2);
  });

  it('keys path-only entries by their path', () => {
    const existing: Entry[] = [{ type: 'episode', path: 'episodes/a.md', date: '2026-01-01T00:00:00Z' }];
    expect(appendMergedFrom(existing, [{ type: 'Episode', path: '/episodes/a.md/' }], now)).toEqual(existing);
    expect(appendMergedFrom(existing, [{ type: 'episode', path: 'episodes\\a.md' }], now)).toEqual(existing);
    expect(appendMergedFrom(existing, [{ type: 'episode', path: 'episodes/b.md' }], now)).toEqual([
      ...existing,
      { type: 'episode', path: 'episodes/b.md', date: now.toISOString() },
    ]);
    // an entry with an id is keyed by its id, even with the same path
    expect(appendMergedFrom(existing, [{ type: 'episode', id: 'ep-a', path: 'episodes/a.md' }], now)).toHaveLength(2);
    // the same path under another type is another entry
    expect(appendMergedFrom(existing, [{ type: 'note', path: 'episodes/a.md' }], now)).toHaveLength(2);
  });

  it('adds a repeated new entry once', () => {
    const out = appendMergedFrom([], [{ type: 'run', id: 'r-1' }, { type: 'RUN', id: 'r-1 ' }, { type: 'run', id: 'r-2' }], now);
    expect(out.map((e) => e.id)).toEqual(['r-1', 'r-2']);
  });

  it('fills a missing date with now and keeps a given one, leaving the input alone', () => {
    const existing: Entry[] = [{ type: 'episode', id: 'old' }];
    const added: Entry[] = [
      { type: 'episode', id: 'a' },
      { type: 'episode', id: 'b', date: '2025-05-05' },
      { type: 'episode', id: 'c', date: '' },
    ];
    const out = appendMergedFrom(existing, added, now);
    expect(out).toEqual([
      { type: 'episode', id: 'old' },
      { type: 'episode', id: 'a', date: '2026-03-04T05:06:07.890Z' },
      { type: 'episode', id: 'b', date: '2025-05-05' },
      { type: 'episode', id: 'c', date: '2026-03-04T05:06:07.890Z' },
    ]);
    expect(existing).toEqual([{ type: 'episode', id: 'old' }]);
    expect(added[0]).toEqual({ type: 'episode', id: 'a' });
    expect(out).not.toBe(existing);
  });
});

// ---------------------------------------------------------------------------------------------
// X-Provenance

describe('parseProvenanceHeader', () => {
  const headerCases = kiwifsCases<{
    header_parse_cases: Array<{
      name: string;
      x_provenance: string;
      expect: { ok: boolean; derived_from_entry?: { type: string; id: string } };
    }>;
  }>('kiwifs-provenance-cases.json').header_parse_cases;

  it('has KiwiFS cases to check', () => {
    expect(headerCases.length).toBeGreaterThanOrEqual(7);
  });

  it.each(headerCases)('$name: $x_provenance', ({ x_provenance, expect: want }) => {
    const parsed = parseProvenanceHeader(x_provenance);
    if (want.ok) expect(parsed).toEqual(want.derived_from_entry);
    else expect(parsed).toBeUndefined();
  });

  it.each<[string | undefined, { type: string; id: string } | undefined]>([
    [undefined, undefined],
    [':', undefined],
    ['  :  ', undefined],
    ['run', undefined],
    [`${'t'.repeat(128)}:x`, { type: 't'.repeat(128), id: 'x' }],
    [`  ${'t'.repeat(128)}  :x`, { type: 't'.repeat(128), id: 'x' }],
    [`${'t'.repeat(129)}:x`, undefined],
    [`run:${'i'.repeat(1024)}`, { type: 'run', id: 'i'.repeat(1024) }],
    [`run: ${'i'.repeat(1024)} `, { type: 'run', id: 'i'.repeat(1024) }],
    [`run:${'i'.repeat(1025)}`, undefined],
    [`${'t'.repeat(200)}:${'i'.repeat(2000)}`, undefined],
  ])('%j (lengths checked after trimming; over-long is ignored)', (header, expected) => {
    expect(parseProvenanceHeader(header)).toEqual(expected);
  });
});

// ---------------------------------------------------------------------------------------------
// KiwiFS's own cases

interface ClassificationCase {
  name: string;
  fork?: boolean;
  memory_kind: string | null;
  path: string;
  prefix: string | null;
  episodic: boolean;
}

interface ReportCase {
  name: string;
  fork?: boolean;
  episodes_prefix: string | null;
  files: Record<string, string>;
  expect: Record<string, unknown>;
}

/** Frontmatter as KiwiFS reads it: YAML between a first `---` line and the next `---` line. */
function frontmatterOf(text: string): Record<string, unknown> {
  const lines = text.split('\n');
  if (lines[0]?.trimEnd() !== '---') return {};
  const end = lines.findIndex((line, i) => i > 0 && line.trimEnd() === '---');
  if (end < 0) return {};
  const parsed: unknown = YAML.parse(lines.slice(1, end).join('\n'));
  return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
}

/** A file as KiwiFS's processFile/buildEpisodic see it. */
function reportItemOfFile(path: string, text: string): ReportItem {
  const fm = frontmatterOf(text);
  const str = (value: unknown) => (typeof value === 'string' ? value : undefined);
  return {
    path,
    memoryKind: str(fm.memory_kind) ?? null,
    episodeId: str(fm.episode_id)?.trim() || str(fm.id)?.trim() || null,
    mergedFrom: fm['merged-from'],
  };
}

describe('KiwiFS classification cases (kiwifs-kind-cases.json)', () => {
  const cases = kiwifsCases<{ classification_cases: ClassificationCase[] }>('kiwifs-kind-cases.json').classification_cases;

  it('has cases, fork ones included', () => {
    expect(cases.length).toBeGreaterThanOrEqual(13);
    expect(cases.some((c) => c.fork)).toBe(true);
  });

  it.each(cases)('$name → episodic $episodic', (c) => {
    expect(isEpisodic(c.memory_kind, c.path, normalizeEpisodesPrefix(c.prefix))).toBe(c.episodic);
  });
});

describe('KiwiFS report cases (kiwifs-report-cases.json, upstream only)', () => {
  const all = kiwifsCases<ReportCase[]>('kiwifs-report-cases.json');
  const cases = all.filter((c) => c.fork !== true);
  const handled = [
    'episodic_count',
    'merged_from_refs',
    'unmerged_paths',
    'episodic_paths',
    'warnings_count',
    'unmerged_count',
    'unmerged_partial',
  ];

  it('has upstream cases to check', () => {
    expect(cases.length).toBeGreaterThanOrEqual(7);
    expect(all.length).toBeGreaterThan(cases.length);
  });

  it('reads frontmatter the way the cases are written', () => {
    expect(reportItemOfFile('c.md', '---\nmemory_kind: semantic\nmerged-from:\n  - type: episode\n    path: episodes/b.md\n---\n# c\n')).toEqual({
      path: 'c.md',
      memoryKind: 'semantic',
      episodeId: null,
      mergedFrom: [{ type: 'episode', path: 'episodes/b.md' }],
    });
    expect(reportItemOfFile('e.md', '---\nepisode_id: "  "\nid: " x1 "\n---\n')).toMatchObject({ episodeId: 'x1' });
    expect(reportItemOfFile('i.md', '# Index\n\n---\nmemory_kind: episodic\n---\n')).toMatchObject({ memoryKind: null, episodeId: null });
  });

  it.each(cases)('$name', (c) => {
    const items = Object.entries(c.files)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([path, text]) => reportItemOfFile(path, text));
    const report = buildReport(items, { prefix: c.episodes_prefix });
    let checked = 0;
    for (const [key, want] of Object.entries(c.expect)) {
      if (want === null) continue;
      expect(handled, `expectation ${key} of ${c.name} is not checked by this test`).toContain(key);
      checked++;
      switch (key) {
        case 'episodic_count':
          expect(report.episodic_count).toBe(want);
          break;
        case 'merged_from_refs':
          expect(report.merged_from_refs).toBe(want);
          break;
        case 'unmerged_paths':
          expect(report.unmerged.map((e) => e.path)).toEqual(want);
          break;
        case 'episodic_paths':
          expect(report.episodic_files.map((e) => e.path)).toEqual(want);
          break;
        case 'warnings_count':
          expect(report.warnings ?? []).toHaveLength(want as number);
          break;
        case 'unmerged_count':
          expect(report.unmerged_count).toBe(want);
          expect(report.unmerged).toHaveLength(want as number);
          break;
        case 'unmerged_partial':
          expect(report.unmerged).toHaveLength((want as unknown[]).length);
          expect(report.unmerged).toMatchObject(want as object[]);
          break;
      }
    }
    expect(checked).toBeGreaterThan(0);
  });
});
