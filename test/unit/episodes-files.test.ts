import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildReport } from '../../src/kiwifs/coverage.ts';
import { draftFact } from '../../src/kiwifs/facts-from-files.ts';
import {
  assertKnowledgeRoot,
  KnowledgeFolderError,
  parseKnowledgeFile,
  readFrontmatter,
  readReportItems,
  reportItemOf,
  reportWarningOf,
  resolveEpisodesPrefix,
  walkKnowledgeFiles,
} from '../../src/kiwifs/files.ts';

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'mnemo-files-'));
});
afterEach(() => rm(root, { recursive: true, force: true }));

async function write(files: Record<string, string>): Promise<void> {
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  }
}

async function walk(): Promise<string[]> {
  const paths: string[] = [];
  for await (const path of walkKnowledgeFiles(root)) paths.push(path);
  return paths;
}

describe('parseKnowledgeFile', () => {
  it('splits a --- YAML block from the body', () => {
    expect(parseKnowledgeFile('---\nmemory_kind: episodic\ntags: [a, b]\n---\n# run\n\ntext\n')).toEqual({
      frontmatter: { memory_kind: 'episodic', tags: ['a', 'b'] },
      body: '# run\n\ntext\n',
    });
  });

  it('sees no frontmatter unless the very first line is ---', () => {
    expect(parseKnowledgeFile('# title\n---\na: 1\n---\n')).toEqual({ frontmatter: null, body: '# title\n---\na: 1\n---\n' });
    expect(parseKnowledgeFile('\n---\na: 1\n---\n').frontmatter).toBeNull();
    expect(parseKnowledgeFile('--- \na: 1\n---\nbody').frontmatter).toEqual({ a: 1 });
    // Only three dashes delimit (KiwiFS's SplitFrontmatter; goldmark-meta would also take ----).
    expect(parseKnowledgeFile('----\na: 1\n----\n').frontmatter).toBeNull();
    expect(parseKnowledgeFile('---').frontmatter).toBeNull();
    expect(parseKnowledgeFile('').frontmatter).toBeNull();
  });

  it('needs a closing --- line, which may be the last line without a newline', () => {
    expect(parseKnowledgeFile('---\na: 1\nb: 2\n')).toEqual({ frontmatter: null, body: '---\na: 1\nb: 2\n' });
    expect(parseKnowledgeFile('---\na: 1\n---')).toEqual({ frontmatter: { a: 1 }, body: '' });
    // Only a line that is --- closes it, not one that holds --- among other text.
    expect(parseKnowledgeFile('---\ntitle: |\n  --- not a close\n---\nbody')).toEqual({
      frontmatter: { title: '--- not a close\n' },
      body: 'body',
    });
  });

  it('reads CRLF files and a leading byte-order mark', () => {
    expect(parseKnowledgeFile('---\r\nepisode_id: run-1\r\n---\r\nbody\r\n')).toEqual({
      frontmatter: { episode_id: 'run-1' },
      body: 'body\r\n',
    });
    expect(parseKnowledgeFile('\uFEFF---\nid: x\n---\n').frontmatter).toEqual({ id: 'x' });
  });

  it('an empty block is an empty mapping', () => {
    expect(parseKnowledgeFile('---\n---\nbody')).toEqual({ frontmatter: {}, body: 'body' });
    expect(parseKnowledgeFile('---\n# only a comment\n---\nbody').frontmatter).toEqual({});
  });

  it('YAML that does not parse, or is not a mapping, is no frontmatter (as KiwiFS ignores the error)', () => {
    const broken = '---\nmemory_kind: [episodic\n---\nbody\n';
    const parsed = parseKnowledgeFile(broken);
    expect(parsed.frontmatter).toBeNull();
    expect(parsed.body).toBe(broken);
    expect(parsed.yamlError).toMatch(/\S/);
    expect(parseKnowledgeFile('---\n- a\n- b\n---\n')).toMatchObject({ frontmatter: null, yamlError: expect.stringMatching(/mapping/) });
    expect(parseKnowledgeFile('---\njust text\n---\n')).toMatchObject({ frontmatter: null });
    expect(parseKnowledgeFile('---\na: *missing\n---\n')).toMatchObject({ frontmatter: null });
  });

  it('reads values as yaml.v2 hands them to KiwiFS: last duplicate wins, dates and yes stay strings, numbers are numbers', () => {
    expect(parseKnowledgeFile('---\nepisode_id: a\nepisode_id: b\n---\n').frontmatter).toEqual({ episode_id: 'b' });
    expect(parseKnowledgeFile('---\ndate: 2024-01-01\nflag: yes\nepisode_id: 42\n---\n').frontmatter).toEqual({
      date: '2024-01-01',
      flag: 'yes',
      episode_id: 42,
    });
    expect(parseKnowledgeFile('---\nbase: &b {type: episode}\nmerged-from:\n  - <<: *b\n    id: r1\n---\n').frontmatter).toMatchObject({
      'merged-from': [{ type: 'episode', id: 'r1' }],
    });
  });
});

