/**
 * The `mnemo memory report` and `mnemo import` commands, run as operators run them (the real
 * bin, as a child process): KiwiFS's own report cases over a folder, the table, the prefix from
 * `.kiwi/config.toml`, the error exits; and an import into the real API, run again (nothing
 * changes), then after a file changed (a supersede).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildReport, type CoverageReport, type ReportItem } from '../../src/kiwifs/coverage.ts';
import { readReportItems, resolveEpisodesPrefix } from '../../src/kiwifs/files.ts';
import { startTestApi, type TestApi } from '../helpers/api.ts';
import { kiwifsCases } from '../helpers/fixtures.ts';
import { freePort } from '../../support/ports.ts';
import { runProcess } from '../helpers/process.ts';
import { sleep } from '../../support/wait.ts';

interface KiwiCase {
  name: string;
  fork?: boolean;
  episodes_prefix: string | null;
  files: Record<string, string>;
  non_markdown_files?: Record<string, string>;
  expect: {
    episodic_count: number | null;
    merged_from_refs: number | null;
    unmerged_paths: string[] | null;
    episodic_paths: string[] | null;
    warnings_count: number | null;
    unmerged_count?: number | null;
    unmerged_partial?: Record<string, unknown>[] | null;
  };
}

const kiwiCases = kiwifsCases<KiwiCase[]>('kiwifs-report-cases.json').filter((c) => !c.fork);

const temps: string[] = [];

async function folder(files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'mnemo-cli-'));
  temps.push(root);
  await writeFiles(root, files);
  return root;
}

async function writeFiles(root: string, files: Record<string, string>): Promise<void> {
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  }
}

const mnemo = (...args: string[]) => runProcess('bin/mnemo.js', args, {});

async function reportJson(...args: string[]): Promise<CoverageReport> {
  const result = await mnemo('memory', 'report', '--json', ...args);
  if (result.code !== 0 || result.stderr !== '') throw new Error(`mnemo memory report exited ${result.code}: ${result.stderr}`);
  return JSON.parse(result.stdout) as CoverageReport;
}

afterAll(async () => {
  await Promise.all(temps.map((root) => rm(root, { recursive: true, force: true })));
});

describe('mnemo memory report', () => {
  it('has KiwiFS cases to run', () => {
    expect(kiwiCases.length).toBeGreaterThanOrEqual(6);
  });

  /**
   * The report of a case's folder: the first case through the real bin, the others in this
   * process by what the command runs (readReportItems, then buildReport; the next test holds
   * `--json` to exactly that), as a process start costs more than the whole report.
   */
  const folderReport = async (root: string, episodesPrefix: string | null, viaBin: boolean): Promise<CoverageReport> => {
    if (viaBin) return reportJson('--root', root, ...(episodesPrefix ? ['--episodes-prefix', episodesPrefix] : []));
    const { prefix } = await resolveEpisodesPrefix(root, episodesPrefix ?? undefined);
    const items: ReportItem[] = [];
    for await (const item of readReportItems(root)) items.push(item);
    return buildReport(items, { prefix });
  };

  for (const [index, kiwiCase] of kiwiCases.entries()) {
    it.concurrent(`KiwiFS case ${kiwiCase.name}${index === 0 ? ' (mnemo memory report --json)' : ''}`, async ({ expect }) => {
      const root = await folder({ ...kiwiCase.files, ...kiwiCase.non_markdown_files });
      const report = await folderReport(root, kiwiCase.episodes_prefix, index === 0);
      const want = kiwiCase.expect;
      let checked = 0;
      const check = (expected: unknown, actual: unknown) => {
        if (expected === null || expected === undefined) return;
        expect(actual).toEqual(expected);
        checked++;
      };
      check(want.episodic_count, report.episodic_count);
      check(want.merged_from_refs, report.merged_from_refs);
      check(want.unmerged_paths, report.unmerged.map((e) => e.path));
      check(want.episodic_paths, report.episodic_files.map((e) => e.path));
      check(want.warnings_count, report.warnings?.length ?? 0);
      check(want.unmerged_count, report.unmerged_count);
      if (want.unmerged_partial) {
        expect(report.unmerged).toMatchObject(want.unmerged_partial);
        checked++;
      }
      expect(checked).toBeGreaterThan(0);
    });
  }

  it('--json prints exactly the report buildReport makes of the folder, and nothing else', async () => {
    const root = await folder({
      'episodes/a.md': '---\nmemory_kind: episodic\nepisode_id: run-1\n---\n# a\n',
      'episodes/b.md': '# no frontmatter: episodic by its path, with no id\n',
      'concepts/x.md': '---\nmemory_kind: semantic\nmerged-from:\n  type: run\n  id: run-1\n---\n# x\n',
      'concepts/y.md': '---\nmerged-from: just a string\n---\n',
    });
    const result = await mnemo('memory', 'report', '--root', root, '--json');
    expect(result.code).toBe(0);
    const items: ReportItem[] = [];
    for await (const item of readReportItems(root)) items.push(item);
    expect(JSON.parse(result.stdout)).toEqual(buildReport(items));
    expect(JSON.parse(result.stdout)).toEqual({
      episodic_count: 2,
      merged_from_refs: 1,
      unmerged_count: 1,
      episodic_files: [{ path: 'episodes/a.md', episode_id: 'run-1', memory_kind: 'episodic' }, { path: 'episodes/b.md' }],
      unmerged: [{ path: 'episodes/b.md' }],
      warnings: ['memory: merged-from has unsupported shape', expect.stringMatching(/^missing episode_id in episodes\/b\.md/)],
    });
  });

  it('--limit and --offset cut the lists, never the counts; --limit 0 lists none (as the API)', async () => {
    const files: Record<string, string> = {};
    for (const n of [1, 2, 3, 4, 5]) files[`episodes/e${n}.md`] = `---\nepisode_id: ep-${n}\n---\n`;
    const root = await folder(files);
    const page = await reportJson('--root', root, '--limit', '2', '--offset', '1');
    expect(page).toMatchObject({ episodic_count: 5, unmerged_count: 5 });
    expect(page.episodic_files.map((e) => e.episode_id)).toEqual(['ep-2', 'ep-3']);
    expect(page.unmerged.map((e) => e.episode_id)).toEqual(['ep-2', 'ep-3']);
    const [all, none, beyond] = await Promise.all([
      reportJson('--root', root),
      reportJson('--root', root, '--limit', '0'),
      reportJson('--root', root, '--offset', '9'),
    ]);
    expect(all.unmerged).toHaveLength(5);
    expect(none).toMatchObject({ episodic_count: 5, unmerged_count: 5, episodic_files: [], unmerged: [] });
    expect(beyond).toMatchObject({ episodic_count: 5, unmerged_count: 5, episodic_files: [], unmerged: [] });
  });

  it('prints a table for people: counts, then the unmerged episodes, then warnings', async () => {
    const root = await folder({
      'episodes/merged.md': '---\nepisode_id: run-1\n---\n',
      'episodes/open.md': '---\nepisode_id: run-2\n---\n',
      'episodes/anonymous.md': '# no id\n',
      'summary.md': '---\nmemory_kind: semantic\nmerged-from:\n  - type: episode\n    id: run-1\n---\n',
    });
    const result = await mnemo('memory', 'report', '--root', root);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    const out = result.stdout;
    expect(out).toMatch(/^episodic files: +3\nmerged-from references: +1\nunmerged \(no merged-from\): +2\nepisodes prefix: +episodes\/ \(default\)\n/);
    expect(out).toMatch(/Unmerged episodes \(2\):\n {2}PATH +EPISODE ID\n {2}episodes\/anonymous\.md +\(none: set episode_id\)\n {2}episodes\/open\.md +run-2\n/);
    expect(out).not.toContain('episodes/merged.md');
    expect(out).toMatch(/\nWarnings \(1\):\n {2}missing episode_id in episodes\/anonymous\.md .*\n$/);
    expect(out.indexOf('Unmerged episodes')).toBeLessThan(out.indexOf('Warnings'));
  });

  it('takes the episodes prefix from .kiwi/config.toml, and --episodes-prefix over it', async () => {
    const root = await folder({
      '.kiwi/config.toml': '[search]\nengine = "sqlite"\n\n[memory]\nepisodes_path_prefix = "raw"\n',
      '.kiwi/templates/t.md': '---\nmemory_kind: episodic\n---\n',
      'raw/z.md': '---\nepisode_id: z1\n---\n# z\n',
      'episodes/e.md': '---\nepisode_id: e1\n---\n# e\n',
    });
    const fromConfig = await reportJson('--root', root);
    expect(fromConfig).toMatchObject({ episodic_count: 1, unmerged: [{ path: 'raw/z.md', episode_id: 'z1' }] });
    const fromFlag = await reportJson('--root', root, '--episodes-prefix', 'episodes/');
    expect(fromFlag).toMatchObject({ episodic_count: 1, unmerged: [{ path: 'episodes/e.md', episode_id: 'e1' }] });

    const table = await mnemo('memory', 'report', '--root', root);
    expect(table.stdout).toContain(`episodes prefix:            raw/ (${join(root, '.kiwi', 'config.toml')})`);
  });

  it('refuses what it cannot run with one line and exit code 2', async () => {
    const root = await folder({ 'a.md': '' });
    const broken = await folder({ '.kiwi/config.toml': '[memory]\nepisodes_path_prefix = "raw\n' });
    const cases: [string[], RegExp][] = [
      [['memory', 'report'], /^mnemo memory report: --root is required/],
      [['memory', 'report', '--root', join(root, 'missing')], /^mnemo memory report: .*missing does not exist$/],
      [['memory', 'report', '--root', join(root, 'a.md')], /^mnemo memory report: .*a\.md is not a directory$/],
      [['memory', 'report', '--root', root, '--limit', '-1'], /^mnemo memory report: --limit must be a whole number, 0 or more \(got "-1"\)$/],
      [['memory', 'report', '--root', root, '--offset', '1.5'], /^mnemo memory report: --offset must be a whole number/],
      [['memory', 'report', '--root', root, '--limit', 'ten'], /^mnemo memory report: --limit must be a whole number/],
      [['memory', 'report', '--root', broken], /^mnemo memory report: .*\.kiwi\/config\.toml is not valid TOML at line 2/],
      [['memory', 'summary'], /^mnemo memory: unknown subcommand "summary"/],
    ];
    const results = await Promise.all(cases.map(([args]) => mnemo(...args)));
    cases.forEach(([args, message], i) => {
      const result = results[i]!;
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(result.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stderr.trimEnd(), args.join(' ')).toMatch(message);
    });
  });

  it('is listed in mnemo help', async () => {
    const result = await mnemo('help');
    expect(result.stdout).toMatch(/\n {2}memory report {9}/);
    expect(result.stdout).toMatch(/\n {2}import {16}/);
  });
});

