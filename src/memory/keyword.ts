/**
 * Keyword search ranked by BM25, in one SQL statement (DESIGN §5).
 *
 * - A fact matches when it has ANY of the query's lexemes (quoted phrases and `-word` honoured,
 *   see search-query.ts); candidates come from the GIN index on (tenant_id, search_vector).
 * - Term frequencies are the positions of each lexeme in the fact's tsvector (and in the query's:
 *   a word the query repeats weighs more, as in Robertson's BM25); the document
 *   length is `search_length` (tokens). Document frequencies, the number of documents and the
 *   average length are counted at query time over the facts this principal can see that are
 *   live and pass the filters — the corpus being searched — through the same GIN index. They
 *   are exact, never stale, and reveal nothing about facts the caller cannot see.
 */
import { and, type SQL, sql } from 'drizzle-orm';
import { type Principal, visibleTo } from '../auth/permissions.ts';
import type { Tx } from '../db/client.ts';
import { facts } from '../db/schema.ts';
import { parseSearchQuery, SEARCH_LEXEMES_MAX, type SearchTerm } from './search-query.ts';

/**
 * BM25 parameters. Swept over k1 ∈ {0.9, 1.2} × b ∈ {0.4, 0.6, 0.75} on cranfield / med / cacm
 * (nDCG@10, query term frequency counted): k1 = 1.2, b = 0.6 gave 0.423 / 0.685 / 0.488, against
 * the reference 0.396 / 0.661 / 0.487. Ignoring repeated query words cost cacm 0.038 (0.450),
 * whose queries are long paragraphs, while adding 0.023 on med.
 */
export const BM25 = { k1: 1.2, b: 0.6 } as const;

export interface RankedId {
  id: string;
  score: number;
}

const termQuery = (term: SearchTerm) =>
  term.phrase ? sql`phraseto_tsquery('english', ${term.text})` : sql`plainto_tsquery('english', ${term.text})`;

/**
 * The `depth` best facts for `query` among those `corpus` admits (visibility is added here),
 * best first; ties by newest id.
 *
 * The work is bounded whatever the query's length (issue 10, defect 10): of its words, the first
 * SEARCH_LEXEMES_MAX distinct ones that are not stop words are searched (each as
 * `plainto_tsquery` reads it, so matching is as before for any query within the limit), plus a
 * few phrases (search-query.ts); each searched lexeme costs one index count, and the candidates
 * are the facts holding one of them.
 */
export async function keywordSearch(
  tx: Tx,
  principal: Principal,
  query: string,
  corpus: SQL[],
  depth: number,
  params: { k1: number; b: number } = BM25,
): Promise<RankedId[]> {
  const { include, exclude, includedText } = parseSearchQuery(query);
  if (include.length === 0) return [];

  const words = include.filter((t) => !t.phrase).map((t) => t.text);
  const phrases = include.filter((t) => t.phrase);
  const phraseText = phrases.map((t) => t.text).join(' ');
  const anyPhrase = phrases.map((t) => sql` || ${termQuery(t)}`);
  const excluded = exclude.map((t) => sql` && !! ${termQuery(t)}`);
  const searchable = and(visibleTo(principal, facts), ...corpus)!;
  // Constants inline: as parameters their type could not be inferred inside the arithmetic.
  const k1 = sql.raw(String(Number(params.k1)));
  const b = sql.raw(String(Number(params.b)));

  const rows = (await tx.execute(sql`
    with kept as materialized (
      -- The first distinct words that are not stop words, one tsquery each.
      select q, (array_agg(word order by ord))[1] as word
      from (
        select w.word, w.ord, plainto_tsquery('english', w.word) as q
        from string_to_table(${words.join(' ')}, ' ') with ordinality as w(word, ord)
      ) w
      where numnode(q) > 0
      group by q
      order by min(ord)
      limit ${SEARCH_LEXEMES_MAX}
    ),
    matching as materialized (
      select (coalesce((select string_agg('(' || q::text || ')', ' | ')::tsquery from kept), ''::tsquery)${sql.join(anyPhrase, sql``)})${sql.join(excluded, sql``)} as q
    ),
    terms as materialized (
      select lexeme, mnemo_lexeme_query(lexeme) as q, coalesce(array_length(positions, 1), 1)::float8 as qtf
      from unnest(to_tsvector('english', ${includedText}))
      where lexeme = any(tsvector_to_array(to_tsvector('english', coalesce((select string_agg(word, ' ') from kept), '') || ' ' || ${phraseText})))
    ),
    corpus as materialized (
      select count(*)::float8 as n, coalesce(avg(search_length), 0)::float8 as avgdl
      from facts where ${searchable}
    ),
    -- Materialized: each term's frequency is counted once, not once per candidate row.
    frequencies as materialized (
      select t.lexeme, t.qtf, (select count(*) from facts where ${searchable} and search_vector @@ t.q)::float8 as df
      from terms t
    ),
    candidates as (
      select id, search_vector, search_length from facts
      where ${searchable} and search_vector @@ (select q from matching)
    )
    select c.id,
      sum(
        f.qtf * ln(1 + (corpus.n - f.df + 0.5) / (f.df + 0.5))
        * (v.tf * (${k1} + 1))
        / (v.tf + ${k1} * (1 - ${b} + ${b} * c.search_length / greatest(corpus.avgdl, 1)))
      ) as score
    from candidates c
    cross join corpus
    cross join lateral (
      select lexeme, coalesce(array_length(positions, 1), 1)::float8 as tf from unnest(c.search_vector)
    ) v
    join frequencies f on f.lexeme = v.lexeme
    group by c.id
    order by score desc, c.id desc
    limit ${depth}
  `)) as unknown as { id: string; score: number | string }[];
  return rows.map((row) => ({ id: row.id, score: Number(row.score) }));
}
