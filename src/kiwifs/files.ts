/**
 * A KiwiFS knowledge folder as the CLI reads it (DESIGN §6): its markdown files in KiwiFS's walk
 * order, their YAML frontmatter, each file as a coverage `ReportItem`, and the episodes prefix of
 * `.kiwi/config.toml`. The coverage rules themselves are coverage.ts's.
 *
 * KiwiFS (v0.4.1) walks with `storage.Walk` over `Local.List`: one directory at a time, entries in
 * name order (`os.ReadDir`), every name starting with a dot skipped (so `.kiwi/`, `.git/` and
 * dotfiles), subdirectories visited where they sort; a knowledge file is one whose name ends in
 * `.md` (lower case, `storage.IsKnowledgeFile`). Files are read one at a time, and the report
 * reads only as far as the end of the frontmatter.
 */
import type { Dirent } from 'node:fs';
import { open, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { parse as parseToml } from 'smol-toml';
import { parse as parseYaml } from 'yaml';
import { countsAsEntry, mergedFromList, normalizeEpisodesPrefix, type ReportItem } from './coverage.ts';

/** The folder cannot be used as asked: no such directory, or a malformed `.kiwi/config.toml`. */
export class KnowledgeFolderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KnowledgeFolderError';
  }
}

export type Frontmatter = Record<string, unknown>;

export interface ParsedFile {
  /** The frontmatter mapping; null when the file has none, or its YAML does not parse. */
  frontmatter: Frontmatter | null;
  /** What follows the closing `---` line; the whole file when there is no (usable) frontmatter. */
  body: string;
  /** Set when a `---` block is there but is not a YAML mapping (KiwiFS then sees no frontmatter). */
  yamlError?: string;
}

/** Throws unless `root` is an existing directory. */
export async function assertKnowledgeRoot(root: string): Promise<void> {
  const info = await stat(root).catch(() => undefined);
  if (!info) throw new KnowledgeFolderError(`${root} does not exist`);
  if (!info.isDirectory()) throw new KnowledgeFolderError(`${root} is not a directory`);
}

// ---------------------------------------------------------------------------------------------
// Walk

/** By name as bytes, as Go sorts `os.ReadDir`, not by UTF-16 code units or locale. */
const byName = (a: Dirent, b: Dirent) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name));

/** The knowledge files under `root` as forward-slash relative paths (`episodes/a.md`), in KiwiFS's order. */
export async function* walkKnowledgeFiles(root: string): AsyncGenerator<string> {
  yield* walkDirectory(root, '');
}

async function* walkDirectory(directory: string, relative: string): AsyncGenerator<string> {
  const entries = (await readdir(directory, { withFileTypes: true })).sort(byName);
  for (const entry of entries) {
    if (entry.name.startsWith('.')) continue;
    const path = relative === '' ? entry.name : `${relative}/${entry.name}`;
    const absolute = join(directory, entry.name);
    if (entry.isDirectory()) {
      yield* walkDirectory(absolute, path);
      continue;
    }
    if (!entry.name.endsWith('.md')) continue;
    // A symlink counts when it leads to a file; a symlinked directory is not followed (no cycles).
    if (entry.isFile() || (entry.isSymbolicLink() && (await stat(absolute).catch(() => undefined))?.isFile())) yield path;
  }
}

// ---------------------------------------------------------------------------------------------
// Frontmatter

const OPENING = /^\uFEFF?---[ \t]*\r?$/;
const CLOSING = /^---[ \t]*\r?$/;

type Block = { kind: 'none' } | { kind: 'pending' } | { kind: 'block'; yaml: string; bodyStart: number };

/**
 * Where the frontmatter is in `text`: a first line `---`, then YAML up to the next `---` line
 * (the last line may end without a newline). `complete` says whether `text` is the whole file;
 * when it is not and the block has not closed yet, the answer is `pending`.
 */
function locateBlock(text: string, complete: boolean): Block {
  const firstEnd = text.indexOf('\n');
  if (firstEnd < 0) return complete ? { kind: 'none' } : { kind: 'pending' };
  if (!OPENING.test(text.slice(0, firstEnd))) return { kind: 'none' };
  let start = firstEnd + 1;
  for (;;) {
    const end = text.indexOf('\n', start);
    if (end < 0) {
      if (!complete) return { kind: 'pending' };
      // The last line, with no newline after it, may close the block too.
      return CLOSING.test(text.slice(start)) ? { kind: 'block', yaml: text.slice(firstEnd + 1, start), bodyStart: text.length } : { kind: 'none' };
    }
    if (CLOSING.test(text.slice(start, end))) return { kind: 'block', yaml: text.slice(firstEnd + 1, start), bodyStart: end + 1 };
    start = end + 1;
  }
}