describe('mnemo import', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi({ worker: true });
  });
  afterAll(() => api.close());

  const fixture: Record<string, string> = {
    '.kiwi/config.toml': '[search]\nengine = "sqlite"\n',
    '.kiwi/ignored.md': '---\nmemory_kind: episodic\n---\n',
    'episodes/run-1.md': '---\nmemory_kind: Episodic\nepisode_id: " run-1 "\ntags: [deploy]\n---\n# Run 1\n\nDeployed.\n',
    'episodes/run-2.md': '---\nid: run-2\n---\n# Run 2\n',
    'episodes/run-3.md': '---\nmemory_kind: episodic\n---\n# Run 3, no id\n',
    'concepts/deploys.md':
      '---\nmemory_kind: semantic\ntitle: Deploys\nmerged-from:\n  - type: episode\n    id: run-1\n  - type: run\n    id: run-2\n    note: by run id\n  - id: no-type\n---\n# Deploys\n\nWe deploy on Fridays.\n',
    'concepts/single.md': '---\nmemory_kind: semantic\nmerged-from:\n  type: session\n  id: s-9\n---\n# Single\n',
    'notes/plain.md': '# Plain\n\nNo frontmatter.\n',
    'notes/odd.md': '---\nmemory_kind: dream\n---\nodd\n',
  };
  const paths = ['concepts/deploys.md', 'concepts/single.md', 'episodes/run-1.md', 'episodes/run-2.md', 'episodes/run-3.md', 'notes/odd.md', 'notes/plain.md'];

  async function factAt(token: string, path: string) {
    const response = await api.request('GET', `/v1/memory/facts?path=${encodeURIComponent(path)}&limit=100`, { token });
    expect(response.status).toBe(200);
    expect(response.body.data, path).toHaveLength(1);
    return response.body.data[0];
  }

  const importFolder = (root: string, token: string, ...args: string[]) => mnemo('import', '--root', root, '--url', api.baseUrl, '--token', token, ...args);

  it('loads every markdown file as a fact; a second run changes nothing; a changed file is superseded', async () => {
    const { tenantId, admin } = await api.newTenant('import');
    const root = await folder(fixture);

    const first = await importFolder(root, admin);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe('created 7 / updated 0 / unchanged 0 / failed 0\n');
    expect(first.stderr).toContain('warning: concepts/deploys.md: merged-from entry 3 has no type; dropped (the API refuses it)');
    expect(first.stderr).toContain('warning: notes/odd.md: memory_kind "dream" is not one of');

    const all = await api.request('GET', '/v1/memory/facts?limit=100', { token: admin });
    expect(all.body.data.map((f: { path: string }) => f.path).sort()).toEqual(paths);
    // The new files went in one batch, not a request each.
    const writes = api.logs
      .map((line) => JSON.parse(line))
      .filter((entry) => entry.msg === 'request' && entry.tenant === tenantId && entry.method === 'POST');
    expect(writes.map((entry) => `${entry.path} ${entry.status}`)).toEqual(['/v1/memory/facts:batch 201']);

    expect(await factAt(admin, 'episodes/run-1.md')).toMatchObject({
      version: 1,
      type: 'kiwi.page',
      scope: { tenantId },
      memoryKind: 'episodic',
      episodeId: 'run-1',
      mergedFrom: [],
      content: { text: '# Run 1\n\nDeployed.\n', frontmatter: { tags: ['deploy'] } },
    });
    expect(await factAt(admin, 'episodes/run-2.md')).toMatchObject({ memoryKind: null, episodeId: 'run-2', content: { frontmatter: { id: 'run-2' } } });
    const deploys = await factAt(admin, 'concepts/deploys.md');
    expect(deploys).toMatchObject({
      memoryKind: 'semantic',
      episodeId: null,
      content: { text: '# Deploys\n\nWe deploy on Fridays.\n' },
      mergedFrom: [
        { type: 'episode', id: 'run-1' },
        { type: 'run', id: 'run-2', note: 'by run id' },
      ],
    });
    // Dropped in part: the list as written stays in the content.
    expect(deploys.content.frontmatter).toEqual({ title: 'Deploys', 'merged-from': [{ type: 'episode', id: 'run-1' }, { type: 'run', id: 'run-2', note: 'by run id' }, { id: 'no-type' }] });
    expect((await factAt(admin, 'concepts/single.md')).mergedFrom).toMatchObject([{ type: 'session', id: 's-9' }]);
    expect(await factAt(admin, 'notes/plain.md')).toMatchObject({ memoryKind: null, episodeId: null, content: { text: '# Plain\n\nNo frontmatter.\n' } });
    expect((await factAt(admin, 'notes/plain.md')).content).not.toHaveProperty('frontmatter');
    expect(await factAt(admin, 'notes/odd.md')).toMatchObject({ memoryKind: null, content: { text: 'odd\n', frontmatter: { memory_kind: 'dream' } } });

    // The API's report over the imported facts agrees with the folder's.
    const folderReport = await reportJson('--root', root);
    const apiReport = (await api.request('GET', '/v1/memory/report?limit=100', { token: admin })).body as CoverageReport;
    expect(apiReport.episodic_count).toBe(folderReport.episodic_count);
    expect(apiReport.unmerged.map((e) => e.path)).toEqual(['episodes/run-3.md']);
    expect(folderReport.unmerged.map((e) => e.path)).toEqual(['episodes/run-3.md']);
    expect(apiReport.episodic_files.filter((e) => e.path !== 'episodes/run-3.md').map((e) => [e.path, e.episode_id]).sort()).toEqual(
      folderReport.episodic_files.filter((e) => e.episode_id).map((e) => [e.path, e.episode_id]).sort(),
    );
    // And the background job gives the route's report.
    const queued = await api.request('POST', '/v1/memory/reports', { token: admin, body: { limit: 100 } });
    expect(queued.status).toBe(202);
    let job = queued.body;
    for (let i = 0; i < 200 && job.status !== 'completed' && job.status !== 'failed'; i++) {
      await sleep(50);
      job = (await api.request('GET', `/v1/memory/reports/${queued.body.id}`, { token: admin })).body;
    }
    expect(job.status).toBe('completed');
    expect(job.result).toEqual(apiReport);

    // Again: nothing to write.
    const again = await importFolder(root, admin);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe('created 0 / updated 0 / unchanged 7 / failed 0\n');
    for (const path of paths) {
      const fact = await factAt(admin, path);
      expect(fact.version, path).toBe(1);
      const revisions = await api.request('GET', `/v1/memory/facts/${fact.id}/revisions`, { token: admin });
      expect(revisions.body.data, path).toHaveLength(1);
    }

    // A changed body and a new merged-from entry: one supersede, version 2, the entry added.
    await writeFiles(root, {
      'concepts/deploys.md':
        '---\nmemory_kind: semantic\ntitle: Deploys\nmerged-from:\n  - type: episode\n    id: run-1\n  - type: run\n    id: run-2\n    note: by run id\n  - type: episode\n    path: /episodes/run-3.md/\n---\n# Deploys\n\nWe deploy on Tuesdays now.\n',
    });
    const changed = await importFolder(root, admin);
    expect(changed.code, changed.stderr).toBe(0);
    expect(changed.stdout).toBe('created 0 / updated 1 / unchanged 6 / failed 0\n');
    const superseded = await factAt(admin, 'concepts/deploys.md');
    expect(superseded).toMatchObject({
      id: deploys.id,
      version: 2,
      content: { text: '# Deploys\n\nWe deploy on Tuesdays now.\n', frontmatter: { title: 'Deploys' } },
      mergedFrom: [{ type: 'episode', id: 'run-1' }, { type: 'run', id: 'run-2' }, { type: 'episode', path: '/episodes/run-3.md/' }],
    });
    expect(superseded.content.frontmatter).not.toHaveProperty('merged-from');
    expect((await api.request('GET', `/v1/memory/facts/${deploys.id}/revisions`, { token: admin })).body.data.map((r: { version: number }) => r.version)).toEqual([2, 1]);
    const after = (await api.request('GET', '/v1/memory/report', { token: admin })).body as CoverageReport;
    expect(after.unmerged_count).toBe(0);

    // Once more: stable again.
    expect((await importFolder(root, admin)).stdout).toBe('created 0 / updated 0 / unchanged 7 / failed 0\n');
  });

  it('reports what a supersede cannot change instead of rewriting the fact every run', async () => {
    const { admin } = await api.newTenant('import-fixed');
    const root = await folder({ 'notes/n.md': '# Note\n' });
    expect((await importFolder(root, admin)).stdout).toBe('created 1 / updated 0 / unchanged 0 / failed 0\n');
    await writeFiles(root, { 'notes/n.md': '---\nmemory_kind: semantic\n---\n# Note\n' });
    const result = await importFolder(root, admin, '--type', 'kiwi.note');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('created 0 / updated 0 / unchanged 1 / failed 0\n');
    expect(result.stderr).toMatch(
      /warning: notes\/n\.md: fact \S+ has type "kiwi\.page" \(the import's is "kiwi\.note"\), memoryKind none \(the file's is "semantic"\); a supersede cannot change these/,
    );
    expect((await factAt(admin, 'notes/n.md')).version).toBe(1);
  });

  it('writes a deleted fact again, though the API replays its first write under the same idempotency key', async () => {
    const { admin } = await api.newTenant('import-deleted');
    const root = await folder({ 'notes/n.md': '# Note\n' });
    expect((await importFolder(root, admin)).stdout).toBe('created 1 / updated 0 / unchanged 0 / failed 0\n');
    const first = await factAt(admin, 'notes/n.md');
    expect((await api.request('DELETE', `/v1/memory/facts/${first.id}`, { token: admin })).status).toBe(200);

    const again = await importFolder(root, admin);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe('created 1 / updated 0 / unchanged 0 / failed 0\n');
    const second = await factAt(admin, 'notes/n.md');
    expect(second.id).not.toBe(first.id);
    expect(second).toMatchObject({ version: 1, content: { text: '# Note\n' } });
  });

  it('names each file the API refuses (code and message), imports the rest, and exits 1', async () => {
    const { admin } = await api.newTenant('import-fail');
    const root = await folder({
      'a.md': '# fine\n',
      'big.md': `# big\n${'x'.repeat(70 * 1024)}\n`,
      'long-id.md': `---\nepisode_id: ${'e'.repeat(200)}\n---\n`,
    });
    const result = await importFolder(root, admin);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('created 1 / updated 0 / unchanged 0 / failed 2\n');
    expect(result.stderr).toMatch(/\nfailed: big\.md: bad-input \(400\): content: must be at most 64 KiB serialized \(is \d+ bytes\) \[request [^\]]+\]\n/);
    expect(result.stderr).toMatch(/\nfailed: long-id\.md: bad-input \(400\): episodeId: must be at most 128 characters \[request [^\]]+\]\n {4}episodeId: must be at most 128 characters\n/);
    await factAt(admin, 'a.md');
  });

  it('stops at a refused token, and when the API cannot be reached, with exit code 1', async () => {
    const root = await folder({ 'a.md': '# a\n', 'b.md': '# b\n' });
    const refused = await importFolder(root, 'not-a-token');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/mnemo import: stopped after \d of 2 files: the API refused the token: unauthenticated \(401\): .+\n/);

    const port = await freePort();
    const unreachable = await mnemo('import', '--root', root, '--url', `http://127.0.0.1:${port}`, '--token', 't');
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain(`cannot reach http://127.0.0.1:${port}: ECONNREFUSED`);
    expect(unreachable.stdout).toBe('created 0 / updated 0 / unchanged 0 / failed 0\n');

    // Something else at the URL: one clear stop, not a failure per file.
    const other = createServer((_, response) => {
      response.statusCode = 404;
      response.end('<html>not here</html>');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
      const wrong = await mnemo('import', '--root', root, '--url', otherUrl, '--token', 't');
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain(`mnemo import: stopped after 0 of 2 files: ${otherUrl} refused the lookup GET /v1/memory/facts?path=…: not-found (404): HTTP 404 Not Found, without the Mnemo error envelope: not here\n`);
      expect(wrong.stderr).not.toContain('failed:');
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('refuses a command line it cannot run with exit code 2', async () => {
    const root = await folder({ 'a.md': '' });
    const cases: [string[], RegExp][] = [
      [['import', '--url', api.baseUrl, '--token', 't'], /^mnemo import: --root is required/],
      [['import', '--root', root, '--token', 't'], /^mnemo import: --url is required/],
      [['import', '--root', root, '--url', 'ftp://x', '--token', 't'], /^mnemo import: --url must be an http\(s\) URL/],
      [['import', '--root', root, '--url', api.baseUrl], /^mnemo import: --token is required/],
      [['import', '--root', root, '--url', api.baseUrl, '--token', 't', '--type', 'Not A Type'], /^mnemo import: --type must match/],
      [['import', '--root', join(root, 'missing'), '--url', api.baseUrl, '--token', 't'], /^mnemo import: .*missing does not exist$/],
    ];
    const results = await Promise.all(cases.map(([args]) => mnemo(...args)));
    cases.forEach(([args, message], i) => {
      const result = results[i]!;
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stderr.trimEnd(), args.join(' ')).toMatch(message);
    });
  });
});
