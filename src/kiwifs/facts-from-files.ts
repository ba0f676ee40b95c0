/**
 * What a KiwiFS file becomes as a fact (DESIGN §6, §11), as `mnemo import` writes it: frontmatter
 * `memory_kind`, `episode_id` and `merged-from` become the fact's fields, the body is
 * `content.text`, and every other frontmatter field stays in `content.frontmatter`; and how a
 * fact's merged-from follows its file's on the next import. Pure: no disk, no API.
 */
import { type MemoryKind, memoryKinds, type ProvenanceRef } from '../db/schema/facts.ts';
import { isEpisodic, mergedFromEntryKey, mergedFromList } from './coverage.ts';
import { describeValue, type Frontmatter, invalidFrontmatterProblem, mergedFromEntryProblem, mergedFromShapeProblem, type ParsedFile } from './files.ts';

const ENTRY_FIELDS = ['type', 'id', 'path', 'date', 'actor', 'note'] as const;

/** What one file becomes. */
export interface Draft {
  path: string;
  content: { text: string; frontmatter?: Frontmatter };
  memoryKind?: MemoryKind;
  episodeId?: string;
  mergedFrom: ProvenanceRef[];
}

const isMapping = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** One `merged-from` entry as the API takes it, or why it cannot be sent. */
function cleanEntry(entry: unknown, n: number): { entry?: ProvenanceRef; problems: string[] } {
  if (!isMapping(entry)) return { problems: [`${mergedFromEntryProblem(n, entry)}; dropped`] };
  const problems: string[] = [];
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(entry)) {
    if (!(ENTRY_FIELDS as readonly string[]).includes(key)) {
      problems.push(`merged-from entry ${n}: field "${key}" is not one of ${ENTRY_FIELDS.join(', ')}; dropped`);
    } else if (value !== null && value !== undefined) {
      if (typeof value === 'string') out[key] = value;
      else problems.push(`merged-from entry ${n}: ${key} is ${describeValue(value)}, not a string; dropped`);
    }
  }
  // The API refuses both (an entry naming nothing could never cover an episode).
  if (!out.type?.trim()) return { problems: [...problems, `merged-from entry ${n} has no type; dropped (the API refuses it)`] };
  if (!out.id?.trim() && !out.path?.trim()) {
    return { problems: [...problems, `merged-from entry ${n} has neither an id nor a path; dropped (the API refuses it)`] };
  }
  return { entry: out as unknown as ProvenanceRef, problems };
}

/**
 * What a file becomes as a fact, and what could not be carried (each warning names the file).
 * A frontmatter field carried whole into a fact field leaves `content.frontmatter`; one refused or
 * carried only in part stays there too, so nothing in the file is lost. `id` names the episode of
 * an episodic file without `episode_id` (as KiwiFS reads it), and stays in the frontmatter.
 */
export function draftFact(path: string, file: ParsedFile, episodesPrefix: string): { draft: Draft; warnings: string[] } {
  const warnings: string[] = [];
  const warn = (message: string) => warnings.push(`${path}: ${message}`);
  if (file.yamlError) warn(`${invalidFrontmatterProblem(file.yamlError)}; the whole file is imported as text`);
  const frontmatter = file.frontmatter ?? {};
  const rest: Frontmatter = { ...frontmatter };
  const draft: Draft = { path, content: { text: file.body }, mergedFrom: [] };

  const kind = frontmatter.memory_kind;
  if (typeof kind === 'string' && (memoryKinds as readonly string[]).includes(kind.trim().toLowerCase())) {
    draft.memoryKind = kind.trim().toLowerCase() as MemoryKind;
    delete rest.memory_kind;
  } else if (kind !== undefined && kind !== null && !(typeof kind === 'string' && kind.trim() === '')) {
    warn(`memory_kind ${describeValue(kind)} is not one of ${memoryKinds.join(', ')}; left out (kept in content.frontmatter)`);
  }

  const episodeId = frontmatter.episode_id;
  if (typeof episodeId === 'string') {
    if (episodeId.trim() !== '') {
      draft.episodeId = episodeId.trim();
      delete rest.episode_id;
    }
  } else if (episodeId !== undefined && episodeId !== null) {
    warn(`episode_id is ${describeValue(episodeId)}, not a string; left out (kept in content.frontmatter)`);
  }
  if (draft.episodeId === undefined && typeof frontmatter.id === 'string' && frontmatter.id.trim() !== '') {
    if (isEpisodic(draft.memoryKind, path, episodesPrefix)) draft.episodeId = frontmatter.id.trim();
  }

  if (Object.hasOwn(frontmatter, 'merged-from')) {
    const { entries, unsupported } = mergedFromList(frontmatter['merged-from']);
    if (unsupported) warn(`${mergedFromShapeProblem(frontmatter['merged-from'])}; left out (kept in content.frontmatter)`);
    let whole = !unsupported;
    entries.forEach((raw, i) => {
      const { entry, problems } = cleanEntry(raw, i + 1);
      for (const problem of problems) warn(problem);
      if (problems.length > 0) whole = false;
      if (entry) draft.mergedFrom.push(entry);
    });
    if (whole) delete rest['merged-from'];
    else if (!unsupported) warn('merged-from is kept whole in content.frontmatter');
  }

  if (Object.keys(rest).length > 0) draft.content.frontmatter = rest;
  // As the API will store it (JSON): NaN → null, -0 → 0, so the next run compares like with like.
  draft.content = JSON.parse(JSON.stringify(draft.content)) as Draft['content'];
  return { draft, warnings };
}

/**
 * What an import adds to a fact's merged-from: the entries its file lists that the fact lacks
 * (each once, in the file's order), and how many the fact keeps that the file no longer lists (a
 * fact's merged-from only grows, so those stay).
 */
export function mergedFromChanges(fact: readonly ProvenanceRef[], file: readonly ProvenanceRef[]): { missing: ProvenanceRef[]; stale: number } {
  const have = new Set(fact.map(mergedFromEntryKey));
  const fileKeys = new Set(file.map(mergedFromEntryKey));
  const missing = file.filter((entry) => {
    const key = mergedFromEntryKey(entry);
    if (have.has(key)) return false;
    have.add(key);
    return true;
  });
  return { missing, stale: fact.filter((entry) => !fileKeys.has(mergedFromEntryKey(entry))).length };
}
