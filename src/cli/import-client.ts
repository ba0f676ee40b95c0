/**
 * `mnemo import`'s side of the API: a client whose requests are asked again where that is safe,
 * and its writes, each under an `Idempotency-Key` from what it writes, so a retried request never
 * writes twice. New files' facts go in batches; a batch the API refuses or replays is written
 * again file by file.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createClient, type Fact, MnemoError, type MnemoClient, type WriteFactInput } from '../client/index.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { fetchWithRetry, NoAnswer } from '../core/retrying-fetch.ts';
import type { ProvenanceRef } from '../db/schema/facts.ts';
import type { Draft } from '../kiwifs/facts-from-files.ts';
import { PROVENANCE_MAX } from '../memory/facts/schemas.ts';
import { noAnswerFrom } from './args.ts';

/** Facts per batch write, and bytes of write bodies (the API takes 1,000 facts, 16 MiB). */
const BATCH_FACTS = 500;
const BATCH_BYTES = 8 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;
const RETRIES = 3;
/** Retries wait 250–500 ms, 0.5–1 s, then 1–2 s: time for a restarting API to come back. */
const RETRY_BASE_DELAY_MS = 500;

/** What every step of an import knows: the folder, what its facts are written as, and the API. */
export interface Importer {
  root: string;
  type: string;
  episodesPrefix: string;
  url: string;
  token: string;
  client: MnemoClient;
}

/** The API cannot be used at all (unreachable after retries, or not the Mnemo API): nothing else will work either. */
export class StopImport extends Error {}

/**
 * fetch with a timeout, asking again what may be asked again: no answer, 429/502/503/504 and a
 * request still in flight under its idempotency key. Every write carries an `Idempotency-Key`,
 * so a retry never writes twice. `onResponse` sees the response the caller gets.
 */
export function retryingFetch(url: string, onResponse?: (response: Response) => void): typeof fetch {
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

export function chunks<T>(list: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

export async function supersede(importer: Importer, fact: Fact, content: Draft['content'], mergedFrom: ProvenanceRef[]): Promise<Fact> {
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

export type Batcher = ReturnType<typeof batcher>;

/**
 * New files' facts go to the API in batches (`POST /v1/memory/facts:batch`, all or nothing): a
 * batch is sent when it holds BATCH_FACTS facts or BATCH_BYTES of bodies, or when the files run
 * out. A batch the API refuses, or replays (written within the key's 24 h, perhaps deleted since),
 * is written again file by file, so each file gets its own outcome, as without batches.
 */
export function batcher(importer: Importer) {
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
