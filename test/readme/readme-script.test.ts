/**
 * How the README test reads shell blocks (readme-script.ts): pure, so in `npm test`. The README
 * run itself is `npm run test:readme`.
 */
import { describe, expect, it } from 'vitest';
import { actionOf, bashScript, expectationOf, readmeBlocks, shellBlocks, splitCommands } from './readme-script.ts';

describe('the README test reading shell blocks', () => {
  it('takes only sh blocks, with the line of each fence', () => {
    const markdown = ['# T', '```sh', 'echo a', '```', '```ts', 'const x = 1;', '```', '```', 'plain', '```', '```sh', 'echo b', '```'].join('\n');
    expect(shellBlocks(markdown)).toEqual([
      { line: 2, text: 'echo a' },
      { line: 11, text: 'echo b' },
    ]);
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

  it('refuses a block whose quotes never close', () => {
    expect(() => splitCommands("echo 'open", 1)).toThrow(/never close/);
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
});
