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
