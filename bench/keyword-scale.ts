/**
 * Keyword search at tenant scale (issue 12, part 1): p50 / p95 of Mnemo's keyword search, of the
 * search it replaced (BM25 with every statistic counted per query and every match scored, kept
 * below as `previousKeywordSearch` for the comparison only), and of a plain `ts_rank` OR over the
 * same words, at each size, as ratios to the plain `ts_rank` in the same run.
 *
 * Data: one tenant holding `size` facts, and ten other tenants holding as many again between them
 * (the GIN index on (tenant_id, search_vector) is shared). The texts are the shared IR
 * collections' documents (cranfield, med, cacm under IR_ROOT) recombined: each fact takes the
 * title of one document and halves of two others, so its vocabulary and lengths are real. Loaded
 * 1,000 facts per statement through the app role (row-level security, the statistics trigger);
 * the sizes are reached one after the other in the same database. Queries: a fixed sample of the
 * collections' judged queries (short cranfield and med ones, paragraph-long cacm ones), the
 * methods interleaved query by query so that load on the machine hits them alike.
 *
 * Usage: `keywordScaleBench({ sizes: [10_000, 100_000], log })` with DATABASE_ADMIN_URL or
 * DATABASE_URL naming a role that may create databases and roles; the scratch database and roles
 * are dropped at the end. Standalone: `node --import tsx bench/keyword-scale.ts [size…]`.
 */
import { randomUUID } from 'node:crypto';
import { and, eq, type SQL, sql } from 'drizzle-orm';
import { type Principal, visibleTo } from '../src/auth/permissions.ts';
import { type Db, type Tx, withTenant } from '../src/db/client.ts';
import { facts } from '../src/db/schema.ts';
import { live } from '../src/memory/facts/conditions.ts';
import { BM25, keptWords, keywordSearch } from '../src/memory/retrieval/keyword.ts';
import { parseSearchQuery, SEARCH_LEXEMES_MAX, type SearchTerm } from '../src/memory/retrieval/search-query.ts';
import { createScratchDatabase } from '../support/database.ts';
import { databaseServer, runWhenMain } from './harness.ts';
import { IR_ROOT, loadCollection, percentile } from './ir.ts';

export type KeywordMethod = 'mnemo' | 'previous' | 'ts_rank';

export interface Row {
  /** Facts in the searched tenant. */
  size: number;
  method: KeywordMethod;
  /** Results asked for: 10 as a keyword search, 100 as the keyword half of `both`. */
  depth: number;
  p50: number;
  p95: number;
  /** p50 over the plain ts_rank p50 at the same size and depth. */
  ratio: number;
  samples: number;
  /** Load average (1 minute) when the size was measured. */
  load: number;
}

const COLLECTIONS = ['cranfield', 'med', 'cacm'];
const QUERIES = 40;
const ROUNDS = 2;
const OTHER_TENANTS = 10;
const BATCH = 1000;

const admin = (tenantId: string): Principal => ({ tenantId, sub: 'bench', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

export async function keywordScaleBench(options: { sizes: number[]; log: (line: string) => void }): Promise<Row[]> {
  const { sizes, log } = options;
  const serverUrl = databaseServer(process.env);
  const collections = COLLECTIONS.map((name) => loadCollection(name, IR_ROOT));
  const docs = collections.flatMap((c) => c.docs);
  const allQueries = collections.flatMap((c) => c.queries.map((q) => q.text));
  const queries = Array.from({ length: QUERIES }, (_, i) => allQueries[Math.floor((i * allQueries.length) / QUERIES)]!);

  const database = await createScratchDatabase(serverUrl, 'keyword', { app: 2, admin: 1, applicationName: 'mnemo-bench-keyword' });
  const { app, admin: owner } = database;
  const rows: Row[] = [];
  try {
    const main = 'kw-scale-main';
    const others = Array.from({ length: OTHER_TENANTS }, (_, i) => `kw-scale-other-${i}`);
    let loaded = 0;
    for (const size of [...sizes].sort((a, b) => a - b)) {
      const started = performance.now();
      await loadSyntheticFacts(app.db, main, docs, loaded, size);
      for (const [i, tenant] of others.entries()) {
        const share = (n: number) => Math.floor(n / OTHER_TENANTS) + (i < n % OTHER_TENANTS ? 1 : 0);
        await loadSyntheticFacts(app.db, tenant, docs, share(loaded), share(size), i + 1);
      }
      loaded = size;
      // As autovacuum would leave it: planner statistics, and the GIN index's pending list merged
      // (a bulk load leaves thousands of entries there, which every search would read).
      await owner`vacuum analyze`;
      log(`keyword-scale: ${size} facts in the searched tenant (+${size} in ${OTHER_TENANTS} others) loaded in ${((performance.now() - started) / 1000).toFixed(0)} s`);
      rows.push(...(await measure(app.db, admin(main), queries, size)));
      for (const row of rows.filter((r) => r.size === size)) {
        log(`keyword-scale: ${size} ${row.method}@${row.depth}: p50 ${row.p50.toFixed(1)} ms, p95 ${row.p95.toFixed(1)} ms, ${row.ratio.toFixed(2)}× ts_rank (load ${row.load.toFixed(1)})`);
      }
    }
  } finally {
    await database.drop();
  }
  return rows;
}

/** Writes facts from..to (exclusive) of a tenant's synthetic sequence, BATCH per statement. */
export async function loadSyntheticFacts(db: Db, tenantId: string, docs: readonly { title: string; text: string }[], from: number, to: number, seed = 0) {
  const pick = (i: number, salt: number) => docs[(i * 7919 + salt * 104729 + seed * 15485863) % docs.length]!;
  const half = (text: string, second: boolean) => {
    const words = text.split(/\s+/);
    const middle = Math.ceil(words.length / 2);
    return (second ? words.slice(middle) : words.slice(0, middle)).join(' ');
  };
  for (let start = from; start < to; start += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, to - start) }, (_, k) => {
      const i = start + k;
      return { id: randomUUID(), text: `${half(pick(i, 1).text, false)} ${half(pick(i, 2).text, true)}`, title: pick(i, 3).title };
    });
    await withTenant(db, tenantId, (tx) =>
      tx.execute(sql`
        insert into facts (tenant_id, id, version, type, content, trust, asserted_by_kind, asserted_by_id, created_at)
        select mnemo_current_tenant(), b.id, 1, 'bench.doc', jsonb_build_object('title', b.title, 'text', b.text), 'asserted', 'service', 'bench', now()
        from jsonb_to_recordset(${JSON.stringify(batch)}::jsonb) as b(id uuid, title text, text text)
      `),
    );
  }
}

