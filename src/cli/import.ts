/**
 * `mnemo import --root DIR --url URL --token T [--type kiwi.page] [--episodes-prefix P]`: loads a
 * KiwiFS folder as facts through the HTTP API (DESIGN §6, §11), one fact per markdown file, found
 * again by its path on the next run:
 * - no fact holds the path → write one, in a batch with other new files (`POST
 *   /v1/memory/facts:batch`, an `Idempotency-Key` from what the batch writes, so a retried request
 *   never writes twice; a refused batch is written again file by file, each under a key from its
 *   path and body);
 * - the fact already has the file's content and merged-from entries → nothing is written;
 * - otherwise → supersede it (content, and the merged-from entries it lacks).
 * What a file becomes is `kiwifs/facts-from-files.ts`'s rule, what follows for it
 * `import-file.ts`'s, the requests and their batches `import-client.ts`'s; this is the command:
 * its flags, the files taken a few at a time, the progress and the report.
 */
import { createClient, MnemoError } from '../client/index.ts';
import { walkKnowledgeFiles } from '../kiwifs/files.ts';
import { FactTypeSchema } from '../memory/schemas.ts';
import { API_OPTIONS, apiFlags, asCommand, exitCodes, parseFlags, UsageError } from './args.ts';
import { batcher, type Importer, retryingFetch, StopImport } from './import-client.ts';
import { type Failure, importFile, type Outcome, type Status } from './import-file.ts';
import { knowledgeFolder } from './memory.ts';
import { progressBar, type ProgressView, progressLine } from './progress.ts';

const DEFAULT_TYPE = 'kiwi.page';
/** Files imported at once: looked up in parallel, new ones written in batches. */
const CONCURRENCY = 4;
/** Without a terminal, a progress line every this many files. */
const PROGRESS_EVERY = 100;

const STATUSES: Status[] = ['created', 'updated', 'unchanged', 'failed'];
type Counts = Record<Status, number>;
const summary = (counts: Counts) => STATUSES.map((status) => `${status} ${counts[status]}`).join(' / ');

/** A bar on a terminal; otherwise a line every PROGRESS_EVERY files, for logs. */
export const importing = (total: number): ProgressView<{ done: number; counts: Counts }> => ({
  line: ({ done, counts }) => `${progressBar(total === 0 ? 1 : done / total)} ${done}/${total}  ${summary(counts)}`,
  logLine: ({ done, counts }) => `mnemo import: ${done}/${total} files (${summary(counts)})`,
  // The last line would only repeat the summary printed below it.
  milestone: ({ done }) => (done % PROGRESS_EVERY === 0 && done < total ? done : undefined),
  redrawMs: 100,
});

function failureOf(error: unknown): Failure {
  if (error instanceof MnemoError) {
    const details = Array.isArray(error.body.details) ? (error.body.details as Failure['details']) : undefined;
    return { code: error.code, status: error.status, message: error.message, requestId: error.requestId, ...(details ? { details } : {}) };
  }
  const code = (error as NodeJS.ErrnoException).code;
  return { code: typeof code === 'string' ? code : 'error', message: error instanceof Error ? error.message : String(error) };
}

function describeFailure(path: string, failure: Failure): string {
  const status = failure.status !== undefined ? ` (${failure.status})` : '';
  const request = failure.requestId ? ` [request ${failure.requestId}]` : '';
  const lines = [`failed: ${path}: ${failure.code}${status}: ${failure.message}${request}`];
  for (const detail of failure.details ?? []) lines.push(`    ${detail.path ? `${detail.path}: ` : ''}${detail.message ?? ''}`);
  return lines.join('\n');
}

export async function importFolder(argv: string[]): Promise<void> {
  return asCommand('mnemo import', () => run(argv));
}

async function run(argv: string[]): Promise<void> {
  const values = parseFlags(argv, {
    ...API_OPTIONS,
    root: { type: 'string' },
    type: { type: 'string', default: DEFAULT_TYPE },
    'episodes-prefix': { type: 'string' },
  });
  const { baseUrl, token } = apiFlags(values, 'a bearer token allowed to write tenant-wide facts');
  const type = FactTypeSchema.safeParse(values.type);
  if (!type.success) throw new UsageError(`--type ${type.error.issues[0]?.message ?? 'is not a fact type'} (got "${values.type}")`);
  const { root, prefix } = await knowledgeFolder(values);

  const importer: Importer = {
    root,
    type: type.data,
    episodesPrefix: prefix.prefix,
    url: baseUrl,
    token,
    client: createClient({ baseUrl, token, fetch: retryingFetch(baseUrl) }),
  };

  // Paths only (small); each file is read when its turn comes.
  const paths: string[] = [];
  for await (const path of walkKnowledgeFiles(root)) paths.push(path);
  process.stderr.write(`mnemo import: ${paths.length} markdown files from ${root} to ${baseUrl} as ${importer.type}\n`);

  const outcomes: (Outcome | undefined)[] = new Array(paths.length);
  const counts: Counts = { created: 0, updated: 0, unchanged: 0, failed: 0 };
  const bar = progressLine(importing(paths.length));
  let next = 0;
  let done = 0;
  let fatal: string | undefined;

  const batch = batcher(importer);
  /** New files' outcomes, settled when their batch is written. */
  const creations: Promise<void>[] = [];

  const record = (index: number, outcome: Outcome) => {
    outcomes[index] = outcome;
    counts[outcome.status]++;
    bar.draw({ done: ++done, counts });
  };
  const recordFailure = (index: number, error: unknown) => {
    // Nothing will work without the API or with a refused token: stop rather than fail every file.
    if (error instanceof StopImport) fatal = error.message;
    else if (error instanceof MnemoError && error.status === 401) fatal = `the API refused the token: ${error.code} (401): ${error.message}`;
    if (fatal === undefined) record(index, { status: 'failed', warnings: [], failure: failureOf(error) });
  };

  async function worker(): Promise<void> {
    while (fatal === undefined && next < paths.length) {
      const index = next++;
      try {
        const result = await importFile(importer, paths[index]!, batch);
        if ('written' in result) creations.push(result.written.then((outcome) => record(index, outcome), (error: unknown) => recordFailure(index, error)));
        else record(index, result);
      } catch (error) {
        recordFailure(index, error);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, paths.length) }, worker));
  await batch.flush();
  await Promise.all(creations);
  bar.end();

  outcomes.forEach((outcome) => {
    for (const warning of outcome?.warnings ?? []) process.stderr.write(`warning: ${warning}\n`);
  });
  outcomes.forEach((outcome, i) => {
    if (outcome?.failure) process.stderr.write(`${describeFailure(paths[i]!, outcome.failure)}\n`);
  });
  if (fatal !== undefined) {
    process.stderr.write(`mnemo import: stopped after ${done} of ${paths.length} files: ${fatal}\n`);
  }
  process.stdout.write(`${summary(counts)}\n`);
  if (fatal !== undefined || counts.failed > 0) process.exitCode = exitCodes.failed;
}
