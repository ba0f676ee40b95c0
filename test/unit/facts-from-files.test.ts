/**
 * src/kiwifs/facts-from-files.ts: what a KiwiFS file becomes as a fact (the rule `mnemo import`
 * writes by; test/e2e/cli-memory.test.ts runs the import itself), and what an import adds to a
 * fact's merged-from.
 */
import { describe, expect, it } from 'vitest';
import { draftFact, mergedFromChanges } from '../../src/kiwifs/facts-from-files.ts';
import { parseKnowledgeFile } from '../../src/kiwifs/files.ts';

describe('draftFact: what a file becomes', () => {
  const draft = (path: string, text: string, prefix = 'episodes/') => draftFact(path, parseKnowledgeFile(text), prefix);

  it('carries memory_kind (lowercased), episode_id and merged-from into fields; the rest stays in content.frontmatter', () => {
    const { draft: d, warnings } = draft(
      'concepts/x.md',
      '---\nmemory_kind: " Semantic "\nepisode_id: " ep-1 "\ntitle: X\ntags: [a]\nmerged-from:\n  - type: episode\n    id: run-1\n    date: "2026-01-01"\n---\n# X\n',
    );
    expect(warnings).toEqual([]);
    expect(d).toEqual({
      path: 'concepts/x.md',
      memoryKind: 'semantic',
      episodeId: 'ep-1',
      mergedFrom: [{ type: 'episode', id: 'run-1', date: '2026-01-01' }],
      content: { text: '# X\n', frontmatter: { title: 'X', tags: ['a'] } },
    });
  });

  it('a single merged-from entry becomes a list; entries the API refuses are dropped with a warning naming the file', () => {
    expect(draft('a.md', '---\nmerged-from:\n  type: session\n  id: s-1\n---\n').draft.mergedFrom).toEqual([{ type: 'session', id: 's-1' }]);

    const { draft: d, warnings } = draft(
      'c.md',
      '---\nmerged-from:\n  - {id: x}\n  - {type: episode}\n  - {type: "  ", path: a.md}\n  - plain string\n  - {type: page, path: p.md, reviewer: bob}\n  - {type: episode, id: 7, path: e.md}\n---\nbody',
    );
    expect(d.mergedFrom).toEqual([
      { type: 'page', path: 'p.md' },
      { type: 'episode', path: 'e.md' },
    ]);
    expect(warnings).toEqual([
      'c.md: merged-from entry 1 has no type; dropped (the API refuses it)',
      'c.md: merged-from entry 2 has neither an id nor a path; dropped (the API refuses it)',
      'c.md: merged-from entry 3 has no type; dropped (the API refuses it)',
      'c.md: merged-from entry 4 is "plain string", not a mapping; dropped',
      'c.md: merged-from entry 5: field "reviewer" is not one of type, id, path, date, actor, note; dropped',
      'c.md: merged-from entry 6: id is a number, not a string; dropped',
      'c.md: merged-from is kept whole in content.frontmatter',
    ]);
    // Nothing is lost: the list as written stays in the content.
    expect(d.content.frontmatter?.['merged-from']).toHaveLength(6);
  });

  it('leaves out a memory_kind outside the four, with a warning, and keeps it in the content', () => {
    const { draft: d, warnings } = draft('n.md', '---\nmemory_kind: dream\n---\nbody');
    expect(d.memoryKind).toBeUndefined();
    expect(d.content.frontmatter).toEqual({ memory_kind: 'dream' });
    expect(warnings).toEqual(['n.md: memory_kind "dream" is not one of episodic, semantic, consolidation, working; left out (kept in content.frontmatter)']);
  });

  it('a blank memory_kind or episode_id is no value: no field, no warning, kept in the content', () => {
    const { draft: d, warnings } = draft('notes/b.md', '---\nmemory_kind: ""\nepisode_id: "  "\n---\n');
    expect(warnings).toEqual([]);
    expect(d).toMatchObject({ content: { frontmatter: { memory_kind: '', episode_id: '  ' } } });
    expect(d).not.toHaveProperty('memoryKind');
    expect(d).not.toHaveProperty('episodeId');
    expect(draft('notes/b.md', '---\nepisode_id: 42\n---\n').warnings).toEqual(['notes/b.md: episode_id is a number, not a string; left out (kept in content.frontmatter)']);
  });

  it('names an episodic file without episode_id by its id, as the folder report does', () => {
    expect(draft('episodes/r.md', '---\nid: " run-2 "\n---\n').draft).toMatchObject({ episodeId: 'run-2', content: { frontmatter: { id: ' run-2 ' } } });
    expect(draft('notes/r.md', '---\nid: run-2\n---\n').draft.episodeId).toBeUndefined();
    expect(draft('notes/r.md', '---\nmemory_kind: episodic\nid: run-2\n---\n').draft.episodeId).toBe('run-2');
    expect(draft('raw/r.md', '---\nid: run-2\n---\n', 'raw/').draft.episodeId).toBe('run-2');
  });

  it('a file without frontmatter, or with broken YAML, is all text', () => {
    expect(draft('p.md', '# plain\n')).toEqual({ draft: { path: 'p.md', content: { text: '# plain\n' }, mergedFrom: [] }, warnings: [] });
    const broken = draft('b.md', '---\ntitle: [oops\n---\nbody\n');
    expect(broken.draft.content).toEqual({ text: '---\ntitle: [oops\n---\nbody\n' });
    expect(broken.warnings).toEqual([expect.stringMatching(/^b\.md: the frontmatter is not valid YAML \(.+\); the whole file is imported as text$/)]);
  });
});

describe('mergedFromChanges', () => {
  it('adds what the file lists and the fact lacks, once each and in the file\'s order, matching entries by coverage key', () => {
    const fact = [{ type: 'episode', id: 'run-1' }, { type: 'page', path: 'a.md' }];
    const file = [
      { type: ' Episode ', id: ' run-1 ', note: 'the key of the fact\'s first entry' },
      { type: 'episode', id: 'run-2' },
      { type: 'page', path: '/a.md/' },
      { type: 'episode', id: 'run-2', date: '2026-01-01' },
      { type: 'session', id: 's-1' },
    ];
    expect(mergedFromChanges(fact, file)).toEqual({ missing: [{ type: 'episode', id: 'run-2' }, { type: 'session', id: 's-1' }], stale: 0 });
  });

  it('counts the entries the fact keeps that the file no longer lists', () => {
    const fact = [{ type: 'episode', id: 'run-1' }, { type: 'episode', id: 'run-2' }, { type: 'page', path: 'p.md' }];
    expect(mergedFromChanges(fact, [{ type: 'episode', id: 'run-2' }])).toEqual({ missing: [], stale: 2 });
    expect(mergedFromChanges([], [])).toEqual({ missing: [], stale: 0 });
  });
});
