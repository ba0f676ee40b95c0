/**
 * The coverage rules of DESIGN §6, the one place they are written down. They follow KiwiFS's own
 * implementation (internal/memory/scan.go, v0.4.1): which facts or files are episodes, what
 * identifies an episode, and which `mergedFrom` entries cover it. Pure: the API's SQL (report.ts,
 * and the key function in the migrations), the worker, the CLI over a folder and the MCP tool all
 * follow these rules, and the tests hold them to KiwiFS's own cases.
 *
 * One deliberate step beyond KiwiFS: a `mergedFrom` path matches with slashes trimmed on both
 * sides (KiwiFS trims only the episode's side).
 */

export const DEFAULT_EPISODES_PREFIX = 'episodes/';

/** Entry types whose `id` names an episode: producers merge by run or session id as often as by episode. */
export const COVERING_TYPES = ['episode', 'run', 'session', 'trace', 'event', 'ingest'] as const;

/** The report, in KiwiFS's shape (snake_case on the wire, as KiwiFS serves it). */
export interface EpisodicFile {
  path: string;
  episode_id?: string;
  memory_kind?: string;
  /** The fact behind the entry (API reports only; a folder report has files, not facts). */
  fact_id?: string;
}

export interface CoverageReport {
  episodic_count: number;
  /** Every mergedFrom entry seen, duplicates and unusable ones included (list items that are not mappings excepted). */
  merged_from_refs: number;
  /** Episodes no entry covers, before limit/offset (KiwiFS has no such count; the report history needs it). */
  unmerged_count: number;
  episodic_files: EpisodicFile[];
  unmerged: EpisodicFile[];
  warnings?: string[];
}

/** `limit`/`offset` cut the two lists, never the counts. No limit: the whole lists. */
export interface Page {
  limit?: number | undefined;
  offset?: number | undefined;
}

/** The episodes prefix as KiwiFS applies it: the default when empty, forward slashes, ending in `/`. */
export function normalizeEpisodesPrefix(prefix: string | null | undefined): string {
  const slashed = (prefix ?? '').replaceAll('\\', '/');
  if (slashed === '') return DEFAULT_EPISODES_PREFIX;
  return slashed.endsWith('/') ? slashed : `${slashed}/`;
}

/**
 * Episodic: `memoryKind` semantic or consolidation → never; episodic → always; anything else
 * (absent, working) → when the path starts with the prefix. `prefix` must be normalised.
 */
export function isEpisodic(memoryKind: string | null | undefined, path: string | null | undefined, prefix: string): boolean {
  const kind = (memoryKind ?? '').trim().toLowerCase();
  if (kind === 'semantic' || kind === 'consolidation') return false;
  if (kind === 'episodic') return true;
  return path != null && path.startsWith(prefix);
}

/** A path as coverage compares it: trimmed, forward slashes, no leading or trailing slash. */
export function normalizePath(path: string): string {
  return path.trim().replaceAll('\\', '/').replace(/^\/+|\/+$/g, '');
}

/** Types compare case-insensitively in ASCII only: Unicode case rules differ between JS, Go and Postgres locales. */
const asciiLowerCase = (text: string) => text.replace(/[A-Z]/g, (c) => c.toLowerCase());

/**
 * The keys one `mergedFrom` entry covers: `id:<id>` when its type is a covering type, and
 * `path:<path>` for any non-empty type. An entry with no type, or neither id nor path, covers
 * nothing (it still counts in `merged_from_refs`). Anything but an object covers nothing.
 */
export function entryKeys(entry: unknown): string[] {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return [];
  const { type, id, path } = entry as Record<string, unknown>;
  const kind = typeof type === 'string' ? asciiLowerCase(type.trim()) : '';
  if (kind === '') return [];
  const keys: string[] = [];
  const trimmedId = typeof id === 'string' ? id.trim() : '';
  if (trimmedId !== '' && (COVERING_TYPES as readonly string[]).includes(kind)) keys.push(`id:${trimmedId}`);
  const trimmedPath = typeof path === 'string' ? normalizePath(path) : '';
  if (trimmedPath !== '') keys.push(`path:${trimmedPath}`);
  return keys;
}

/**
 * What makes two `mergedFrom` entries the same entry (KiwiFS's `mergeKey`): the type, case- and
 * space-insensitive, with the id, or with the path when there is no id.
 */
export function mergedFromEntryKey(entry: { type: string; id?: string | undefined; path?: string | undefined }): string {
  const type = asciiLowerCase(entry.type.trim());
  const id = entry.id?.trim() ?? '';
  return id !== '' ? `${type}:${id}` : `${type}:path:${normalizePath(entry.path ?? '')}`;
}

