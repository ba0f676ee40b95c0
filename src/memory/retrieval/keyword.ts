/**
 * Keyword search ranked by BM25 (DESIGN §5), at a cost that does not grow with the tenant
 * (issue 12; docs/decisions/0044-keyword-term-statistics.md,
 * docs/decisions/0045-keyword-maxscore-top-k.md).
 *
 * - A fact matches when it has ANY of the query's lexemes (quoted phrases and `-word` honoured,
 *   see search-query.ts); matches come from the GIN index on (tenant_id, search_vector).
 * - Term frequencies are the positions of each lexeme in the fact's tsvector (and in the query's:
 *   a word the query repeats weighs more, as in Robertson's BM25); the document length is
 *   `search_length` (tokens).
 * - Document frequencies, the number of documents and the average length are the tenant's
 *   (drizzle/0008_keyword_statistics.sql, term-statistics.ts): every fact of the tenant that is not invalidated, whoever may see it and
 *   whatever the filters. They are read, not counted, and are exact in the search's snapshot.
 * - Top-k without scoring every match (MaxScore): the query's lexemes are ordered by the most
 *   they can add to a score; the first ones (the rarest, as a rule), up to about
 *   CANDIDATES.first documents holding them, are "essential", and only matches holding one of
 *   them are scored, exactly, over all the query's lexemes. A match holding none of them scores
 *   less than the sum of the other lexemes' bounds; when the depth-th scored fact reaches that
 *   sum the answer is exact, otherwise more lexemes become essential and the search runs again,
 *   up to CANDIDATES.max documents: past that the answer of that round is returned unproven.
 */
import { and, type SQL, sql } from 'drizzle-orm';
import { alias } from 'drizzle-orm/pg-core';
import { type Principal, visibleTo } from '../../auth/permissions.ts';
import type { Tx } from '../../db/client.ts';
import { facts } from '../../db/schema.ts';
import { follows, inSequence, precedes, sameSequence, sequenceOrder } from '../facts/sequence.ts';
import { type QueryDate, queryDates } from './query-dates.ts';
import { parseSearchQuery, SEARCH_LEXEMES_MAX, type SearchTerm } from './search-query.ts';

/**
 * The `kept` words of a query: the first distinct words that are not stop words, one tsquery
 * each, at most SEARCH_LEXEMES_MAX (a subquery; the keyword scale bench's earlier search uses it too).
 */
export function keptWords(words: readonly string[]): SQL {
  return sql`
      select q, (array_agg(word order by ord))[1] as word
      from (
        select w.word, w.ord, plainto_tsquery('english', w.word) as q
        from string_to_table(${words.join(' ')}, ' ') with ordinality as w(word, ord)
      ) w
      where numnode(q) > 0
      group by q
      order by min(ord)
      limit ${SEARCH_LEXEMES_MAX}`;
}

/**
 * BM25 parameters. Swept over k1 ∈ {0.9, 1.2} × b ∈ {0.4, 0.6, 0.75} on cranfield / med / cacm
 * (nDCG@10, query term frequency counted): k1 = 1.2, b = 0.6 gave 0.423 / 0.685 / 0.488, against
 * the reference 0.396 / 0.661 / 0.487. Ignoring repeated query words cost cacm 0.038 (0.450),
 * whose queries are long paragraphs, while adding 0.023 on med.
 */
export const BM25 = { k1: 1.2, b: 0.6 } as const;

/**
 * Documents holding the essential lexemes in the first round, how much that grows in each further
 * round, and the most a search reads: the answer of the round whose budget reaches `max` is
 * returned even if not proven exact (measured in
 * bench/keyword-scale.ts: see docs/decisions/0045-keyword-maxscore-top-k.md).
 */
export const CANDIDATES = { first: 2000, growth: 8, max: 16_000 } as const;

/**
 * Conversation context (DESIGN §5, docs/decisions/0106-conversation-context.md): an episodic fact
 * of a thread or session is scored as if its text held, besides its own words, the words of the
 * `window` turns before and after it, each at `weight` (term frequencies and length alike), so a
 * reply is found by the words of what it answers. Measured on LoCoMo's dev split (keyword R@10
 * 63.6 → 75.8); computed when searching, never stored, so nothing of one fact is copied into
 * another: a neighbour deleted, erased, held for review or hidden from the searcher adds nothing.
 */
export const CONVERSATION_CONTEXT = { window: 2, weight: 0.3 } as const;

