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
 * What a file becomes is `kiwifs/facts-from-files.ts`'s rule; this is the loop and its requests.
 */
import { createHash, randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { createClient, type Fact, type FactList, MnemoError, type MnemoClient, type WriteFactInput } from '../client/index.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { fetchWithRetry, NoAnswer } from '../core/retrying-fetch.ts';
import type { ProvenanceRef } from '../db/schema/facts.ts';
import { type Draft, draftFact, mergedFromChanges } from '../kiwifs/facts-from-files.ts';
import { readKnowledgeFile, walkKnowledgeFiles } from '../kiwifs/files.ts';
import { PROVENANCE_MAX } from '../memory/facts/schemas.ts';
import { FactTypeSchema } from '../memory/schemas.ts';
import { API_OPTIONS, apiFlags, asCommand, exitCodes, noAnswerFrom, parseFlags, UsageError } from './args.ts';
import { knowledgeFolder } from './memory.ts';
import { progressBar, type ProgressView, progressLine } from './progress.ts';

const DEFAULT_TYPE = 'kiwi.page';
/** Files imported at once: looked up in parallel, new ones written in batches. */
const CONCURRENCY = 4;
/** Facts per batch write, and bytes of write bodies (the API takes 1,000 facts, 16 MiB). */
const BATCH_FACTS = 500;
const BATCH_BYTES = 8 * 1024 * 1024;
/** Without a terminal, a progress line every this many files. */
const PROGRESS_EVERY = 100;
/** The API takes request bodies up to 1 MiB (content up to 64 KiB): a larger file is not even read. */
const FILE_MAX_BYTES = 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;
const RETRIES = 3;
/** Retries wait 250–500 ms, 0.5–1 s, then 1–2 s: time for a restarting API to come back. */
const RETRY_BASE_DELAY_MS = 500;

// ---------------------------------------------------------------------------------------------
// HTTP

/** The API cannot be used at all (unreachable after retries, or not the Mnemo API): nothing else will work either. */
class StopImport extends Error {}

/**
 * fetch with a timeout, asking again what may be asked again: no answer, 429/502/503/504 and a
 * request still in flight under its idempotency key. Every write carries an `Idempotency-Key`,
 * so a retry never writes twice. `onResponse` sees the response the caller gets.
 */
function retryingFetch(url: string, onResponse?: (response: Response) => void): typeof fetch {
  return async (input, init) => {
    let response: Response;
    try {
      response = await fetchWithRetry(input, init ?? {}, { retries: RETRIES, baseDelayMs: RETRY_BASE_DELAY_MS, timeoutMs: REQUEST_TIMEOUT_MS, retryable: askAgain });
    } catch (error) {
      if (error instanceof NoAnswer) throw new StopImport(noAnswerFrom(url, error));
      throw error;
    }
    onResponse?.(response);
    return response;
  };
}

const askAgain = async (response: Response) =>
  [429, 502, 503, 504].includes(response.status) || (response.status === 409 && (await response.clone().text()).includes('"idempotency-in-flight"'));

const idempotencyKey = (request: unknown) => `mnemo-import-${createHash('sha256').update(canonicalJson(request)).digest('hex')}`;

function chunks<T>(list: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

// ---------------------------------------------------------------------------------------------
// One file

type Status = 'created' | 'updated' | 'unchanged' | 'failed';

interface Failure {
  code: string;
  message: string;
  status?: number;
  requestId?: string | undefined;
  details?: { path?: string; message?: string }[];
}

interface Outcome {
  status: Status;
  warnings: string[];
  failure?: Failure;
}

interface Importer {
  root: string;
  type: string;
  episodesPrefix: string;
  url: string;
  token: string;
  client: MnemoClient;
}

/** What supersede cannot change (type, memoryKind, episodeId) that differs between the fact and the file. */
function fixedDifferences(fact: Fact, importer: Importer, draft: Draft): string[] {
  const differences: string[] = [];
  const show = (value: string | null | undefined) => (value == null ? 'none' : JSON.stringify(value));
  if (fact.type !== importer.type) differences.push(`type ${show(fact.type)} (the import's is ${show(importer.type)})`);
  if (fact.memoryKind !== (draft.memoryKind ?? null)) differences.push(`memoryKind ${show(fact.memoryKind)} (the file's is ${show(draft.memoryKind)})`);
  if (fact.episodeId !== (draft.episodeId ?? null)) differences.push(`episodeId ${show(fact.episodeId)} (the file's is ${show(draft.episodeId)})`);
  return differences;
}

async function supersede(importer: Importer, fact: Fact, content: Draft['content'], mergedFrom: ProvenanceRef[]): Promise<Fact> {
  const body = { content, expectVersion: fact.version, ...(mergedFrom.length > 0 ? { mergedFrom } : {}) };
  return importer.client.memory.facts.supersede(fact.id, body, { idempotencyKey: idempotencyKey({ id: fact.id, body }) });
}

/** A client whose `replayed()` says whether its last answer replayed an earlier write under the same key. */
function replayAware(importer: Importer) {
  let replayed = false;
  const client = createClient({
    baseUrl: importer.url,
    token: importer.token,
    fetch: retryingFetch(importer.url, (response) => (replayed = response.headers.get('idempotent-replayed') === 'true')),
    // retryingFetch retries and times out each request: the client's own would stack on it.
    maxRetries: 0,
    timeoutMs: 0,
  });
  return { client, replayed: () => replayed };
}

/** The write body of a new fact for a file, and the merged-from entries that follow as supersedes. */
function creation(importer: Importer, draft: Draft): { body: WriteFactInput; more: ProvenanceRef[][] } {
  // The API takes so many entries per request; the rest follow as supersedes.
  const [first = [], ...more] = chunks(draft.mergedFrom, PROVENANCE_MAX);
  const body: WriteFactInput = {
    type: importer.type,
    path: draft.path,
    content: draft.content,
    ...(draft.memoryKind ? { memoryKind: draft.memoryKind } : {}),
    ...(draft.episodeId ? { episodeId: draft.episodeId } : {}),
    ...(first.length > 0 ? { mergedFrom: first } : {}),
  };
  return { body, more };
}

async function create(importer: Importer, draft: Draft): Promise<void> {
  const { body, more } = creation(importer, draft);
  const key = idempotencyKey({ path: draft.path, body });
  const writer = replayAware(importer);
  let fact = await writer.client.memory.facts.write(body, { idempotencyKey: key });
  if (writer.replayed()) {
    // The same write within the key's 24 h, whose fact no path lookup found: deleted since? Then write it afresh.
    const live = await importer.client.memory.facts.read(fact.id).then(
      () => true,
      (error: unknown) => {
        if (error instanceof MnemoError && error.code === 'fact-not-found') return false;
        throw error;
      },
    );
    if (!live) fact = await importer.client.memory.facts.write(body, { idempotencyKey: `${key}-${randomUUID()}` });
  }
  for (const chunk of more) fact = await supersede(importer, fact, draft.content, chunk);
}

/** A new file's fact, waiting for its batch. */
interface PendingCreation {
  draft: Draft;
  body: WriteFactInput;
  more: ProvenanceRef[][];
  bytes: number;
  settle: (error?: unknown) => void;
}

/**
 * New files' facts go to the API in batches (`POST /v1/memory/facts:batch`, all or nothing): a
 * batch is sent when it holds BATCH_FACTS facts or BATCH_BYTES of bodies, or when the files run
 * out. A batch the API refuses, or replays (written within the key's 24 h, perhaps deleted since),
 * is written again file by file, so each file gets its own outcome, as without batches.
 */
function batcher(importer: Importer) {
  let pending: PendingCreation[] = [];
  let bytes = 0;

  async function send(batch: PendingCreation[]): Promise<void> {
    const bodies = batch.map((item) => item.body);
    // A writer per batch: batches may be in flight together, each with its own answer.
    const writer = replayAware(importer);
    let written: Fact[] | undefined;
    try {
      written = await writer.client.memory.facts.writeBatch(bodies, { idempotencyKey: idempotencyKey({ batch: bodies }) });
      if (writer.replayed()) written = undefined;
    } catch (error) {
      // Without the API or with a refused token, every file would fail alike: that is the import's end.
      if (!(error instanceof MnemoError) || error.status === 401 || error.status >= 500) {
        for (const item of batch) item.settle(error);
        return;
      }
    }
    await Promise.all(
      batch.map(async (item, i) => {
        try {
          if (!written) {
            await create(importer, item.draft);
          } else {
            let fact = written[i]!;
            for (const chunk of item.more) fact = await supersede(importer, fact, item.draft.content, chunk);
          }
          item.settle();
        } catch (error) {
          item.settle(error);
        }
      }),
    );
  }

  return {
    /** Resolves once the file's fact is written (or rejects with why not). */
    add(draft: Draft): Promise<void> {
      const { body, more } = creation(importer, draft);
      return new Promise<void>((resolve, reject) => {
        const size = Buffer.byteLength(JSON.stringify(body));
        pending.push({ draft, body, more, bytes: size, settle: (error) => (error === undefined ? resolve() : reject(error)) });
        bytes += size;
        if (pending.length >= BATCH_FACTS || bytes >= BATCH_BYTES) void this.flush();
      });
    },
    async flush(): Promise<void> {
      const batch = pending;
      pending = [];
      bytes = 0;
      if (batch.length > 0) await send(batch);
    },
  };
}

/**
 * The fact holding `path`, if any. The lookup is the same request for every file, so a refusal of
 * its shape (400, 404) or an answer that is no fact list means a wrong --url or an API without
 * the path filter: every file would fail the same way, so the import stops.
 */
async function lookup(importer: Importer, path: string): Promise<FactList> {
  let page: FactList | undefined;
  try {
    page = await importer.client.memory.facts.list({ path, limit: 1 });
  } catch (error) {
    if (error instanceof MnemoError && (error.status === 400 || error.status === 404)) {
      throw new StopImport(`${importer.url} refused the lookup GET /v1/memory/facts?path=…: ${error.code} (${error.status}): ${error.message}`);
    }
    throw error;
  }
  if (!page || !Array.isArray(page.data)) throw new StopImport(`${importer.url} does not answer GET /v1/memory/facts with a list of facts: is it the Mnemo API?`);
  return page;
}

/** A file's outcome, or, for a new file, the promise of it once its batch is written. */
async function importFile(importer: Importer, path: string, batch: ReturnType<typeof batcher>): Promise<Outcome | { written: Promise<Outcome> }> {
  const absolute = join(importer.root, path);
  const { size } = await stat(absolute);
  if (size > FILE_MAX_BYTES) {
    return { status: 'failed', warnings: [], failure: { code: 'file-too-large', message: `${size} bytes; a fact's content holds at most 64 KiB` } };
  }
  const { draft, warnings } = draftFact(path, await readKnowledgeFile(absolute), importer.episodesPrefix);

  const [fact] = (await lookup(importer, path)).data;
  if (!fact) return { written: batch.add(draft).then(() => ({ status: 'created', warnings })) };

  const fixed = fixedDifferences(fact, importer, draft);
  if (fixed.length > 0) {
    warnings.push(
      `${path}: fact ${fact.id} has ${fixed.join(', ')}; a supersede cannot change these, so only its content and merged-from follow the file (delete the fact and import again to change them)`,
    );
  }
  const { missing, stale } = mergedFromChanges(fact.mergedFrom, draft.mergedFrom);
  if (stale > 0) {
    warnings.push(`${path}: fact ${fact.id} keeps ${stale} merged-from ${stale === 1 ? 'entry' : 'entries'} the file no longer lists (a fact's merged-from only grows)`);
  }
  if (missing.length === 0 && isDeepStrictEqual(fact.content, draft.content)) return { status: 'unchanged', warnings };

  let current = fact;
  const batches = missing.length > 0 ? chunks(missing, PROVENANCE_MAX) : [[]];
  for (const batch of batches) current = await supersede(importer, current, draft.content, batch);
  return { status: 'updated', warnings };
}

// ---------------------------------------------------------------------------------------------
// Progress and the command

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
