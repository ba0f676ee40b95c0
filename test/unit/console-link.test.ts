import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.ts';
import { consoleLink } from '../../src/cli/console-link.ts';

describe('mnemo token --console', () => {
  it('puts the token in the fragment of the API’s /console, keeping a path prefix', () => {
    expect(consoleLink('http://localhost:3000', 'a.b.c')).toBe('http://localhost:3000/console#token=a.b.c');
    expect(consoleLink('https://mnemo.example.com/memory/', 'a.b+c')).toBe('https://mnemo.example.com/memory/console#token=a.b%2Bc');
  });
  it('refuses what is not an http(s) URL, in one line', () => {
    expect(() => consoleLink('localhost:3000', 't')).toThrow(UsageError);
    expect(() => consoleLink('not a url', 't')).toThrow(/--console-url must be a URL/);
    expect(() => consoleLink('file:///etc', 't')).toThrow(/http or https/);
  });
});

describe('the command', () => {
  it('prints the link for the token it mints', async () => {
    const { execFileSync } = await import('node:child_process');
    const out = execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'token', '--tenant', 'demo', '--sub', 'you', '--role', 'admin', '--console', '--console-url', 'http://127.0.0.1:3999'], {
      env: { ...process.env, MNEMO_JWT_SECRET: 'a-secret-of-at-least-thirty-two-bytes-here' },
      encoding: 'utf8',
    }).trim();
    const match = /^http:\/\/127\.0\.0\.1:3999\/console#token=([\w.-]+)$/.exec(out);
    expect(match, out).not.toBeNull();
    const claims = JSON.parse(Buffer.from(match![1]!.split('.')[1]!, 'base64url').toString('utf8'));
    expect(claims).toMatchObject({ tid: 'demo', sub: 'you', role: 'admin' });
  });
});