describe('readFrontmatter', () => {
  it('agrees with the whole-file parse, across read chunks and multi-byte characters', async () => {
    const long = 'é'.repeat(40_000); // 80 000 bytes: the block spans more than one 64 KiB read
    const cases: Record<string, string> = {
      'small.md': '---\nepisode_id: run-1\n---\nbody',
      'big-body.md': `---\nmemory_kind: episodic\n---\n${'x'.repeat(300_000)}`,
      'big-block.md': `---\nnote: ${long}\nepisode_id: après\n---\nbody`,
      'none.md': `# title\n${'y'.repeat(100_000)}`,
      'unterminated.md': `---\na: 1\n${'z: 2\n'.repeat(20_000)}`,
      'broken.md': '---\na: [\n---\n',
      'no-newline.md': '---\na: 1\n---',
      'empty.md': '',
    };
    await write(cases);
    for (const [path, text] of Object.entries(cases)) {
      const { frontmatter, yamlError } = parseKnowledgeFile(text);
      expect(await readFrontmatter(join(root, path)), path).toEqual(yamlError === undefined ? { frontmatter } : { frontmatter, yamlError });
    }
    expect(await readFrontmatter(join(root, 'big-block.md'))).toEqual({ frontmatter: { note: long, episode_id: 'après' } });
    expect((await readFrontmatter(join(root, 'broken.md'))).yamlError).toMatch(/\S/);
  });
});

describe('reportItemOf', () => {
  it('maps memory_kind raw, episode_id trimmed, merged-from raw', () => {
    const mergedFrom = { type: 'episode', id: 'r1' };
    expect(reportItemOf('x.md', { memory_kind: ' Episodic ', episode_id: '  run-1 ', 'merged-from': mergedFrom })).toEqual({
      path: 'x.md',
      memoryKind: ' Episodic ',
      episodeId: 'run-1',
      mergedFrom,
    });
  });

  it('falls back to a string id when episode_id is missing, blank or not a string', () => {
    expect(reportItemOf('x.md', { id: ' page-7 ' }).episodeId).toBe('page-7');
    expect(reportItemOf('x.md', { episode_id: '   ', id: 'page-7' }).episodeId).toBe('page-7');
    expect(reportItemOf('x.md', { episode_id: 42, id: 'page-7' }).episodeId).toBe('page-7');
    expect(reportItemOf('x.md', { episode_id: 42, id: 7 }).episodeId).toBeNull();
    expect(reportItemOf('x.md', { memory_kind: 3 }).memoryKind).toBeNull();
  });

  it('a file without frontmatter is a bare path', () => {
    expect(reportItemOf('episodes/a.md', null)).toEqual({ path: 'episodes/a.md', memoryKind: null, episodeId: null, mergedFrom: undefined });
  });
});

describe('walkKnowledgeFiles', () => {
  it('walks directory by directory in name (byte) order, .md files only, skipping dot names', async () => {
    await write({
      'b.md': '',
      'a.md': '',
      'a-b.md': '',
      'A.md': '',
      'a/z.md': '',
      'a/y.txt': '',
      'x.MD': '',
      'notes.txt': '',
      '.hidden.md': '',
      '.kiwi/config.toml': '',
      '.kiwi/k.md': '',
      '.git/g.md': '',
      'sub/.drafts/d.md': '',
      'sub/c.md': '',
      'dir.md/inner.md': '',
      'z.md': '',
      '\uFF61.md': '',
      '\u{1F600}.md': '',
    });
    await symlink(join(root, 'b.md'), join(root, 'link.md'));
    await symlink(join(root, 'sub'), join(root, 'linked-dir'));
    await symlink(join(root, 'missing.md'), join(root, 'dangling.md'));

    // a/ sorts before a-b.md (a shorter name first), a-b.md before a.md ('-' < '.'); ｡ (EF BD A1)
    // before 😀 (F0 …) as bytes, though not as UTF-16.
    expect(await walk()).toEqual(['A.md', 'a/z.md', 'a-b.md', 'a.md', 'b.md', 'dir.md/inner.md', 'link.md', 'sub/c.md', 'z.md', '\uFF61.md', '\u{1F600}.md']);
  });

  it('an empty folder has no files', async () => {
    expect(await walk()).toEqual([]);
  });
});

