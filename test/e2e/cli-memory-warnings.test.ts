/**
 * `mnemo memory report` run as an operator runs it (the real bin, as a child process) over a
 * folder with a broken frontmatter and a merged-from written as a plain list: one warning line per
 * such file on stderr, the counts still KiwiFS's, the exit code 0.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CoverageReport } from '../../src/kiwifs/coverage.ts';
import { runProcess } from '../helpers/process.ts';

const files: Record<string, string> = {
  'episodes/run-301.md': '---\nmemory_kind: episodic\nepisode_id: run-301\n---\n# Run 301\n',
  'episodes/run-302.md': '---\nmemory_kind: episodic\nepisode_id: run-302\n---\n# Run 302\n',
  'episodes/broken.md': '---\nmemory_kind: episodic\nepisode_id: "run-303\n---\n# Run 303, unclosed quote\n',
  'concepts/plain-list.md': '---\nmemory_kind: semantic\nmerged-from: [run-301]\n---\n# Written as a plain list\n',
  'concepts/merged.md': '---\nmemory_kind: semantic\nmerged-from:\n  - type: run\n    id: run-302\n---\n# Merged\n',
};

describe('mnemo memory report warnings', () => {
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'mnemo-report-warnings-'));
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('warns once per file it cannot fully count and keeps counting as KiwiFS does', async () => {
    const result = await runProcess('bin/mnemo.js', ['memory', 'report', '--root', root, '--json'], {});
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'warning: concepts/plain-list.md: merged-from entry 1 is "run-301", not a mapping; only mappings count as references (e.g. - type: run, id: run-301)',
      expect.stringMatching(/^warning: episodes\/broken\.md: the frontmatter is not valid YAML \(.+\); the file counts as having no frontmatter$/),
    ]);
    const report = JSON.parse(result.stdout) as CoverageReport;
    // broken.md has no frontmatter for KiwiFS, but sits under episodes/: episodic, with no id.
    expect(report).toMatchObject({ episodic_count: 3, merged_from_refs: 1, unmerged_count: 2 });
    expect(report.unmerged.map((e) => e.path)).toEqual(['episodes/broken.md', 'episodes/run-301.md']);

    // The table for people warns the same way.
    const table = await runProcess('bin/mnemo.js', ['memory', 'report', '--root', root], {});
    expect(table.code).toBe(0);
    expect(table.stderr).toBe(result.stderr);
  });
});