async function measure(db: Db, principal: Principal, queries: readonly string[], size: number): Promise<Row[]> {
  const methods: { method: KeywordMethod; depth: number; run: (tx: Tx, query: string) => Promise<unknown> }[] = [
    { method: 'ts_rank', depth: 10, run: (tx, q) => plainTsRank(tx, principal, q, 10) },
    { method: 'mnemo', depth: 10, run: (tx, q) => keywordSearch(tx, principal, q, [live()], 10) },
    { method: 'previous', depth: 10, run: (tx, q) => previousKeywordSearch(tx, principal, q, [live()], 10) },
    { method: 'ts_rank', depth: 100, run: (tx, q) => plainTsRank(tx, principal, q, 100) },
    { method: 'mnemo', depth: 100, run: (tx, q) => keywordSearch(tx, principal, q, [live()], 100) },
  ];
  const samples = methods.map(() => [] as number[]);
  const time = async (m: (typeof methods)[number], query: string) => {
    const started = performance.now();
    await withTenant(db, principal.tenantId, (tx) => m.run(tx, query), { isolationLevel: 'repeatable read', accessMode: 'read only' });
    return performance.now() - started;
  };
  for (const query of queries.slice(0, 5)) for (const m of methods) await time(m, query);
  for (let round = 0; round < ROUNDS; round++) {
    for (const query of queries) for (const [i, m] of methods.entries()) samples[i]!.push(await time(m, query));
  }
  const load = Number((await import('node:os')).loadavg()[0]);
  const base = (depth: number) => percentile(samples[methods.findIndex((m) => m.method === 'ts_rank' && m.depth === depth)]!, 50);
  return methods.map((m, i) => {
    const p50 = percentile(samples[i]!, 50);
    return { size, method: m.method, depth: m.depth, p50, p95: percentile(samples[i]!, 95), ratio: p50 / base(m.depth), samples: samples[i]!.length, load };
  });
}

/** The baseline: the query's first SEARCH_LEXEMES_MAX lexemes OR'd, ranked by ts_rank, over the same visible live facts. */
async function plainTsRank(tx: Tx, principal: Principal, query: string, depth: number): Promise<unknown> {
  return tx.execute(sql`
    with q as materialized (
      select string_agg(mnemo_lexeme_query(lexeme)::text, ' | ')::tsquery as q
      from (select lexeme from unnest(to_tsvector('english', ${query})) limit ${SEARCH_LEXEMES_MAX}) l
    )
    select id from facts
    where ${and(visibleTo(principal, facts), live())} and search_vector @@ (select q from q)
    order by ts_rank(search_vector, (select q from q)) desc, id desc
    limit ${depth}
  `);
}

const termQuery = (term: SearchTerm) =>
  term.phrase ? sql`phraseto_tsquery('english', ${term.text})` : sql`plainto_tsquery('english', ${term.text})`;

/**
 * The keyword search as it was before issue 12 (commit f66be28): the number of documents, the
 * average length and each term's document frequency counted per query over the visible matching
 * facts, then every match scored. Kept here only as the comparison's baseline.
 */
export async function previousKeywordSearch(tx: Tx, principal: Principal, query: string, corpus: SQL[], depth: number) {
  const { include, exclude, includedText } = parseSearchQuery(query);
  if (include.length === 0) return [];
  const words = include.filter((t) => !t.phrase).map((t) => t.text);
  const phrases = include.filter((t) => t.phrase);
  const phraseText = phrases.map((t) => t.text).join(' ');
  const anyPhrase = phrases.map((t) => sql` || ${termQuery(t)}`);
  const excluded = exclude.map((t) => sql` && !! ${termQuery(t)}`);
  // The tenant named besides row-level security, as the app's statements do (a router query on Citus).
  const searchable = and(eq(facts.tenantId, principal.tenantId), visibleTo(principal, facts), ...corpus)!;
  const k1 = sql.raw(String(BM25.k1));
  const b = sql.raw(String(BM25.b));
  const rows = (await tx.execute(sql`
    with kept as materialized (${keptWords(words)}),
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

runWhenMain(import.meta.url, () => {
  const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0);
  return keywordScaleBench({ sizes: sizes.length > 0 ? sizes : [10_000], log: (line) => process.stderr.write(`${line}\n`) });
});