/**
 * Dates a query names (query-dates.ts): a fact observed then scores as if it held one more query
 * word, `weight` times as strong as a word held by `share` of the tenant's facts (a month of the
 * year). Measured on LoCoMo's dev split: weight 2 gave keyword R@10 +1.5 (1 and 3 less or no
 * more); counting the facts in the range instead of assuming a twelfth changed nothing.
 */
export const DATE_MATCH = { weight: 2, share: 1 / 12 } as const;

/** Facts observed in one of the dates (UTC), as SQL; false when the query names none. */
function observedIn(dates: readonly QueryDate[]): SQL {
  if (dates.length === 0) return sql`false`;
  const part = (field: 'month' | 'year', value: number) => sql.raw(`extract(${field} from facts.observed_at at time zone 'UTC') = ${Math.trunc(value)}`);
  const one = (date: QueryDate) => {
    const parts = [date.month !== undefined ? part('month', date.month) : undefined, date.year !== undefined ? part('year', date.year) : undefined].filter((p) => p !== undefined);
    return sql`(${sql.join(parts, sql` and `)})`;
  };
  return sql`coalesce(${sql.join(dates.map(one), sql` or `)}, false)`;
}

export interface KeywordParams {
  k1: number;
  b: number;
  candidates?: { first: number; growth: number; max: number };
  context?: { window: number; weight: number };
  dates?: { weight: number; share: number };
}

export interface RankedId {
  id: string;
  score: number;
}

/** A match as the neighbour lookups see it: the row of `matched` below, named as facts' columns. */
const match = alias(facts, 'm');
const IN_SEQUENCE = inSequence(facts);

