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
 * - Conversations (DESIGN §5; docs/decisions/0106-conversation-context.md): a turn of a thread or
 *   session also counts its neighbours' words (CONVERSATION_CONTEXT), read in the same statement
 *   and scored here in TypeScript; a date the query names favours facts observed then
 *   (DATE_MATCH). Both fit MaxScore: a fact with no essential lexeme of its own or around it scores
 *   at most the other lexemes' bounds plus the date's.
 */
import { and, type SQL, sql } from 'drizzle-orm';
import { alias } from 'drizzle-orm/pg-core';
import { type Principal, visibleTo } from '../../auth/permissions.ts';
import type { Tx } from '../../db/client.ts';
import { facts } from '../../db/schema.ts';
import { phase } from '../../foundation/request-timing.ts';
import { live } from '../facts/conditions.ts';
import { follows, inSequence, precedes, sameSequence, sequenceOrder, sequencePosition } from '../facts/sequence.ts';
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
 * 63.6 → 75.7); computed when searching, never stored, so nothing of one fact is copied into
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
/** A sequence's first matched turn, whose span to its last match is read in one range. */
const first = alias(facts, 'f');
/** What takes a place in a sequence around a match: a turn that is live and not held for review. */
const TURN = sql`${live()} and ${facts.review} is null`;