/**
 * The YAML of a frontmatter block as a mapping, or why it is none. Close to what KiwiFS's
 * goldmark-meta (yaml.v2) yields: a repeated key keeps its last value, `<<` merges, and a block
 * that does not parse, or is not a mapping, is no frontmatter. YAML 1.2 core types: `yes` and
 * dates stay strings.
 */
function parseBlock(yaml: string): { frontmatter: Frontmatter } | { error: string } {
  let value: unknown;
  try {
    value = parseYaml(yaml, { uniqueKeys: false, merge: true, logLevel: 'error' });
  } catch (error) {
    return { error: (error instanceof Error ? error.message : String(error)).split('\n')[0]! };
  }
  if (value === null || value === undefined) return { frontmatter: {} };
  if (typeof value !== 'object' || Array.isArray(value)) return { error: 'frontmatter is not a mapping of keys to values' };
  return { frontmatter: value as Frontmatter };
}

/** Splits a whole file into its frontmatter and body. */
export function parseKnowledgeFile(text: string): ParsedFile {
  const block = locateBlock(text, true);
  if (block.kind !== 'block') return { frontmatter: null, body: text };
  const parsed = parseBlock(block.yaml);
  if ('error' in parsed) return { frontmatter: null, body: text, yamlError: parsed.error };
  return { frontmatter: parsed.frontmatter, body: text.slice(block.bodyStart) };
}

const CHUNK_BYTES = 64 * 1024;

/** The frontmatter of a file, reading no further than where it ends (bodies can be large). */
export async function readFrontmatter(file: string): Promise<Pick<ParsedFile, 'frontmatter' | 'yamlError'>> {
  const handle = await open(file, 'r');
  try {
    const decoder = new StringDecoder('utf8');
    const buffer = Buffer.alloc(CHUNK_BYTES);
    let text = '';
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, CHUNK_BYTES, null);
      const complete = bytesRead === 0;
      text += complete ? decoder.end() : decoder.write(buffer.subarray(0, bytesRead));
      const block = locateBlock(text, complete);
      if (block.kind === 'none') return { frontmatter: null };
      if (block.kind === 'block') {
        const parsed = parseBlock(block.yaml);
        return 'error' in parsed ? { frontmatter: null, yamlError: parsed.error } : parsed;
      }
      if (complete) return { frontmatter: null };
    }
  } finally {
    await handle.close();
  }
}

/** A whole file, split. For the importer, which needs the body too. */
export async function readKnowledgeFile(file: string): Promise<ParsedFile> {
  return parseKnowledgeFile(await readFile(file, 'utf8'));
}

// ---------------------------------------------------------------------------------------------
// Report items

const stringOf = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * The file's episode identity as KiwiFS reads it: `episode_id`, else a top-level `id`, trimmed;
 * only strings count (`episode_id: 42` is no identity).
 */
export function episodeIdOf(frontmatter: Frontmatter | null): string | null {
  return stringOf(frontmatter?.episode_id)?.trim() || stringOf(frontmatter?.id)?.trim() || null;
}

/** A file as coverage sees it. `memoryKind` is passed raw: the rules trim and lowercase it. */
export function reportItemOf(path: string, frontmatter: Frontmatter | null): ReportItem {
  return {
    path,
    memoryKind: stringOf(frontmatter?.memory_kind) ?? null,
    episodeId: episodeIdOf(frontmatter),
    mergedFrom: frontmatter?.['merged-from'],
  };
}

/**
 * Every knowledge file under `root` as a report item, in walk order, one file read at a time;
 * `onWarning` hears what in a file the report cannot count (reportWarningOf).
 */
export async function* readReportItems(root: string, onWarning: (warning: string) => void = () => {}): AsyncGenerator<ReportItem> {
  for await (const path of walkKnowledgeFiles(root)) {
    const file = await readFrontmatter(join(root, path));
    const warning = reportWarningOf(path, file);
    if (warning) onWarning(warning);
    yield reportItemOf(path, file.frontmatter);
  }
}

