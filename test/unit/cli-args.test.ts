/**
 * src/cli/args.ts: the flags, the one-line endings and the exit codes every `mnemo` command
 * shares. The commands themselves run as child processes in test/e2e/cli-*.test.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { apiFlags, asCommand, CommandFailed, countFlag, exitCodes, noAnswerFrom, parseFlags, UsageError } from '../../src/cli/args.ts';
import { MnemoError } from '../../src/client/index.ts';
import { ConfigError } from '../../src/config.ts';
import { NoAnswer } from '../../src/core/retrying-fetch.ts';

describe('parseFlags', () => {
  const options = { limit: { type: 'string' }, json: { type: 'boolean', default: false }, tag: { type: 'string', multiple: true } } as const;

  it('reads the flags, with their defaults', () => {
    expect(parseFlags(['--limit', '5', '--tag', 'a', '--tag=b'], options)).toEqual({ limit: '5', json: false, tag: ['a', 'b'] });
  });

  it('takes a negative number as the value of a string flag, so the flag check can explain it', () => {
    expect(parseFlags(['--limit', '-1', '--json'], options)).toEqual({ limit: '-1', json: true });
    expect(parseFlags(['--tag', '-2'], options).tag).toEqual(['-2']);
  });

  it('refuses an unknown flag, a positional, and a flag as a value, as parse errors (exit 2)', () => {
    expect(() => parseFlags(['--force'], options)).toThrow(expect.objectContaining({ code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION' }));
    expect(() => parseFlags(['extra'], options)).toThrow(expect.objectContaining({ code: 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL' }));
    expect(() => parseFlags(['--limit', '-x'], options)).toThrow(expect.objectContaining({ code: 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' }));
  });
});

describe('apiFlags', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('checks --url and takes --token, else MNEMO_TOKEN', () => {
    vi.stubEnv('MNEMO_TOKEN', '');
    expect(apiFlags({ url: 'http://localhost:3000//', token: 't' }, 'x')).toEqual({ baseUrl: 'http://localhost:3000', token: 't', tokenFromFlag: true });
    vi.stubEnv('MNEMO_TOKEN', 'from-env');
    expect(apiFlags({ url: 'https://mnemo.example' }, 'x')).toEqual({ baseUrl: 'https://mnemo.example', token: 'from-env', tokenFromFlag: false });
  });

  it('refuses a missing or non-http URL and a missing token as usage errors', () => {
    vi.stubEnv('MNEMO_TOKEN', '');
    expect(() => apiFlags({ token: 't' }, 'x')).toThrow(new UsageError('--url is required (the Mnemo API, e.g. --url http://localhost:3000)'));
    expect(() => apiFlags({ url: 'ftp://x', token: 't' }, 'x')).toThrow(new UsageError('--url must be an http(s) URL (got "ftp://x")'));
    expect(() => apiFlags({ url: 'not a url', token: 't' }, 'x')).toThrow(UsageError);
    expect(() => apiFlags({ url: 'http://h' }, 'an admin token')).toThrow(new UsageError('--token is required (or MNEMO_TOKEN): an admin token'));
  });
});

describe('countFlag', () => {
  it('reads a whole number of 0 or more, and nothing for an absent flag', () => {
    expect(countFlag('limit', '0')).toBe(0);
    expect(countFlag('limit', '25')).toBe(25);
    expect(countFlag('limit', undefined)).toBeUndefined();
  });

  it.each(['-1', '1.5', 'ten', '', '99999999999999999999'])('refuses %j', (value) => {
    expect(() => countFlag('offset', value)).toThrow(new UsageError(`--offset must be a whole number, 0 or more (got "${value}")`));
  });
});

describe('noAnswerFrom', () => {
  it('names the URL and what went wrong', () => {
    expect(noAnswerFrom('http://h:1', new NoAnswer('ECONNREFUSED', false, 4))).toBe('cannot reach http://h:1: ECONNREFUSED');
    expect(noAnswerFrom('http://h:1', new NoAnswer('no complete answer within 30000 ms', true, 1))).toBe('http://h:1 gave no complete answer within 30000 ms');
  });
});

describe('asCommand', () => {
  const run = async (error: unknown) => {
    const written: string[] = [];
    const write = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    const before = process.exitCode;
    try {
      const outcome = await asCommand('mnemo thing', async () => {
        throw error;
      }).then(
        () => ({ exitCode: process.exitCode, stderr: written.join('') }),
        (rethrown: unknown) => ({ rethrown }),
      );
      return outcome;
    } finally {
      write.mockRestore();
      process.exitCode = before;
    }
  };

  it('ends a usage error or a parse error with one named line and exit code 2', async () => {
    expect(await run(new UsageError('--root is required'))).toEqual({ exitCode: exitCodes.usage, stderr: 'mnemo thing: --root is required\n' });
    const parseError = Object.assign(new TypeError("Unknown option '--force'"), { code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION' });
    expect(await run(parseError)).toEqual({ exitCode: 2, stderr: "mnemo thing: Unknown option '--force'\n" });
  });

  it('ends a setting that cannot run with its own line (it names the variable) and exit code 2', async () => {
    const error = new ConfigError('MNEMO_JWT_SECRET', 'is required');
    expect(await run(error)).toEqual({ exitCode: 2, stderr: `${error.message}\n` });
  });

  it("ends the API's refusal with its code, message and request id, and a failure with its line, exit code 1", async () => {
    const refused = new MnemoError('permission-denied', 'admins only', 403, 'req-1', {});
    expect(await run(refused)).toEqual({ exitCode: exitCodes.failed, stderr: 'mnemo thing: permission-denied: admins only [request req-1]\n' });
    expect(await run(new CommandFailed('cannot reach http://h: ECONNREFUSED'))).toEqual({ exitCode: 1, stderr: 'mnemo thing: cannot reach http://h: ECONNREFUSED\n' });
  });

  it('leaves any other error to runCli, which ends the process', async () => {
    const bug = new TypeError('x is undefined');
    expect(await run(bug)).toEqual({ rethrown: bug });
  });
});