/** `is true`: a fact of no memory kind has a NULL kind, and must count as outside, not unknown. */
const IN_SEQUENCE = sql`(${inSequence(facts)}) is true`;

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

  const [stats] = (await phase('keyword-statistics', () => tx.execute(sql`
    with kept as materialized (${keptWords(words)}),
    terms as materialized (
      select lexeme, coalesce(array_length(positions, 1), 1)::float8 as qtf
      from unnest(to_tsvector('english', ${includedText}))
      where lexeme = any(tsvector_to_array(to_tsvector('english', coalesce((select string_agg(word, ' ') from kept), '') || ' ' || ${phraseText})))
    ),
    -- Statistics: folded plus pending (drizzle/0008_keyword_statistics.sql), in this snapshot. Every
    -- table names the tenant besides row-level security: on Citus that routes the statement to the
    -- tenant's one shard, where a statement left to RLS alone is planned across all (issue 16).
    -- Each pending change's arrays are unnested once, each entry checked against the searched
    -- lexemes as one array: joined to \`terms\` instead, the planner may unnest (and detoast) every
    -- change once per searched lexeme (6 × 5,822 entries: 11 ms of a 1,000-fact tenant's search).
    pending_terms as materialized (
      select l.lexeme, sum(l.n)::float8 as documents
      from keyword_stat_changes c, unnest(c.lexemes, c.counts) as l(lexeme, n)
      where c.tenant_id = ${tenantId} and l.lexeme = any (array(select lexeme from terms))
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
  `))) as unknown as { matching: string; documents: number; tokens: number; terms: Omit<Term, 'weight' | 'bound'>[] }[];
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
  const weightsJson = JSON.stringify(terms.map(({ lexeme, weight }) => ({ lexeme, weight })));
  // Constants inline: as parameters their type could not be inferred inside the arithmetic.
  const k1 = sql.raw(String(Number(params.k1)));
  const b = sql.raw(String(Number(params.b)));
  const context = params.context ?? CONVERSATION_CONTEXT;
  const window = Math.max(0, Math.trunc(context.window));
  const dateMatch = params.dates ?? DATE_MATCH;
  const dated = documents * dateMatch.share;
  const dateBonus = dates.length === 0 ? 0 : dateMatch.weight * Math.log(1 + (documents - dated + 0.5) / (dated + 0.5));
  const bonus = sql.raw(String(dateBonus));
  const excludedWords = exclude.length > 0 ? sql`not ts_match_vq(facts.search_vector, ${sql.join(exclude.map(termQuery), sql` || `)})` : sql`true`;
  const reach = sql.raw(String(2 * window));
  /**
   * BM25 over the CTE \`matched\` rows that pass \`only\`, the best \`depth\`. The CTE carries each
   * match's document (search_vector, search_length, observed_at) and is read under the name
   * \`facts\`: looking each match up again by its key cost more than the scoring (at 1,000 facts,
   * most of them matching a long query). Only the searched lexemes of each document are unnested:
   * setweight marks them (every position of a search document has weight D, see
   * mnemo_search_document) and ts_filter keeps them, in C; unnesting whole documents cost more
   * than reading them.
   */
  const plainBm25 = (only: SQL) => sql`
        select facts.id,
          sum(
            w.weight * (v.tf * (${k1} + 1))
            / (v.tf + ${k1} * (1 - ${b} + ${b} * facts.search_length / greatest(${avgdl}::float8, 1)))
          ) + max(case when ${observedIn(dates)} then ${bonus} else 0 end) as score
        from matched facts
        cross join lateral (
          select lexeme, coalesce(array_length(positions, 1), 1)::float8 as tf
          from unnest(ts_filter(setweight(facts.search_vector, 'A', (select lexemes from searched)), '{a}'))
        ) v
        join weights w on w.lexeme = v.lexeme
        where ${only}
        group by facts.id
        order by score desc, facts.id desc
        limit ${depth}`;
  const essentialQuery = (essential: readonly Term[]) => essential.map((t) => t.query).join(' | ');
  /**
   * The statement of a tenant whose searches have met no conversation turn: BM25 over the matches
   * in SQL, as before conversations, and whether any match is a turn (then `score` runs instead).
   */
  const scorePlain = async (essential: readonly Term[]): Promise<{ ranked: RankedId[]; turns: boolean }> => {
    const rows = (await tx.execute(sql`
      with weights as materialized (
        select lexeme, weight from jsonb_to_recordset(${weightsJson}::jsonb) as w(lexeme text, weight float8)
      ),
      searched as materialized (select array_agg(lexeme) as lexemes from weights),
      matched as materialized (
        select facts.id, ${IN_SEQUENCE} as in_sequence, facts.search_vector, facts.search_length, facts.observed_at from facts
        where facts.tenant_id = ${tenantId}
          and facts.search_vector @@ ${essentialQuery(essential)}::tsquery
          and ts_match_vq(facts.search_vector, ${stats.matching}::tsquery)
          and ${searchable}
      )
      select (select coalesce(bool_or(in_sequence), false) from matched) as turns, ranked.id, ranked.score
      from (select 1) one
      left join (
        ${plainBm25(sql`true`)}
      ) ranked on true
      order by ranked.score desc, ranked.id desc
    `)) as unknown as { turns: boolean; id: string | null; score: number | string | null }[];
    return { turns: rows[0]?.turns ?? false, ranked: rows.flatMap((r) => (r.id === null ? [] : [{ id: r.id, score: Number(r.score) }])) };
  };
  const score = async (essential: readonly Term[]): Promise<RankedId[]> => {
    if (!conversational.has(tenantId)) {
      const plain = await scorePlain(essential);
      if (!plain.turns || window === 0) return plain.ranked;
      rememberConversational(tenantId);
    }
    const rows = (await tx.execute(sql`
      with weights as materialized (
        select lexeme, weight from jsonb_to_recordset(${weightsJson}::jsonb) as w(lexeme text, weight float8)
      ),
      searched as materialized (select array_agg(lexeme) as lexemes from weights),
      -- The facts holding an essential lexeme and matching the query. The GIN index on (tenant_id,
      -- search_vector) answers the tenant (as a constant, besides row-level security's expression)
      -- and the essential lexemes; the whole query is checked on those rows only (ts_match_vq is @@
      -- in a form the planner does not take to the index, where its common lexemes would make the
      -- index look too dear to use).
      matched as materialized (
        select facts.tenant_id, facts.id, facts.memory_kind, facts.observed_at, facts.created_at,
          facts.org_id, facts.project_id, facts.user_id, facts.participant_id, facts.thread_id, facts.session_id,
          ${IN_SEQUENCE} as in_sequence, facts.search_vector, facts.search_length
        from facts
        where facts.tenant_id = ${tenantId}
          and facts.search_vector @@ ${essentialQuery(essential)}::tsquery
          and ts_match_vq(facts.search_vector, ${stats.matching}::tsquery)
          and ${searchable}
      ),
      -- Facts outside any conversation: BM25 here, the best \`depth\`.
      plain as (
        ${plainBm25(sql`not facts.in_sequence`)}
      ),
      -- Turns of a conversation (DESIGN §5), scored in TypeScript with the turns around them: each
      -- match and twice the window of turns on each side of it (the nearest window are its context,
      -- and it is theirs), found through facts_sequence_idx. A neighbour is any live turn not held
      -- for review (a sequence has one scope, so the caller sees all of its turns or none); which of
      -- them the search may use (its filters) is read with each row.
      ${window > 0 ? sql`
      -- Each matched turn's place among its sequence's matches: the first and the last bound the
      -- span read in one range below.
      matched_turns as materialized (
        select m.*,
          row_number() over sequence as seq_rank,
          count(*) over sequence as seq_matches,
          first_value(m.id) over sequence as seq_first,
          last_value(${sequencePosition(match)}) over sequence as last_position,
          last_value(m.id) over sequence as last_id
        from matched m
        where m.in_sequence
        window sequence as (
          partition by m.org_id, m.project_id, m.user_id, m.participant_id, m.thread_id, m.session_id
          order by ${sql.join(sequenceOrder(match), sql`, `)}
          rows between unbounded preceding and unbounded following)
      ),
      -- The turns between a sequence's first and last match, one range scan per sequence instead of
      -- two lookups per match (most of a conversation's turns match a question: 421 of 629 in a
      -- LoCoMo tenant). Read up to what the lookups would read, \`reach\` on each side of each match,
      -- and one more: a span holding more than that (matches far apart in a long thread) is sparse,
      -- and its matches are looked around one by one instead, so a search never reads more turns
      -- than the lookups alone did.
      spans as materialized (
        select f.seq_first, f.seq_matches, array(
          select facts.id from facts
          where facts.tenant_id = ${tenantId} and ${sameSequence(facts, first)} and ${follows(facts, first)}
            and (${sequencePosition(facts)}, ${facts.id}) < (f.last_position, f.last_id) and ${TURN}
          order by ${sql.join(sequenceOrder(facts), sql`, `)}
          limit f.seq_matches * ${reach} * 2 + 1
        ) as ids
        from matched_turns f
        where f.seq_rank = 1 and f.seq_matches > 1
      ),
      sparse_spans as materialized (
        select seq_first from spans where cardinality(ids) > seq_matches * ${reach} * 2
      ),` : sql``}
      members as materialized (
        select id, bool_or(matched) as matched from (
          select id, true as matched from matched where in_sequence
          ${window > 0 ? sql`union all
          select unnest(ids), false from spans where seq_first not in (select seq_first from sparse_spans)
          union all
          -- Before a sequence's first match and after its last, and around each match of a sparse one.
          select near.id, false from (
            select m.*, m.seq_first in (select seq_first from sparse_spans) as sparse from matched_turns m
          ) m
          cross join lateral (
            (select facts.id from facts
             where (m.seq_rank = 1 or m.sparse)
               and facts.tenant_id = ${tenantId} and ${sameSequence(facts, match)} and ${precedes(facts, match)} and ${TURN}
             order by ${sql.join(sequenceOrder(facts, 'desc'), sql`, `)} limit ${reach})
            union all
            (select facts.id from facts
             where (m.seq_rank = m.seq_matches or m.sparse)
               and facts.tenant_id = ${tenantId} and ${sameSequence(facts, match)} and ${follows(facts, match)} and ${TURN}
             order by ${sql.join(sequenceOrder(facts), sql`, `)} limit ${reach})
          ) near` : sql``}
        ) found
        group by id
      )
      select 'plain' as kind, id, score, null::boolean as usable, null::boolean as matched, null::text as sequence, null::float8 as len, null::boolean as allowed,
        null::boolean as dated, null::text as found, null::float8 as position
      from plain
      union all
      (select 'turn', facts.id, null, ${searchable}, members.matched,
        json_build_array(facts.org_id, facts.project_id, facts.user_id, facts.participant_id, facts.thread_id, facts.session_id)::text,
        facts.search_length::float8, ${excludedWords}, coalesce(${observedIn(dates)}, false),
        ts_filter(setweight(facts.search_vector, 'A', (select lexemes from searched)), '{a}')::text,
        -- Microseconds since 1970: exact in a double until the year 2255.
        extract(epoch from ${sequencePosition(facts)}) * 1000000
      from members join facts on facts.tenant_id = ${tenantId} and facts.id = members.id)
    `)) as unknown as ScoredRow[];
    const plain = rows.filter((r) => r.kind === 'plain').map((r) => ({ id: r.id, score: Number(r.score) }));
    // In sequence order here: sorting by six text keys in the database's collation cost more.
    const inOrder = rows.filter((r) => r.kind === 'turn').sort(
      (x, y) => (x.sequence! < y.sequence! ? -1 : x.sequence! > y.sequence! ? 1 : Number(x.position) - Number(y.position) || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0)),
    );
    const turns = scoreTurns(inOrder, terms, { ...params, avgdl, window, weight: context.weight, dateBonus });
    return [...plain, ...turns].sort(byScore).slice(0, depth);
  };

  let essential = 0;
  for (let budget = candidates.first; ; budget *= candidates.growth) {
    // At least one more lexeme each round, then as many as the budget of documents allows.
    let holding = terms.slice(0, essential).reduce((sum, t) => sum + t.df, 0);
    do holding += terms[essential++]!.df;
    while (essential < terms.length && holding + terms[essential]!.df <= budget);
    const rows = await phase('keyword-score', () => score(terms.slice(0, essential)));
    // A fact holding none of the essential lexemes scores at most the others' bounds, and the date's.
    const others = terms.slice(essential).reduce((sum, t) => sum + t.bound, 0) + dateBonus;
    const last = rows[depth - 1];
    if (essential === terms.length || budget >= candidates.max || (last && last.score >= others)) {
      return rows;
    }
  }
}

/**
 * Tenants whose searches have met a conversation turn, in this process: their searches go straight
 * to the statement that scores turns with their neighbours, and every other tenant's keep the plain
 * statement, which is simpler to plan and run (a plain statement that meets a turn
 * sends the search on, so the answer never depends on what is remembered here). Bounded: emptied
 * when full, and relearned one search each.
 */
const conversational = new Set<string>();
const CONVERSATIONAL_TENANTS_MAX = 10_000;
function rememberConversational(tenantId: string): void {
  if (conversational.size >= CONVERSATIONAL_TENANTS_MAX) conversational.clear();
  conversational.add(tenantId);
}

/** A row of the scoring statement: a plain fact with its score, or a turn to score here. */
interface ScoredRow {
  kind: 'plain' | 'turn';
  id: string;
  score: number | string | null;
  /** The search may use this turn (its visibility and filters): only then does it lend words or score. */
  usable: boolean | null;
  matched: boolean | null;
  /** The turn's sequence (its six scope keys). */
  sequence: string | null;
  len: number | null;
  /** No excluded word (`-word`). */
  allowed: boolean | null;
  /** Observed in a date the query names. */
  dated: boolean | null;
  /** The searched lexemes the turn holds, as a tsvector's text (`'word':3,7`). */
  found: string | null;
  /** Its place in the sequence (microseconds since 1970); then its id. */
  position: number | string | null;
}

/** Best first; ties by newest id (uuid strings compare as PostgreSQL compares uuids). */
const byScore = (x: RankedId, y: RankedId) => y.score - x.score || (x.id < y.id ? 1 : x.id > y.id ? -1 : 0);

const LEXEME = /'((?:[^'\\]|''|\\.)*)'(?::([0-9A-D,]+))?/g;

/** Lexeme → term frequency (its positions; a lexeme without positions counts once) of a tsvector's text. */
export function termFrequencies(vector: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const [, quoted, positions] of vector.matchAll(LEXEME)) {
    const lexeme = quoted!.replace(/''/g, "'").replace(/\\(.)/g, '$1');
    found.set(lexeme, positions ? positions.split(',').length : 1);
  }
  return found;
}

/**
 * BM25 with conversation context over the turns read (in sequence order): a turn that matched, or
 * lies within \`window\` turns of one, scores with its own term frequencies and length plus
 * \`weight\` times its neighbours', against the average length times the window's total weight.
 */
function scoreTurns(
  rows: readonly ScoredRow[],
  terms: readonly Term[],
  p: { k1: number; b: number; avgdl: number; window: number; weight: number; dateBonus: number },
): RankedId[] {
  const tfs = rows.map((row) => termFrequencies(row.found ?? ''));
  const norm = Math.max(p.avgdl * (1 + p.weight * 2 * p.window), 1);
  const scored: RankedId[] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    const near: number[] = [];
    for (let j = Math.max(0, i - p.window); j <= Math.min(rows.length - 1, i + p.window); j++) {
      if (j !== i && rows[j]!.sequence === row.sequence && rows[j]!.usable) near.push(j);
    }
    if (!row.usable || !row.allowed || !(row.matched || near.some((j) => rows[j]!.matched))) continue;
    const len = row.len! + p.weight * near.reduce((sum, j) => sum + rows[j]!.len!, 0);
    let score = row.dated ? p.dateBonus : 0;
    for (const term of terms) {
      const tf = (tfs[i]!.get(term.lexeme) ?? 0) + p.weight * near.reduce((sum, j) => sum + (tfs[j]!.get(term.lexeme) ?? 0), 0);
      if (tf > 0) score += (term.weight * (tf * (p.k1 + 1))) / (tf + p.k1 * (1 - p.b + (p.b * len) / norm));
    }
    if (score > 0) scored.push({ id: row.id, score });
  }
  return scored;
}