/** A searched lexeme: its tsquery (as stored, no stemming), weight in the query and tenant statistics. */
interface Term {
  lexeme: string;
  query: string;
  qtf: number;
  df: number;
  /** qtf × idf. */
  weight: number;
  /** The most this lexeme can add to a score: weight × (k1 + 1). */
  bound: number;
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
 * few phrases (search-query.ts). Whatever the tenant's size, one statement reads the statistics
 * of those lexemes, and each scoring round reads the facts holding its essential lexemes.
 */
export async function keywordSearch(
  tx: Tx,
  principal: Principal,
  query: string,
  corpus: SQL[],
  depth: number,
  params: KeywordParams = BM25,
): Promise<RankedId[]> {
  const candidates = params.candidates ?? CANDIDATES;
  const { tenantId } = principal;
  const { include, exclude, includedText } = parseSearchQuery(query);
  const dates = queryDates(query);
  if (include.length === 0 || depth <= 0) return [];

  const words = include.filter((t) => !t.phrase).map((t) => t.text);
  const phrases = include.filter((t) => t.phrase);
  const phraseText = phrases.map((t) => t.text).join(' ');
  const anyPhrase = phrases.map((t) => sql` || ${termQuery(t)}`);
  const excluded = exclude.map((t) => sql` && !! ${termQuery(t)}`);

  const [stats] = (await tx.execute(sql`
    with kept as materialized (${keptWords(words)}),
    terms as materialized (
      select lexeme, coalesce(array_length(positions, 1), 1)::float8 as qtf
      from unnest(to_tsvector('english', ${includedText}))
      where lexeme = any(tsvector_to_array(to_tsvector('english', coalesce((select string_agg(word, ' ') from kept), '') || ' ' || ${phraseText})))
    ),
    -- Statistics: folded plus pending (drizzle/0008_keyword_statistics.sql), in this snapshot. Every
    -- table names the tenant besides row-level security: on Citus that routes the statement to the
    -- tenant's one shard, where a statement left to RLS alone is planned across all (issue 16).
    pending_terms as (
      select l.lexeme, sum(l.n)::float8 as documents
      from keyword_stat_changes c, unnest(c.lexemes, c.counts) as l(lexeme, n)
      where c.tenant_id = ${tenantId} and l.lexeme in (select lexeme from terms)
      group by l.lexeme
    ),
    corpus as (
      select coalesce(sum(documents), 0) as documents, coalesce(sum(tokens), 0) as tokens from (
        select documents, tokens from keyword_corpus_stats where tenant_id = ${tenantId}
        union all
        select documents, tokens from keyword_stat_changes where tenant_id = ${tenantId}
      ) s
    )
    select
      -- Plans follow each query's parameters even though retrieve() prepares its statements.
      set_config('plan_cache_mode', 'force_custom_plan', true) as custom_plans,
      ((coalesce((select string_agg('(' || q::text || ')', ' | ')::tsquery from kept), ''::tsquery)${sql.join(anyPhrase, sql``)})${sql.join(excluded, sql``)})::text as matching,
      (select documents from corpus)::float8 as documents,
      (select tokens from corpus)::float8 as tokens,
      (select coalesce(json_agg(json_build_object(
          'lexeme', t.lexeme, 'query', mnemo_lexeme_query(t.lexeme)::text, 'qtf', t.qtf,
          'df', coalesce(s.documents, 0) + coalesce(p.documents, 0))), '[]')
        from terms t
        left join keyword_term_stats s on s.tenant_id = ${tenantId} and s.lexeme = t.lexeme
        left join pending_terms p on p.lexeme = t.lexeme) as terms
  `)) as unknown as { matching: string; documents: number; tokens: number; terms: Omit<Term, 'weight' | 'bound'>[] }[];
  if (!stats || stats.terms.length === 0 || !stats.matching) return [];

  const documents = Math.max(Number(stats.documents), 0);
  const avgdl = documents > 0 ? Number(stats.tokens) / documents : 0;
  const terms: Term[] = stats.terms
    .map((t) => {
      const df = Math.max(Number(t.df), 0);
      const weight = t.qtf * Math.log(1 + (documents - df + 0.5) / (df + 0.5));
      return { ...t, df, weight, bound: weight * (params.k1 + 1) };
    })
    .sort((x, y) => y.bound - x.bound || x.df - y.df);

  const searchable = and(visibleTo(principal, facts), ...corpus)!;
  const termsJson = JSON.stringify(terms.map(({ lexeme, weight }, ord) => ({ lexeme, weight, ord })));
  // Constants inline: as parameters their type could not be inferred inside the arithmetic.
  const k1 = sql.raw(String(Number(params.k1)));
  const b = sql.raw(String(Number(params.b)));
  const context = params.context ?? CONVERSATION_CONTEXT;
  const window = Math.max(0, Math.trunc(context.window));
  const cw = sql.raw(String(window > 0 ? Number(context.weight) : 0));
  const dateMatch = params.dates ?? DATE_MATCH;
  const dated = documents * dateMatch.share;
  const dateBonus = dates.length === 0 ? 0 : dateMatch.weight * Math.log(1 + (documents - dated + 0.5) / (dated + 0.5));
  const excludedWords = exclude.length > 0 ? sql`not ts_match_vq(facts.search_vector, ${sql.join(exclude.map(termQuery), sql` || `)})` : sql`true`;
  // The neighbours' term frequencies and lengths at distance 1..window, by the window functions below.
  const offsets = Array.from({ length: window }, (_, i) => i + 1);
  const near = (fn: 'lag' | 'lead', column: string) => offsets.map((d) => sql.raw(`${fn}(${column}, ${d}) over s`));
  const nearColumns = (column: string, alias: string) =>
    sql.join([...near('lag', column), ...near('lead', column)].map((expr, i) => sql`, ${expr} as ${sql.raw(`${alias}${i}`)}`));
  const nearNames = (alias: string) => Array.from({ length: 2 * window }, (_, i) => `${alias}${i}`);
  const score = async (essential: readonly Term[]) =>
    (await tx.execute(sql`
      with terms as materialized (
        select lexeme, weight, ord from jsonb_to_recordset(${termsJson}::jsonb) as w(lexeme text, weight float8, ord int)
      ),
      searched as materialized (select array_agg(lexeme order by ord) as lexemes, array_agg(weight order by ord) as weights from terms),
      -- The facts holding an essential lexeme and matching the query. The GIN index on (tenant_id,
      -- search_vector) answers the tenant (as a constant, besides row-level security's expression)
      -- and the essential lexemes; the whole query is checked on those rows only (ts_match_vq is @@
      -- in a form the planner does not take to the index, where its common lexemes would make the
      -- index look too dear to use).
      matched as materialized (
        select facts.tenant_id, facts.id, facts.memory_kind, facts.observed_at, facts.created_at,
          facts.org_id, facts.project_id, facts.user_id, facts.participant_id, facts.thread_id, facts.session_id,
          ${IN_SEQUENCE} as in_sequence
        from facts
        where facts.tenant_id = ${tenantId}
          and facts.search_vector @@ ${essential.map((t) => t.query).join(' | ')}::tsquery
          and ts_match_vq(facts.search_vector, ${stats.matching}::tsquery)
          and ${searchable}
      ),
      -- Conversation context (DESIGN §5): a turn's score counts the words of the turns around it,
      -- so twice the window of searchable turns on each side of a match is read too (the nearest
      -- window are its context, and it is theirs).
      members as materialized (
        select id, bool_or(matched) as matched from (
        select id, true as matched from matched
        ${window > 0 ? sql`union all
        select n.id, false from matched m
        cross join lateral (
          (select facts.id from facts
           where facts.tenant_id = ${tenantId} and ${sameSequence(facts, match)} and ${precedes(facts, match)} and ${searchable}
           order by ${sql.join(sequenceOrder(facts, 'desc'), sql`, `)} limit ${sql.raw(String(2 * window))})
          union all
          (select facts.id from facts
           where facts.tenant_id = ${tenantId} and ${sameSequence(facts, match)} and ${follows(facts, match)} and ${searchable}
           order by ${sql.join(sequenceOrder(facts), sql`, `)} limit ${sql.raw(String(2 * window))})
        ) n
        where m.in_sequence` : sql``}
        ) found
        group by id
      ),
      -- Each fact read, in its sequence's order: its neighbours' ids, whether it or a near one matched.
      placed as materialized (
        select facts.id, members.matched, facts.search_length::float8 as len, ${IN_SEQUENCE} as in_sequence, ${excludedWords} as allowed, ${observedIn(dates)} as dated${nearColumns('facts.id', 'n')}${nearColumns('members.matched', 'm')}
        from members join facts on facts.tenant_id = ${tenantId} and facts.id = members.id
        window s as (partition by case when ${IN_SEQUENCE} then null else facts.id end,
          facts.org_id, facts.project_id, facts.user_id, facts.participant_id, facts.thread_id, facts.session_id
          order by ${sql.join(sequenceOrder(facts), sql`, `)})
      ),
      -- Each candidate (a match, or a turn near one) and the facts whose words it counts, at their weight.
      pairs as materialized (
        select p.id as candidate, p.in_sequence, p.dated, near.id as member, near.w
        from placed p
        cross join lateral (values (p.id, 1::float8)${sql.raw(nearNames('n').map((name) => `, (p.${name}, ${Number(context.weight)}::float8)`).join(''))}) as near(id, w)
        where near.id is not null and p.allowed and (p.matched${sql.raw(nearNames('m').map((name) => ` or coalesce(p.${name}, false)`).join(''))})
      ),
      -- The searched lexemes of each fact read (only those are unnested: setweight marks them,
      -- every position of a search document having weight D, see mnemo_search_document, and
      -- ts_filter keeps them, in C).
      counts as materialized (
        select facts.id, v.lexeme, coalesce(array_length(v.positions, 1), 1)::float8 as tf
        from placed join facts on facts.tenant_id = ${tenantId} and facts.id = placed.id
        cross join lateral unnest(ts_filter(setweight(facts.search_vector, 'A', (select lexemes from searched)), '{a}')) v
      ),
      lengths as (
        select pairs.candidate, bool_or(pairs.in_sequence) as in_sequence, bool_or(pairs.dated) as dated, sum(pairs.w * placed.len) as len
        from pairs join placed on placed.id = pairs.member
        group by pairs.candidate
      ),
      frequencies as (
        select pairs.candidate, counts.lexeme, sum(pairs.w * counts.tf) as tf
        from pairs join counts on counts.id = pairs.member
        group by pairs.candidate, counts.lexeme
      ),
      scored as (
        select f.candidate as id,
          sum(t.weight * (f.tf * (${k1} + 1))
            / (f.tf + ${k1} * (1 - ${b} + ${b} * l.len / greatest(${avgdl}::float8 * (case when l.in_sequence then 1 + ${cw} * ${sql.raw(String(2 * window))} else 1 end), 1))))
          + max(case when l.dated then ${sql.raw(String(dateBonus))} else 0 end) as score
        from frequencies f
        join terms t on t.lexeme = f.lexeme
        join lengths l on l.candidate = f.candidate
        group by f.candidate
      )
      select id, score from scored
      where score > 0
      order by score desc, id desc
      limit ${depth}
    `)) as unknown as { id: string; score: number | string }[];

  let essential = 0;
  for (let budget = candidates.first; ; budget *= candidates.growth) {
    // At least one more lexeme each round, then as many as the budget of documents allows.
    let holding = terms.slice(0, essential).reduce((sum, t) => sum + t.df, 0);
    do holding += terms[essential++]!.df;
    while (essential < terms.length && holding + terms[essential]!.df <= budget);
    const rows = await score(terms.slice(0, essential));
    // A fact holding none of the essential lexemes scores at most the others' bounds, and the date's.
    const others = terms.slice(essential).reduce((sum, t) => sum + t.bound, 0) + dateBonus;
    const last = rows[depth - 1];
    if (essential === terms.length || budget >= candidates.max || (last && Number(last.score) >= others)) {
      return rows.map((row) => ({ id: row.id, score: Number(row.score) }));
    }
  }
}