/**
 * `existing` with the entries of `added` it does not have yet (same type + id, or type + path),
 * as KiwiFS's InjectMergedFrom: adding an entry twice changes nothing. An entry without a date
 * gets `now`.
 */
export function appendMergedFrom<T extends { type: string; id?: string | undefined; path?: string | undefined; date?: string | undefined }>(
  existing: readonly T[],
  added: readonly T[],
  now: Date,
): T[] {
  const seen = new Set(existing.map(mergedFromEntryKey));
  const result = [...existing];
  for (const entry of added) {
    const key = mergedFromEntryKey(entry);
    if (seen.has(key)) continue;
    seen.add(key);
    result.push(entry.date ? entry : { ...entry, date: now.toISOString() });
  }
  return result;
}

/** The keys that would cover an episode: its identity and its path. */
export function episodeKeys(episode: { episodeId?: string | null | undefined; path?: string | null | undefined }): string[] {
  const keys: string[] = [];
  const id = episode.episodeId?.trim() ?? '';
  if (id !== '') keys.push(`id:${id}`);
  const path = episode.path ? normalizePath(episode.path) : '';
  if (path !== '') keys.push(`path:${path}`);
  return keys;
}

/**
 * A `mergedFrom` value as a list of entries: a list as is, a single entry object as a list of
 * one, absent as none. Any other shape is refused (KiwiFS: "merged-from has unsupported shape").
 */
export function mergedFromList(value: unknown): { entries: unknown[]; unsupported: boolean } {
  if (value === undefined || value === null) return { entries: [], unsupported: false };
  if (Array.isArray(value)) return { entries: value, unsupported: false };
  if (typeof value === 'object') return { entries: [value], unsupported: false };
  return { entries: [], unsupported: true };
}

/**
 * Which list items `merged_from_refs` counts, as KiwiFS does: mappings, and nulls (its YAML
 * round-trip turns null into an empty mapping); a string or a nested list is dropped. The API
 * only stores mappings, so there this is every entry.
 */
export const countsAsEntry = (entry: unknown) => entry === null || (typeof entry === 'object' && !Array.isArray(entry));

export const UNSUPPORTED_MERGED_FROM_WARNING = 'memory: merged-from has unsupported shape';

export const missingEpisodeIdWarning = (path: string) =>
  `missing episode_id in ${path} — set memory_kind: episodic and episode_id, or match merged-from by path`;

/** One fact or file as the in-memory report sees it. */
export interface ReportItem {
  path: string | null;
  memoryKind: string | null;
  /** The episode's identity (episodeId, else the fact id or the file's `id`); null when there is none. */
  episodeId: string | null;
  mergedFrom: unknown;
  factId?: string;
}

/** Applies `limit`/`offset` to a list. */
export function cut<T>(list: readonly T[], page: Page): T[] {
  const offset = page.offset ?? 0;
  return list.slice(offset, page.limit === undefined ? undefined : offset + page.limit);
}

/**
 * The report over items held in memory (a folder of files, a test's fixture). The API computes
 * the same in SQL (report.ts) so a tenant's facts are never loaded at once.
 */
export function buildReport(items: Iterable<ReportItem>, options: { prefix?: string | null } & Page = {}): CoverageReport {
  const prefix = normalizeEpisodesPrefix(options.prefix);
  const covered = new Set<string>();
  const episodes: EpisodicFile[] = [];
  const episodeKeyLists: string[][] = [];
  const warnings: string[] = [];
  let mergedFromRefs = 0;

  for (const item of items) {
    const { entries, unsupported } = mergedFromList(item.mergedFrom);
    if (unsupported) warnings.push(UNSUPPORTED_MERGED_FROM_WARNING);
    mergedFromRefs += entries.filter(countsAsEntry).length;
    for (const entry of entries) for (const key of entryKeys(entry)) covered.add(key);

    if (!isEpisodic(item.memoryKind, item.path, prefix)) continue;
    const path = item.path ?? '';
    if (!item.episodeId?.trim()) warnings.push(missingEpisodeIdWarning(path));
    episodes.push({
      path,
      ...(item.episodeId?.trim() ? { episode_id: item.episodeId.trim() } : {}),
      ...(item.memoryKind ? { memory_kind: item.memoryKind } : {}),
      ...(item.factId ? { fact_id: item.factId } : {}),
    });
    episodeKeyLists.push(episodeKeys({ episodeId: item.episodeId, path: item.path }));
  }

  const unmerged = episodes.filter((_, i) => !episodeKeyLists[i]!.some((key) => covered.has(key)));
  return {
    episodic_count: episodes.length,
    merged_from_refs: mergedFromRefs,
    unmerged_count: unmerged.length,
    episodic_files: cut(episodes, options),
    unmerged: cut(unmerged, options),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}
