/**
 * How the README test reads shell blocks (readme-script.ts): pure, so in `npm test`, plus one look
 * at the repository (every guide page is in the index the runner takes its order from). The run
 * itself is `npm run test:readme`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../support/processes.ts';
import { actionOf, bashScript, expectationOf, guidePages, pagesInOrder, readmeBlocks, shellBlocks, splitCommands } from './readme-script.ts';

describe('the README test reading shell blocks', () => {
  it('takes only sh blocks, with the line of each fence', () => {
    const markdown = ['# T', '```sh', 'echo a', '```', '```ts', 'const x = 1;', '```', '```', 'plain', '```', '```sh', 'echo b', '```'].join('\n');
    expect(shellBlocks(markdown)).toEqual([
      { line: 2, text: 'echo a', stops: [] },
      { line: 11, text: 'echo b', stops: [] },
    ]);
  });

  it('reads a fence indented in a list item, and nothing inside other fences', () => {
    const markdown = [
      '1. **Export**:',
      '',
      '   ```sh',
      '   npx mnemo export --out f.jsonl',
      '     # indented further',
      '   ```',
      '````text',
      '```sh',
      'not a command',
      '```',
      '````',
    ].join('\n');
    expect(shellBlocks(markdown)).toEqual([{ line: 3, text: 'npx mnemo export --out f.jsonl\n  # indented further', stops: [] }]);
  });

  it('takes a stop line as the reader stopping a process before the next shell block', () => {
    const markdown = ['```sh', 'npm start', '```', 'Stop it (Ctrl-C).', '<!-- test:readme stops the api -->', '```ts', 'x', '```', '```sh', 'npx mnemo export --out f', '```'].join('\n');
    expect(shellBlocks(markdown).map((block) => block.stops)).toEqual([[], ['api']]);
    expect(() => shellBlocks('text\n<!-- test:readme stops the worker -->\n', 'docs/guide/x.md')).toThrow('docs/guide/x.md:2: a stop line with no shell block after it');
  });

  it('names the page and line of a block that never closes', () => {
    expect(() => shellBlocks('a\n```sh\necho', 'docs/guide/facts.md')).toThrow('docs/guide/facts.md:2: a code block that never closes');
  });

  it('splits commands as bash reads them: continuations, newlines in quotes and in $( ), comments', () => {
    const text = [
      '# a comment line of its own',
      "ID=$(curl -s -H 'a: b' \\",
      "  -d '{\"x\":1,",
      "       \"y\":\"#not a comment\"}' \\",
      '  http://h/p | json .id)   # → 201 the write',
      '',
      'curl -s "http://h/$ID"      # → 404',
      'echo "a # b" # c',
    ].join('\n');
    expect(splitCommands(text, 10)).toEqual([
      {
        text: "ID=$(curl -s -H 'a: b' \\\n  -d '{\"x\":1,\n       \"y\":\"#not a comment\"}' \\\n  http://h/p | json .id)",
        line: 11,
        comment: '→ 201 the write',
      },
      { text: 'curl -s "http://h/$ID"', line: 16, comment: '→ 404' },
      { text: 'echo "a # b"', line: 17, comment: 'c' },
    ]);
  });

  it('reads a $( ) inside double quotes as closed where it closes', () => {
    const text = 'curl -H "Authorization: Bearer $(npx mnemo token --tenant demo)" -d \'{}\' http://h/p   # → 201\necho next';
    expect(splitCommands(text, 1)).toEqual([
      { text: 'curl -H "Authorization: Bearer $(npx mnemo token --tenant demo)" -d \'{}\' http://h/p', line: 1, comment: '→ 201' },
      { text: 'echo next', line: 2, comment: '' },
    ]);
  });

  it('refuses a block whose quotes never close, naming its page', () => {
    expect(() => splitCommands("echo 'open", 1)).toThrow(/README\.md:1: .*never close/);
    expect(() => splitCommands("echo 'open", 7, 'docs/guide/search.md')).toThrow(/docs\/guide\/search\.md:7: /);
  });

  it('reads what a comment expects: a status, an exit code, or nothing', () => {
    expect(expectationOf('→ 404 fact-not-found')).toEqual({ status: 404 });
    expect(expectationOf('→ exit 1: fails on the hold')).toEqual({ exit: 1 });
    expect(expectationOf('→ {"status":"completed"}')).toEqual({});
    expect(expectationOf('after a failure → 202')).toEqual({ status: 202 });
    expect(expectationOf('the API on :3000')).toEqual({});
  });

  it('starts the API and the worker in the background, skips installs and test suites', () => {
    expect(actionOf('npm start', true)).toEqual({ kind: 'background', name: 'api' });
    expect(actionOf('npm run worker', true)).toEqual({ kind: 'background', name: 'worker' });
    expect(actionOf('npm install', true).kind).toBe('skip');
    expect(actionOf('npm install', false).kind).toBe('run');
    for (const suite of ['npm test', 'npm run test:slow', 'npm run test:readme', 'npm run bench']) expect(actionOf(suite, true).kind).toBe('skip');
    expect(actionOf('npm run migrate', true).kind).toBe('run');
  });

  it('skips a command that runs a suite after an install, even without node_modules', () => {
    expect(actionOf('npm install && npm test', false)).toEqual({ kind: 'skip', why: 'a test suite: the README test does not run suites' });
    expect(actionOf('npm ci && npm run test:slow', true).kind).toBe('skip');
    expect(actionOf('npm install && npm run migrate', false).kind).toBe('run');
    expect(actionOf('npm run typecheck', true).kind).toBe('run');
  });

  it('writes every command into the script, each announced, with its expectation', () => {
    const blocks = readmeBlocks(['```sh', 'npm start', "curl -s localhost:1/x   # → 404", 'npx mnemo erase --resume $E   # → exit 1', '```'].join('\n'), {
      hasNodeModules: true,
    });
    const script = bashScript(blocks, '# prelude');
    expect(script.startsWith('# prelude\n')).toBe(true);
    expect(script).toContain("__background api <<'__README_COMMAND'\nnpm start\n__README_COMMAND");
    expect(script).toContain('__expect_status=404\ncurl -s localhost:1/x\n__expect_status=\n__done');
    expect(script).toContain('__tolerate\nnpx mnemo erase --resume $E\n__rc=$?\n__strict\n__check_exit 1 "$__rc"');
    expect(script.trimEnd().endsWith('__finish')).toBe(true);
  });

  it('names each command by its page and line, and stops what a page stops before its block', () => {
    const page = ['# Moving', '<!-- test:readme stops the api -->', '```sh', 'npx mnemo export --out f', '```'].join('\n');
    const blocks = [
      ...readmeBlocks(['```sh', 'npm start', '```'].join('\n'), { hasNodeModules: true }),
      ...readmeBlocks(page, { hasNodeModules: true, file: 'docs/guide/embedded-to-server.md' }),
    ];
    expect(blocks.map((block) => [block.file, block.line, block.stops])).toEqual([
      ['README.md', 1, []],
      ['docs/guide/embedded-to-server.md', 3, ['api']],
    ]);
    const script = bashScript(blocks, '# prelude');
    expect(script).toContain("__block 1 2 'README.md:1'\n__announce 1 'README.md:2' 'background'");
    expect(script).toContain("__block 2 2 'docs/guide/embedded-to-server.md:3'\n__stop api\n__announce 2 'docs/guide/embedded-to-server.md:4' 'run'");
  });
});

describe('the pages the README test runs', () => {
  const index = ['# Docs', '', '## Guide', '', '- [Facts](guide/facts.md): write', '- [Search](guide/search.md), see also [facts](guide/facts.md)', '', '## Operations', '- [Prod](operations/production.md)', '- [Elsewhere](guide/other.md)'].join('\n');

  it('takes the guide pages in the order of the index\'s Guide section, each once', () => {
    expect(guidePages(index)).toEqual(['docs/guide/facts.md', 'docs/guide/search.md']);
    expect(guidePages('## Guide\n- [a](guide/a.md)\n')).toEqual(['docs/guide/a.md']);
    expect(() => guidePages('# Docs\n- [a](guide/a.md)')).toThrow(/no "## Guide" section/);
  });

  it('runs the README first, and refuses an index that leaves out a page or names a missing one', () => {
    expect(pagesInOrder(index, ['docs/guide/search.md', 'docs/guide/facts.md'])).toEqual(['README.md', 'docs/guide/facts.md', 'docs/guide/search.md']);
    expect(() => pagesInOrder(index, ['docs/guide/facts.md', 'docs/guide/search.md', 'docs/guide/new.md'])).toThrow(/does not list docs\/guide\/new\.md/);
    expect(() => pagesInOrder(index, ['docs/guide/facts.md'])).toThrow(/lists docs\/guide\/search\.md, which is not in docs\/guide/);
  });

  it('this repository: docs/README.md lists every guide page, and every page parses', () => {
    const onDisk = readdirSync(join(projectRoot, 'docs/guide'))
      .filter((name) => name.endsWith('.md'))
      .map((name) => `docs/guide/${name}`);
    const pages = pagesInOrder(readFileSync(join(projectRoot, 'docs/README.md'), 'utf8'), onDisk);
    expect(pages.length).toBe(onDisk.length + 1);
    for (const file of pages) readmeBlocks(readFileSync(join(projectRoot, file), 'utf8'), { hasNodeModules: true, file });
  });
});
