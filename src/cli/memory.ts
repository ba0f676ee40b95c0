/**
 * `mnemo memory report --root DIR [--json] [--episodes-prefix P] [--limit N] [--offset N]`: the
 * coverage report of DESIGN §6 over a local KiwiFS folder, with no server. `--json` prints the
 * report exactly as the API and KiwiFS serve it; the default is a table for people.
 */
import { parseArgs } from 'node:util';
import { buildReport, type CoverageReport, type ReportItem } from '../kiwifs/coverage.ts';
import { assertKnowledgeRoot, configPathOf, KnowledgeFolderError, readReportItems, resolveEpisodesPrefix, type ResolvedPrefix } from '../kiwifs/files.ts';

/** A command line that cannot run as given: one line on stderr, exit code 2. */
export class CommandLineError extends Error {}

/** Runs a command; a command-line or folder problem prints one line and sets exit code 2. */
export async function asCommand(name: string, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    if (error instanceof CommandLineError || error instanceof KnowledgeFolderError) {
      process.stderr.write(`${name}: ${error.message}\n`);
      process.exitCode = 2;
      return;
    }
    throw error;
  }
}

/**
 * `--limit -1` as `--limit=-1`, so a negative count reaches the check that explains it instead of
 * parseArgs's "argument is ambiguous".
 */
export function attachNumbers(argv: readonly string[], names: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = argv[i + 1];
    if (names.some((name) => arg === `--${name}`) && value !== undefined && /^-\d/.test(value)) {
      out.push(`${arg}=${value}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** `--url` and `--token` (or MNEMO_TOKEN) of a command that talks to the API, checked. */
export function apiFlags(values: { url?: string | undefined; token?: string | undefined }, tokenFor: string) {
  if (!values.url) throw new CommandLineError('--url is required (the Mnemo API, e.g. --url http://localhost:3000)');
  let url: URL | undefined;
  try {
    url = new URL(values.url);
  } catch {
    url = undefined;
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:') throw new CommandLineError(`--url must be an http(s) URL (got "${values.url}")`);
  const token = values.token || process.env.MNEMO_TOKEN;
  if (!token) throw new CommandLineError(`--token is required (or MNEMO_TOKEN): ${tokenFor}`);
  return { baseUrl: values.url.replace(/\/+$/, ''), token, tokenFromFlag: Boolean(values.token) };
}

/** A whole number ≥ 0 from a flag, or undefined when the flag is absent. */
export function countFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new CommandLineError(`--${name} must be a whole number, 0 or more (got "${value}")`);
  return n;
}

export async function memory(argv: string[]): Promise<void> {
  const [subcommand, ...rest] = argv;
  if (subcommand === 'report') return asCommand('mnemo memory report', () => report(rest));
  process.stderr.write(
    subcommand === undefined
      ? 'mnemo memory: name a subcommand: report\n'
      : `mnemo memory: unknown subcommand "${subcommand}" (known: report)\n`,
  );
  process.exitCode = 2;
}

async function report(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: attachNumbers(argv, ['limit', 'offset']),
    options: {
      root: { type: 'string' },
      json: { type: 'boolean', default: false },
      'episodes-prefix': { type: 'string' },
      limit: { type: 'string' },
      offset: { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  if (!values.root) throw new CommandLineError('--root is required (the knowledge folder, e.g. --root ./knowledge)');
  // As on the API: no --limit lists everything (a local folder), --limit 0 lists nothing (counts only).
  const limit = countFlag('limit', values.limit);
  const offset = countFlag('offset', values.offset);
  await assertKnowledgeRoot(values.root);
  const prefix = await resolveEpisodesPrefix(values.root, values['episodes-prefix']);

  // Items are small (a path, two short strings and the merged-from entries); bodies are never kept.
  const items: ReportItem[] = [];
  // One line per file the report cannot fully count, as `mnemo import` warns; the counts stay KiwiFS's.
  const onWarning = (warning: string) => process.stderr.write(`warning: ${warning}\n`);
  for await (const item of readReportItems(values.root, onWarning)) items.push(item);
  const result = buildReport(items, { prefix: prefix.prefix, limit, offset });

  process.stdout.write(values.json ? `${JSON.stringify(result, null, 2)}\n` : table(result, prefix, values.root, offset ?? 0));
}

function describePrefix({ prefix, source }: ResolvedPrefix, root: string): string {
  if (source === 'flag') return `${prefix} (--episodes-prefix)`;
  if (source === 'config') return `${prefix} (${configPathOf(root)})`;
  return `${prefix} (default)`;
}

/** The report for people: counts, then the unmerged episodes, then warnings. */
export function table(result: CoverageReport, prefix: ResolvedPrefix, root: string, offset: number): string {
  const lines = [
    `episodic files:             ${result.episodic_count}`,
    `merged-from references:     ${result.merged_from_refs}`,
    `unmerged (no merged-from):  ${result.unmerged_count}`,
    `episodes prefix:            ${describePrefix(prefix, root)}`,
    '',
  ];
  if (result.unmerged_count === 0) {
    lines.push(result.episodic_count === 0 ? 'no episodic files' : 'every episodic file is referenced by at least one merged-from list');
  } else {
    const rows = result.unmerged.map((e) => [e.path, e.episode_id ?? '(none: set episode_id)'] as const);
    const width = Math.max('PATH'.length, ...rows.map(([path]) => path.length));
    const shown =
      rows.length === result.unmerged_count
        ? `Unmerged episodes (${result.unmerged_count}):`
        : rows.length === 0
          ? `Unmerged episodes (${result.unmerged_count}; none at offset ${offset}):`
          : `Unmerged episodes (${offset + 1}–${offset + rows.length} of ${result.unmerged_count}):`;
    lines.push(shown);
    if (rows.length > 0) {
      lines.push(`  ${'PATH'.padEnd(width)}  EPISODE ID`);
      for (const [path, id] of rows) lines.push(`  ${path.padEnd(width)}  ${id}`);
    }
  }
  if (result.warnings?.length) {
    lines.push('', `Warnings (${result.warnings.length}):`);
    for (const warning of result.warnings) lines.push(`  ${warning}`);
  }
  return `${lines.join('\n')}\n`;
}
