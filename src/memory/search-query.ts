/**
 * The websearch syntax of a search query, read so that a fact matches when it has ANY of the
 * query's words (DESIGN §5): requiring all of them, as `websearch_to_tsquery` does, found nothing
 * for most natural-language queries in our measurements. Quoted phrases must still appear as
 * phrases, and `-word` / `-"a phrase"` still exclude. The word `or` is accepted and changes
 * nothing, since every term is already an alternative.
 */
export interface SearchTerm {
  text: string;
  phrase: boolean;
}

export interface ParsedSearchQuery {
  include: SearchTerm[];
  exclude: SearchTerm[];
}

const TOKEN = /(-?)"([^"]*)"?|(\S+)/g;

export function parseSearchQuery(query: string): ParsedSearchQuery {
  const include: SearchTerm[] = [];
  const exclude: SearchTerm[] = [];
  for (const match of query.matchAll(TOKEN)) {
    const [, negated, quoted, word] = match;
    if (quoted !== undefined) {
      if (quoted.trim()) (negated ? exclude : include).push({ text: quoted.trim(), phrase: true });
      continue;
    }
    if (!word || word.toLowerCase() === 'or' || word === '-') continue;
    if (word.startsWith('-') && word.length > 1) exclude.push({ text: word.slice(1), phrase: false });
    else include.push({ text: word, phrase: false });
  }
  return { include, exclude };
}