// ---------------------------------------------------------------------------------------------
// Warnings: what in a file's frontmatter cannot be read as meant. `mnemo import` and `mnemo memory
// report` word a problem the same way, each adding what it does about it.

/** A value as a warning shows it: a string quoted, anything else by its kind. */
export const describeValue = (value: unknown) => (typeof value === 'string' ? JSON.stringify(value) : `a ${Array.isArray(value) ? 'list' : typeof value}`);

export const invalidFrontmatterProblem = (yamlError: string) => `the frontmatter is not valid YAML (${yamlError})`;

export const mergedFromShapeProblem = (value: unknown) => `merged-from is ${describeValue(value)}, not a list of entries`;

export const mergedFromEntryProblem = (n: number, entry: unknown) =>
  `merged-from entry ${n} is ${entry === null ? 'empty' : describeValue(entry)}, not a mapping`;

/**
 * What the coverage report cannot count in a file, as one line naming it; undefined when
 * nothing. The counts stay KiwiFS's: a block that is not a YAML mapping is no frontmatter, and
 * merged-from entries that are not mappings (`merged-from: [run-301]`) reference nothing.
 */
export function reportWarningOf(path: string, file: Pick<ParsedFile, 'frontmatter' | 'yamlError'>): string | undefined {
  if (file.yamlError) return `${path}: ${invalidFrontmatterProblem(file.yamlError)}; the file counts as having no frontmatter`;
  const mergedFrom = file.frontmatter?.['merged-from'];
  const { entries, unsupported } = mergedFromList(mergedFrom);
  if (unsupported) return `${path}: ${mergedFromShapeProblem(mergedFrom)}; it counts as no reference`;
  const problems = entries.flatMap((entry, i) => (countsAsEntry(entry) ? [] : [mergedFromEntryProblem(i + 1, entry)]));
  if (problems.length === 0) return undefined;
  return `${path}: ${problems.join('; ')}; only mappings count as references (e.g. - type: run, id: run-301)`;
}

// ---------------------------------------------------------------------------------------------
// Episodes prefix

export interface ResolvedPrefix {
  /** Normalised: forward slashes, ending in `/`. */
  prefix: string;
  source: 'flag' | 'config' | 'default';
}

/** `<root>/.kiwi/config.toml`, where KiwiFS keeps a knowledge folder's settings. */
export const configPathOf = (root: string) => join(root, '.kiwi', 'config.toml');

/**
 * The episodes prefix for a folder: the flag when given (non-empty, as KiwiFS's flag), else
 * `[memory] episodes_path_prefix` of `.kiwi/config.toml` when set and non-empty, else the
 * default. A config file that is there but cannot be read as TOML is an error naming it (KiwiFS
 * silently ignores the whole file then, which hides a typo behind the wrong report).
 */
export async function resolveEpisodesPrefix(root: string, flag?: string): Promise<ResolvedPrefix> {
  if (flag) return { prefix: normalizeEpisodesPrefix(flag), source: 'flag' };
  const fallback: ResolvedPrefix = { prefix: normalizeEpisodesPrefix(undefined), source: 'default' };
  const file = configPathOf(root);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return fallback;
    throw new KnowledgeFolderError(`cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  let config: Record<string, unknown>;
  try {
    config = parseToml(text);
  } catch (error) {
    const { line, column } = error as { line?: number; column?: number };
    const reason = (error instanceof Error ? error.message : String(error)).split('\n')[0]!.replace(/^Invalid TOML document: /, '');
    const where = line !== undefined ? ` at line ${line}${column !== undefined ? `, column ${column}` : ''}` : '';
    throw new KnowledgeFolderError(`${file} is not valid TOML${where}: ${reason}`);
  }
  const memory = config.memory;
  if (memory === undefined) return fallback;
  if (memory === null || typeof memory !== 'object' || Array.isArray(memory)) {
    throw new KnowledgeFolderError(`${file}: [memory] must be a table`);
  }
  const value = (memory as Record<string, unknown>).episodes_path_prefix;
  if (value === undefined || value === '') return fallback;
  if (typeof value !== 'string') throw new KnowledgeFolderError(`${file}: [memory] episodes_path_prefix must be a string`);
  return { prefix: normalizeEpisodesPrefix(value), source: 'config' };
}