describe('readReportItems', () => {
  it('gives every file as a report item, in walk order', async () => {
    await write({
      'episodes/b.md': '---\nmemory_kind: episodic\n---\n# no id\n',
      'c.md': '---\nmemory_kind: semantic\nmerged-from:\n  - type: episode\n    path: episodes/b.md\n---\n# c\n',
      'plain.md': '# plain\n',
    });
    const items = [];
    for await (const item of readReportItems(root)) items.push(item);
    expect(items).toEqual([
      { path: 'c.md', memoryKind: 'semantic', episodeId: null, mergedFrom: [{ type: 'episode', path: 'episodes/b.md' }] },
      { path: 'episodes/b.md', memoryKind: 'episodic', episodeId: null, mergedFrom: undefined },
      { path: 'plain.md', memoryKind: null, episodeId: null, mergedFrom: undefined },
    ]);
  });

  it('tells what it cannot count, file by file, and still counts as KiwiFS does', async () => {
    await write({
      'episodes/run-301.md': '---\nmemory_kind: episodic\nepisode_id: run-301\n---\n',
      'episodes/broken.md': '---\nmemory_kind: episodic\nepisode_id: [oops\n---\n',
      'concepts/plain-list.md': '---\nmemory_kind: semantic\nmerged-from: [run-301]\n---\n',
      'concepts/good.md': '---\nmerged-from:\n  - type: run\n    id: run-301\n---\n',
    });
    const warnings: string[] = [];
    const items = [];
    for await (const item of readReportItems(root, (warning) => warnings.push(warning))) items.push(item);
    expect(warnings).toEqual([
      'concepts/plain-list.md: merged-from entry 1 is "run-301", not a mapping; only mappings count as references (e.g. - type: run, id: run-301)',
      expect.stringMatching(/^episodes\/broken\.md: the frontmatter is not valid YAML \(.+\); the file counts as having no frontmatter$/),
    ]);
    const report = buildReport(items, { prefix: 'episodes/' });
    expect(report).toMatchObject({ episodic_count: 2, merged_from_refs: 1, unmerged_count: 1 });
  });
});

describe('reportWarningOf', () => {
  const warningOf = (path: string, text: string) => reportWarningOf(path, parseKnowledgeFile(text));

  it('names a file whose frontmatter is not a YAML mapping, in the words mnemo import uses', () => {
    const warning = warningOf('episodes/broken.md', '---\nmemory_kind: episodic\ntitle: [oops\n---\nbody\n');
    expect(warning).toMatch(/^episodes\/broken\.md: the frontmatter is not valid YAML \(.+\); the file counts as having no frontmatter$/);
    const imported = draftFact('episodes/broken.md', parseKnowledgeFile('---\nmemory_kind: episodic\ntitle: [oops\n---\nbody\n'), 'episodes/');
    expect(imported.warnings[0]!.split(';')[0]).toBe(warning!.split(';')[0]);
    expect(warningOf('list.md', '---\n- a\n- b\n---\n')).toBe('list.md: the frontmatter is not valid YAML (frontmatter is not a mapping of keys to values); the file counts as having no frontmatter');
  });

  it('names merged-from entries that are not mappings, one line for the file', () => {
    expect(warningOf('concepts/c.md', '---\nmerged-from: [run-301]\n---\n')).toBe(
      'concepts/c.md: merged-from entry 1 is "run-301", not a mapping; only mappings count as references (e.g. - type: run, id: run-301)',
    );
    expect(warningOf('concepts/c.md', '---\nmerged-from:\n  - type: run\n    id: r1\n  - run-2\n  - [x]\n  - 7\n---\n')).toBe(
      'concepts/c.md: merged-from entry 2 is "run-2", not a mapping; merged-from entry 3 is a list, not a mapping; merged-from entry 4 is a number, not a mapping; ' +
        'only mappings count as references (e.g. - type: run, id: run-301)',
    );
    expect(warningOf('concepts/c.md', '---\nmerged-from: 42\n---\n')).toBe('concepts/c.md: merged-from is a number, not a list of entries; it counts as no reference');
    // The same phrase as mnemo import's.
    const imported = draftFact('concepts/c.md', parseKnowledgeFile('---\nmerged-from: [run-301]\n---\n'), 'episodes/');
    expect(imported.warnings).toContain('concepts/c.md: merged-from entry 1 is "run-301", not a mapping; dropped');
  });

  it('says nothing of what KiwiFS counts: mappings (even without a type), null entries, a single mapping, no merged-from', () => {
    for (const text of [
      '---\nmerged-from:\n  - type: run\n    id: r1\n  - id: no-type\n  -\n---\n',
      '---\nmerged-from:\n  type: session\n  id: s-9\n---\n',
      '---\nmerged-from:\n---\n',
      '---\ntitle: t\n---\n',
      '# no frontmatter\n',
    ]) {
      expect(warningOf('x.md', text), text).toBeUndefined();
    }
  });
});

