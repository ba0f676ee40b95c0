/**
 * One file of `mnemo import`: what it becomes as a fact (`kiwifs/facts-from-files.ts`'s rule),
 * the fact its path already has, and what follows: nothing when the fact has the file's content
 * and merged-from entries, a supersede otherwise, a new fact in a batch when none holds the path.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { type Fact, type FactList, MnemoError } from '../client/index.ts';
import { type Draft, draftFact, mergedFromChanges } from '../kiwifs/facts-from-files.ts';
import { readKnowledgeFile } from '../kiwifs/files.ts';
import { PROVENANCE_MAX } from '../memory/facts/schemas.ts';
import { type Batcher, chunks, type Importer, StopImport, supersede } from './import-client.ts';

/** The API takes request bodies up to 1 MiB (content up to 64 KiB): a larger file is not even read. */
const FILE_MAX_BYTES = 1024 * 1024;

export type Status = 'created' | 'updated' | 'unchanged' | 'failed';

export interface Failure {
  code: string;
  message: string;
  status?: number;
  requestId?: string | undefined;
  details?: { path?: string; message?: string }[];
}

export interface Outcome {
  status: Status;
  warnings: string[];
  failure?: Failure;
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
export async function importFile(importer: Importer, path: string, batch: Batcher): Promise<Outcome | { written: Promise<Outcome> }> {
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
