/**
 * `mnemo memory report --root DIR [--json] [--episodes-prefix P] [--limit N] [--offset N]`: the
 * coverage report of DESIGN §6 over a local KiwiFS folder, with no server. `--json` prints the
 * report exactly as the API and KiwiFS serve it; the default is a table for people.
 */
import { buildReport, type CoverageReport, type ReportItem } from '../kiwifs/coverage.ts';
import { assertKnowledgeRoot, configPathOf, KnowledgeFolderError, readReportItems, resolveEpisodesPrefix, type ResolvedPrefix } from '../kiwifs/files.ts';
import { asCommand, countFlag, parseFlags, UsageError } from './args.ts';

export async function memory(argv: string[]): Promise<void> {
  const [subcommand, ...rest] = argv;
  if (subcommand === 'report') return asCommand('mnemo memory report', () => report(rest));
  return asCommand('mnemo memory', async () => {
    throw new UsageError(subcommand === undefined ? 'name a subcommand: report' : `unknown subcommand "${subcommand}" (known: report)`);
  });
}

/**
 * The knowledge folder of `--root` and its episodes prefix (`--episodes-prefix`, else the folder's
 * `.kiwi/config.toml`, else the default), for `memory report` and `import`. A folder that is
 * missing, or whose config cannot be read, is a command line that cannot run.
 */
export async function knowledgeFolder(values: { root?: string | undefined; 'episodes-prefix'?: string | undefined }) {
  const { root } = values;
  if (!root) throw new UsageError('--root is required (the knowledge folder, e.g. --root ./knowledge)');
  try {
    await assertKnowledgeRoot(root);
    return { root, prefix: await resolveEpisodesPrefix(root, values['episodes-prefix']) };
  } catch (error) {
    throw error instanceof KnowledgeFolderError ? new UsageError(error.message) : error;
  }
}

async function report(argv: string[]): Promise<void> {
  const values = parseFlags(argv, {
    root: { type: 'string' },
    json: { type: 'boolean', default: false },
    'episodes-prefix': { type: 'string' },
    limit: { type: 'string' },
    offset: { type: 'string' },
  });
  const { root, prefix } = await knowledgeFolder(values);
  // As on the API: no --limit lists everything (a local folder), --limit 0 lists nothing (counts only).
  const limit = countFlag('limit', values.limit);
  const offset = countFlag('offset', values.offset);

  // Items are small (a path, two short strings and the merged-from entries); bodies are never kept.
  const items: ReportItem[] = [];
  // One line per file the report cannot fully count, as `mnemo import` warns; the counts stay KiwiFS's.
  const onWarning = (warning: string) => process.stderr.write(`warning: ${warning}\n`);
  for await (const item of readReportItems(root, onWarning)) items.push(item);
  const result = buildReport(items, { prefix: prefix.prefix, limit, offset });

  process.stdout.write(values.json ? `${JSON.stringify(result, null, 2)}\n` : table(result, prefix, root, offset ?? 0));
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