describe('resolveEpisodesPrefix', () => {
  const config = (text: string) => write({ '.kiwi/config.toml': text });

  it('is the default with no config file', async () => {
    expect(await resolveEpisodesPrefix(root)).toEqual({ prefix: 'episodes/', source: 'default' });
  });

  it('takes [memory] episodes_path_prefix, with or without a trailing slash', async () => {
    await config('[memory]\nepisodes_path_prefix = "raw/"\n');
    expect(await resolveEpisodesPrefix(root)).toEqual({ prefix: 'raw/', source: 'config' });
    await config('[search]\nengine = "sqlite"\n\n[memory]\nepisodes_path_prefix = "logs\\\\runs"\n');
    expect(await resolveEpisodesPrefix(root)).toEqual({ prefix: 'logs/runs/', source: 'config' });
  });

  it('the flag wins over the config, with or without a trailing slash; an empty flag is no flag', async () => {
    await config('[memory]\nepisodes_path_prefix = "raw/"\n');
    expect(await resolveEpisodesPrefix(root, 'sessions')).toEqual({ prefix: 'sessions/', source: 'flag' });
    expect(await resolveEpisodesPrefix(root, 'sessions/')).toEqual({ prefix: 'sessions/', source: 'flag' });
    expect(await resolveEpisodesPrefix(root, '')).toEqual({ prefix: 'raw/', source: 'config' });
  });

  it('is the default when the config has no [memory] prefix or an empty one', async () => {
    await config('[search]\nengine = "sqlite"\n[versioning]\nstrategy = "none"\n');
    expect(await resolveEpisodesPrefix(root)).toEqual({ prefix: 'episodes/', source: 'default' });
    await config('[memory]\nepisodes_path_prefix = ""\n');
    expect(await resolveEpisodesPrefix(root)).toEqual({ prefix: 'episodes/', source: 'default' });
  });

  it('a malformed config is an error naming the file and the place', async () => {
    await config('[memory]\nepisodes_path_prefix = "raw/\n');
    const error = await resolveEpisodesPrefix(root).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KnowledgeFolderError);
    expect((error as Error).message).toMatch(new RegExp(`^${join(root, '.kiwi', 'config.toml').replace(/[.\\]/g, '\\$&')} is not valid TOML at line 2`));
    // The flag wins before the config is read, as in KiwiFS.
    expect(await resolveEpisodesPrefix(root, 'raw/')).toEqual({ prefix: 'raw/', source: 'flag' });
  });

  it('a prefix that is not a string, or a [memory] that is not a table, is an error', async () => {
    await config('[memory]\nepisodes_path_prefix = 5\n');
    await expect(resolveEpisodesPrefix(root)).rejects.toThrow(/episodes_path_prefix must be a string/);
    await config('memory = "episodes/"\n');
    await expect(resolveEpisodesPrefix(root)).rejects.toThrow(/\[memory\] must be a table/);
  });
});

describe('assertKnowledgeRoot', () => {
  it('accepts a directory and refuses a missing path or a file', async () => {
    await write({ 'file.md': '' });
    await expect(assertKnowledgeRoot(root)).resolves.toBeUndefined();
    await expect(assertKnowledgeRoot(join(root, 'nope'))).rejects.toThrow(/nope does not exist$/);
    await expect(assertKnowledgeRoot(join(root, 'file.md'))).rejects.toThrow(/file\.md is not a directory$/);
  });
});
