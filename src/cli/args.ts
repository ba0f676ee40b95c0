/**
 * What every `mnemo` command does the same way on its way in and out: parse its flags, refuse a
 * command line it cannot run, say in one line why it stopped, and exit with the code for it:
 * 0 done, 1 failed (refused by the API, unreachable, or an error of ours), 2 a command line or
 * setting that cannot run, 130 stopped following (Ctrl-C; the work goes on).
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { MnemoError } from '../client/index.ts';
import { ConfigError } from '../config.ts';
import type { NoAnswer } from '../core/retrying-fetch.ts';

export const exitCodes = { failed: 1, usage: 2, interrupted: 130 } as const;

/** A command line that cannot run as given: one line on stderr, exit code 2. */
export class UsageError extends Error {}

/** The command could not do its work, for a reason the line says in full: exit code 1. */
export class CommandFailed extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * The flags of `argv` (no positionals; an unknown flag is a usage error). `--limit -1` is read as
 * `--limit=-1`, so a negative number reaches the check that explains it instead of parseArgs's
 * "argument is ambiguous".
 */
export function parseFlags<const O extends Options>(argv: readonly string[], options: O) {
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = argv[i + 1];
    if (arg.startsWith('--') && options[arg.slice(2)]?.type === 'string' && value !== undefined && /^-\d/.test(value)) {
      args.push(`${arg}=${value}`);
      i++;
    } else {
      args.push(arg);
    }
  }
  return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
}

/** The flags of a command that talks to the API; `apiFlags` checks them. */
export const API_OPTIONS = { url: { type: 'string' }, token: { type: 'string' } } as const;

/** `--url` and `--token` (or MNEMO_TOKEN) of a command that talks to the API, checked. */
export function apiFlags(values: { url?: string | undefined; token?: string | undefined }, tokenFor: string) {
  if (!values.url) throw new UsageError('--url is required (the Mnemo API, e.g. --url http://localhost:3000)');
  let url: URL | undefined;
  try {
    url = new URL(values.url);
  } catch {
    url = undefined;
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:') throw new UsageError(`--url must be an http(s) URL (got "${values.url}")`);
  const token = values.token || process.env.MNEMO_TOKEN;
  if (!token) throw new UsageError(`--token is required (or MNEMO_TOKEN): ${tokenFor}`);
  return { baseUrl: values.url.replace(/\/+$/, ''), token, tokenFromFlag: Boolean(values.token) };
}

/** A whole number ≥ 0 from a flag, or undefined when the flag is absent. */
export function countFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new UsageError(`--${name} must be a whole number, 0 or more (got "${value}")`);
  return n;
}

/** Why the API at `url` gave no answer, in one line. */
export const noAnswerFrom = (url: string, error: NoAnswer) => (error.timedOut ? `${url} gave ${error.message}` : `cannot reach ${url}: ${error.message}`);

const isParseArgsError = (error: unknown) => error instanceof Error && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS');

/**
 * The line an error ends command `name` with, and its exit code; `expected` is false for an error
 * no command raised on purpose (a bug, or a failure deep down).
 */
function ending(name: string, error: unknown): { line: string; code: number; expected: boolean } {
  const message = error instanceof Error ? error.message : String(error);
  // It names the variable and what it must be: a prefix would only push that to the right.
  if (error instanceof ConfigError) return { line: message, code: exitCodes.usage, expected: true };
  if (error instanceof UsageError || isParseArgsError(error)) {
    return { line: `${name}: ${message}`, code: exitCodes.usage, expected: true };
  }
  if (error instanceof MnemoError) {
    return { line: `${name}: ${error.code}: ${message}${error.requestId ? ` [request ${error.requestId}]` : ''}`, code: exitCodes.failed, expected: true };
  }
  return { line: `${name}: ${message}`, code: exitCodes.failed, expected: error instanceof CommandFailed };
}

/**
 * Runs command `name`: what it refuses or fails at on purpose ends it with one line and its exit
 * code; anything else goes on to `runCli`, which ends the process.
 */
export async function asCommand(name: string, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    const { line, code, expected } = ending(name, error);
    if (!expected) throw error;
    process.stderr.write(`${line}\n`);
    process.exitCode = code;
  }
}

/**
 * The `mnemo` process: an error that reaches here ends it at once, named "mnemo" (a server or a
 * pool left open would otherwise keep it running).
 */
export function runCli(main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    const { line, code } = ending('mnemo', error);
    process.stderr.write(`${line}\n`);
    process.exit(code);
  });
}
