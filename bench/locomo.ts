/**
 * Recall on agent conversations: LoCoMo (Maharana et al., ACL 2024; issue 27). Every turn of a
 * conversation is written as an episodic fact (`<speaker> said, "<text>"`, the paper's format),
 * one tenant per conversation, through writeFacts (the batch route's verb) 500 at a time, then
 * embedded with the given provider as the embed jobs do; every question is asked through
 * retrieve() in each mode with limit 50. Recall@k is the paper's "dialog" measure: the share of a
 * question's evidence turns among the top k. Beside them, plain Okapi BM25 computed here over the
 * same turns' PostgreSQL English lexemes, a reference that shares no code with Mnemo's search.
 *
 * The data (`data/locomo10.json` of snap-research/LoCoMo) is CC BY-NC 4.0: never in the
 * repository. `npm run bench -- --only=locomo --locomo=PATH` reads it (bench/index.ts); the tests
 * run this module on invented conversations in the same format (test/fixtures/locomo/).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import type { Db } from '../src/db/client.ts';
import type { EmbeddingProvider } from '../src/embeddings/provider.ts';
import { writeFacts } from '../src/memory/facts/insert.ts';
import { type WriteFactBody, WriteFactsBodySchema } from '../src/memory/facts/schemas.ts';
import { ensureConfiguredModel } from '../src/memory/facts/vectors.ts';
import { type QueryEmbedder, type RetrievalCaller, retrieve } from '../src/memory/retrieval/retrieve.ts';
import { admin, type Percentiles, percentiles, timed, UsageError } from './harness.ts';
import { embedAll, embedderFor, retrieveRanker, SEARCH_MODES, type SearchMode } from './ir.ts';

/** Where the data comes from, said wherever it is missing. */
export const LOCOMO_SOURCE =
  'data/locomo10.json of the snap-research/LoCoMo repository on GitHub (licence CC BY-NC 4.0, so Mnemo does not ship it)';

/**
 * `dev` (conversations 0–4) is the one to tune on; `heldout` (5–9) is run once at the end and
 * reported, never tuned on (issue 27).
 */
export const LOCOMO_SPLITS = ['dev', 'heldout', 'all'] as const;
export type LocomoSplit = (typeof LOCOMO_SPLITS)[number];

/** What `npm run bench` was asked for (bench/side-by-side.ts parses it). */
export interface LocomoOptions {
  path: string;
  split: LocomoSplit;
  /** Where to write each question's outcome (writeAnswers), if anywhere. */
  misses?: string;
  /** Semantic weights to also fuse `both` with (the request's `weights`), to measure fusion on conversations. */
  fusion?: number[];
}

export const RECALL_KS = [1, 5, 10, 25, 50] as const;
/** What retrieve() is asked for: the deepest k. */
export const LOCOMO_LIMIT = 50;
/** Facts per writeFacts call, as the issue's client sent them to `POST /v1/memory/facts:batch`. */
export const WRITE_BATCH = 500;
export const LOCOMO_FACT_TYPE = 'locomo.turn';
export const LOCOMO_PROJECT = 'locomo';

/** The plain BM25 reference's parameters: the textbook ones, not Mnemo's tuned b. */
export const PLAIN_BM25 = { k1: 1.2, b: 0.75 } as const;

/** LoCoMo paper, Table 3, dialog as the retrieval unit, DRAGON: R@5, R@10, R@25, R@50 (no R@1). */
export const DRAGON: Partial<Record<(typeof RECALL_KS)[number], number>> = { 5: 0.567, 10: 0.662, 25: 0.767, 50: 0.827 };

export interface LocomoTurn {
  /** "D3:12": session 3, turn 12. */
  diaId: string;
  speaker: string;
  text: string;
  session: number;
  /** The session's date and time plus one second per turn before this one in the session. */
  observedAt: string;
}

export interface LocomoQuestion {
  /** `<sample_id>:q<index in qa>`. */
  id: string;
  question: string;
  category: number;
  /** The turns the answer rests on (dia ids), the data's strings split; some name no turn. */
  evidence: string[];
}

export interface LocomoConversation {
  sampleId: string;
  turns: LocomoTurn[];
  questions: LocomoQuestion[];
}

const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'];

/** "1:56 pm on 8 May, 2023" (LoCoMo's session date-times), read as UTC: the data names no zone. */
export function parseSessionTime(text: string): Date {
  const match = /^\s*(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})\s*$/i.exec(text);
  const month = match ? MONTHS.findIndex((m) => m.startsWith(match[5]!.toLowerCase()) && match[5]!.length >= 3) : -1;
  const [hour, minute, day] = match ? [Number(match[1]), Number(match[2]), Number(match[4])] : [];
  if (!match || month < 0 || hour! < 1 || hour! > 12 || minute! > 59 || day! < 1 || day! > 31) {
    throw new Error(`not a LoCoMo session date-time ("1:56 pm on 8 May, 2023"): ${JSON.stringify(text)}`);
  }
  // 12 am is midnight, 12 pm noon.
  const hour24 = (hour! % 12) + (match[3]!.toLowerCase() === 'pm' ? 12 : 0);
  return new Date(Date.UTC(Number(match[6]), month, day!, hour24, minute!));
}

/** A question's evidence strings as dia ids: some hold several ("D8:6; D9:17", "D9:1 D4:4"). Repeats count once. */
export function evidenceIds(evidence: readonly string[]): string[] {
  return [...new Set(evidence.flatMap((entry) => entry.split(/[\s;,]+/)).filter(Boolean))];
}

/** The episodeId of a turn (and of an evidence id, which may name no turn). */
export const episodeIdOf = (sampleId: string, diaId: string) => `${sampleId}:${diaId}`;

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Every conversation of a LoCoMo file, in the file's order. */
export function parseLocomo(json: unknown): LocomoConversation[] {
  if (!Array.isArray(json)) throw new Error('LoCoMo data is an array of samples');
  return json.map((sample: unknown, index) => {
    const where = `sample ${index}`;
    if (!isObject(sample) || typeof sample.sample_id !== 'string' || !isObject(sample.conversation) || !Array.isArray(sample.qa)) {
      throw new Error(`${where}: needs sample_id, conversation and qa`);
    }
    const { sample_id: sampleId, conversation } = sample;
    const sessions = Object.keys(conversation)
      .map((key) => /^session_(\d+)$/.exec(key))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
    const turns = sessions.flatMap((session) => {
      const dialogue = conversation[`session_${session}`];
      const dateTime = conversation[`session_${session}_date_time`];
      if (!Array.isArray(dialogue) || typeof dateTime !== 'string') throw new Error(`${sampleId}: session_${session} needs its turns and session_${session}_date_time`);
      const start = parseSessionTime(dateTime).getTime();
      return dialogue.map((turn: unknown, i): LocomoTurn => {
        if (!isObject(turn) || typeof turn.speaker !== 'string' || typeof turn.dia_id !== 'string' || typeof turn.text !== 'string') {
          throw new Error(`${sampleId}: session_${session} turn ${i} needs speaker, dia_id and text`);
        }
        return { diaId: turn.dia_id, speaker: turn.speaker, text: turn.text, session, observedAt: new Date(start + i * 1000).toISOString() };
      });
    });
    const questions = sample.qa.map((qa: unknown, i): LocomoQuestion => {
      if (!isObject(qa) || typeof qa.question !== 'string' || typeof qa.category !== 'number' || !Array.isArray(qa.evidence)) {
        throw new Error(`${sampleId}: qa ${i} needs question, category and evidence`);
      }
      return { id: `${sampleId}:q${i}`, question: qa.question, category: qa.category, evidence: evidenceIds(qa.evidence.map(String)) };
    });
    return { sampleId, turns, questions };
  });
}

/** The conversations of a split: dev the first five, heldout the next five, or all. */
export function splitOf<T>(conversations: readonly T[], split: LocomoSplit): T[] {
  if (split === 'dev') return conversations.slice(0, 5);
  if (split === 'heldout') return conversations.slice(5, 10);
  return [...conversations];
}

/** The conversations of `split` in the LoCoMo file at `path`. */
export function loadLocomo(path: string, split: LocomoSplit = 'dev'): LocomoConversation[] {
  if (!existsSync(path)) throw new UsageError(`no LoCoMo data at ${path}; it is ${LOCOMO_SOURCE}`);
  let conversations: LocomoConversation[];
  try {
    conversations = parseLocomo(JSON.parse(readFileSync(path, 'utf8')));
  } catch (error) {
    throw new UsageError(`${path} is not LoCoMo's format (${error instanceof Error ? error.message : String(error)}); the data is ${LOCOMO_SOURCE}`);
  }
  return splitOf(conversations, split);
}

/** A turn's text as the paper's retrievers saw it. */
export const turnText = (turn: LocomoTurn) => `${turn.speaker} said, "${turn.text}"`;

/** A turn as the issue's client wrote it: what a conversational memory's writer knows. */
export function turnFact(sampleId: string, turn: LocomoTurn): WriteFactBody {
  return {
    type: LOCOMO_FACT_TYPE,
    content: { text: turnText(turn) },
    memoryKind: 'episodic',
    episodeId: episodeIdOf(sampleId, turn.diaId),
    scope: { projectId: LOCOMO_PROJECT, threadId: sampleId, sessionId: `${sampleId}-s${turn.session}` },
    observedAt: turn.observedAt,
  };
}

/** The share of `evidence` (distinct ids) among the first k of `ranked`: the paper's dialog recall@k. */
export function evidenceRecall(k: number, ranked: readonly string[], evidence: readonly string[]): number {
  const wanted = new Set(evidence);
  if (wanted.size === 0) throw new Error('recall of a question without evidence');
  const top = new Set(ranked.slice(0, k));
  return [...wanted].filter((id) => top.has(id)).length / wanted.size;
}

/** The rankings compared: retrieve() in each mode, and the bench's own plain BM25. */
export type LocomoRanker = SearchMode | 'bm25';
export const LOCOMO_RANKERS: readonly LocomoRanker[] = [...SEARCH_MODES, 'bm25'];

/** One question's outcome: its evidence and each ranking, as episodeIds, best first. */
export interface LocomoAnswer {
  id: string;
  conversation: string;
  category: number;
  question: string;
  evidence: string[];
  ranked: Record<LocomoRanker, string[]>;
}

/** Mean recall at each of RECALL_KS, per ranker. */
export type RecallTable = Record<LocomoRanker, number[]>;

export interface LocomoSummary {
  /** Questions asked (all of them), and those left out of the means for having no evidence. */
  questions: number;
  withoutEvidence: number;
  /** Evidence ids that name no turn of their conversation: counted as missed. */
  unknownEvidence: number;
  recall: RecallTable;
  categories: { category: number; questions: number; recall: RecallTable }[];
}

function meanRecall(answers: readonly LocomoAnswer[]): RecallTable {
  const table = {} as RecallTable;
  for (const ranker of LOCOMO_RANKERS) {
    table[ranker] = RECALL_KS.map((k) =>
      answers.length === 0 ? Number.NaN : answers.reduce((sum, a) => sum + evidenceRecall(k, a.ranked[ranker], a.evidence), 0) / answers.length,
    );
  }
  return table;
}

/** Recall@k averaged over the questions that have evidence, overall and per category. */
export function summarize(answers: readonly LocomoAnswer[], turnIds: ReadonlySet<string>): LocomoSummary {
  const measured = answers.filter((a) => a.evidence.length > 0);
  const categories = [...new Set(measured.map((a) => a.category))].sort((a, b) => a - b);
  return {
    questions: answers.length,
    withoutEvidence: answers.length - measured.length,
    unknownEvidence: measured.reduce((n, a) => n + a.evidence.filter((id) => !turnIds.has(id)).length, 0),
    recall: meanRecall(measured),
    categories: categories.map((category) => {
      const of = measured.filter((a) => a.category === category);
      return { category, questions: of.length, recall: meanRecall(of) };
    }),
  };
}

/** Lexeme → count, as PostgreSQL's to_tsvector('english', …) sees a text. */
export type Lexemes = Map<string, number>;

/** Each text's English lexemes with their counts (positions), in one statement. */
export async function lexemesOf(db: Db, texts: readonly string[]): Promise<Lexemes[]> {
  const rows = (await db.execute(sql`
    select t.i::int as i, l.lexeme, coalesce(array_length(l.positions, 1), 1)::int as tf
    from json_array_elements_text(${JSON.stringify(texts)}::json) with ordinality as t(text, i),
      unnest(to_tsvector('english', t.text)) as l`)) as unknown as { i: number; lexeme: string; tf: number }[];
  const out = texts.map((): Lexemes => new Map());
  for (const row of rows) out[row.i - 1]!.set(row.lexeme, row.tf);
  return out;
}

/**
 * Okapi BM25 over a fixed set of documents: idf ln(1 + (N − n + 0.5) / (n + 0.5)) (Lucene's form,
 * never negative), a query lexeme counted as often as the query repeats it, a document matching
 * when it has any query lexeme; ties in document order.
 */
export class PlainBm25 {
  private readonly df = new Map<string, number>();
  private readonly lengths: number[];
  private readonly averageLength: number;

  constructor(
    private readonly docs: readonly Lexemes[],
    private readonly params: { k1: number; b: number } = PLAIN_BM25,
  ) {
    for (const doc of docs) for (const lexeme of doc.keys()) this.df.set(lexeme, (this.df.get(lexeme) ?? 0) + 1);
    this.lengths = docs.map((doc) => [...doc.values()].reduce((a, b) => a + b, 0));
    this.averageLength = this.lengths.reduce((a, b) => a + b, 0) / Math.max(1, docs.length);
  }

  /** The score of document `index` for `query`. */
  score(query: Lexemes, index: number): number {
    const { k1, b } = this.params;
    const doc = this.docs[index]!;
    const n = this.docs.length;
    let score = 0;
    for (const [lexeme, qtf] of query) {
      const tf = doc.get(lexeme);
      if (!tf) continue;
      const df = this.df.get(lexeme)!;
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
      score += qtf * idf * ((tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * this.lengths[index]!) / this.averageLength)));
    }
    return score;
  }

  /** Indexes of the documents holding any query lexeme, best first, at most `depth`. */
  rank(query: Lexemes, depth: number): number[] {
    const scored: { index: number; score: number }[] = [];
    for (let index = 0; index < this.docs.length; index++) {
      if (![...query.keys()].some((lexeme) => this.docs[index]!.has(lexeme))) continue;
      scored.push({ index, score: this.score(query, index) });
    }
    return scored
      .sort((a, c) => c.score - a.score || a.index - c.index)
      .slice(0, depth)
      .map((s) => s.index);
  }
}

export interface ConversationStats {
  sampleId: string;
  tenantId: string;
  turns: number;
  questions: number;
  writeSeconds: number;
  embedSeconds: number;
  askSeconds: number;
}

export interface LocomoResult extends LocomoSummary {
  split: LocomoSplit;
  conversations: ConversationStats[];
  /** `both` with each weight of `--locomo-fusion` (keyword 1): recall at RECALL_KS. */
  fusion?: { semantic: number; recall: number[] }[];
  /** retrieve() per call, ms (the query's embedding included in semantic and both). */
  latency: Record<SearchMode, Percentiles>;
  seconds: number;
}

export interface LocomoBenchOptions {
  split: LocomoSplit;
  /** Each conversation's tenant (default `locomo-<sample_id>`). */
  tenantOf?: (sampleId: string) => string;
  /** ANALYZE after the loads (the owner's connection), as autovacuum would. */
  analyze?: () => Promise<void>;
  log?: (line: string) => void;
  /** Semantic weights to fuse `both` with besides the default. */
  fusion?: readonly number[];
}

/** Every conversation written, embedded and questioned; the measures, and each question's answer. */
export async function benchLocomo(
  db: Db,
  provider: EmbeddingProvider,
  conversations: readonly LocomoConversation[],
  options: LocomoBenchOptions,
): Promise<{ result: LocomoResult; answers: LocomoAnswer[] }> {
  const { tenantOf = (id: string) => `locomo-${id}`, analyze = async () => {}, log = () => {} } = options;
  const started = performance.now();
  const model = await ensureConfiguredModel(db, provider);
  const embedder = embedderFor(provider);
  const answers: LocomoAnswer[] = [];
  const stats: ConversationStats[] = [];
  const samples: Record<SearchMode, number[]> = { keyword: [], semantic: [], both: [] };
  const turnIds = new Set<string>();
  const fusion = (options.fusion ?? []).map((semantic) => ({ semantic, sums: RECALL_KS.map(() => 0), questions: 0 }));

  for (const conversation of conversations) {
    const { sampleId, turns, questions } = conversation;
    const principal = admin(tenantOf(sampleId));
    const caller = { db, principal };
    const episodeOf = new Map<string, string>();
    for (const turn of turns) turnIds.add(episodeIdOf(sampleId, turn.diaId));

    let phase = performance.now();
    for (let from = 0; from < turns.length; from += WRITE_BATCH) {
      // Parsed as the batch route parses its body: the bench writes only what a client could send.
      const { facts } = WriteFactsBodySchema.parse({ facts: turns.slice(from, from + WRITE_BATCH).map((turn) => turnFact(sampleId, turn)) });
      for (const fact of await writeFacts(caller, facts)) episodeOf.set(fact.id, fact.episodeId!);
    }
    const writeSeconds = (performance.now() - phase) / 1000;

    phase = performance.now();
    const embedded = await embedAll(db, provider, principal.tenantId, model, { batch: 64, expected: turns.length });
    if (embedded !== turns.length) throw new Error(`${sampleId}: embedded ${embedded} of ${turns.length} turns`);
    const embedSeconds = (performance.now() - phase) / 1000;
    await analyze();
    log(`locomo ${sampleId}: ${turns.length} turns written in ${writeSeconds.toFixed(1)} s, embedded in ${embedSeconds.toFixed(1)} s; asking ${questions.length} questions…`);

    phase = performance.now();
    const ctx: RetrievalCaller & { embedder: QueryEmbedder } = { ...caller, embedder };
    const rankers = Object.fromEntries(SEARCH_MODES.map((mode) => [mode, retrieveRanker(ctx, mode)]));
    const bm25 = new PlainBm25(await lexemesOf(db, turns.map(turnText)));
    const queries = await lexemesOf(db, questions.map((q) => q.question));
    const asked: LocomoAnswer[] = [];
    for (const [i, question] of questions.entries()) {
      const ranked = {} as Record<LocomoRanker, string[]>;
      // Modes interleaved question by question, so a change of load hits them alike.
      for (const mode of SEARCH_MODES) {
        const { ms, value } = await timed(() => rankers[mode]!(question.question, LOCOMO_LIMIT));
        samples[mode].push(ms);
        ranked[mode] = value.map((id) => episodeOf.get(id)!);
      }
      for (const variant of fusion) {
        if (question.evidence.length === 0) continue;
        const { results } = await retrieve(ctx, { mode: 'both', query: question.question, limit: LOCOMO_LIMIT, weights: { keyword: 1, semantic: variant.semantic } });
        const found = results.map((r) => episodeOf.get(r.fact.id)!);
        const evidence = question.evidence.map((id) => episodeIdOf(sampleId, id));
        RECALL_KS.forEach((k, j) => (variant.sums[j]! += evidenceRecall(k, found, evidence)));
        variant.questions++;
      }
      ranked.bm25 = bm25.rank(queries[i]!, LOCOMO_LIMIT).map((index) => episodeIdOf(sampleId, turns[index]!.diaId));
      asked.push({
        id: question.id,
        conversation: sampleId,
        category: question.category,
        question: question.question,
        evidence: question.evidence.map((id) => episodeIdOf(sampleId, id)),
        ranked,
      });
    }
    answers.push(...asked);
    const askSeconds = (performance.now() - phase) / 1000;
    stats.push({ sampleId, tenantId: principal.tenantId, turns: turns.length, questions: questions.length, writeSeconds, embedSeconds, askSeconds });
    const at10 = summarize(asked, turnIds).recall;
    const k10 = RECALL_KS.indexOf(10);
    log(`locomo ${sampleId}: R@10 ${LOCOMO_RANKERS.map((r) => `${r} ${(at10[r][k10]! * 100).toFixed(1)}`).join(', ')} (${askSeconds.toFixed(1)} s)`);
  }

  const latency = Object.fromEntries(SEARCH_MODES.map((mode) => [mode, percentiles(samples[mode])])) as Record<SearchMode, Percentiles>;
  return {
    result: {
      split: options.split,
      conversations: stats,
      ...summarize(answers, turnIds),
      ...(fusion.length > 0 ? { fusion: fusion.map((v) => ({ semantic: v.semantic, recall: v.sums.map((sum) => sum / v.questions) })) } : {}),
      latency,
      seconds: (performance.now() - started) / 1000,
    },
    answers,
  };
}

/** The per-question file of `--locomo-misses`: one JSON object a line, the top 10 of each ranking. */
export function writeAnswers(path: string, answers: readonly LocomoAnswer[]): void {
  const lines = answers.map(({ ranked, ...answer }) =>
    JSON.stringify({ ...answer, top10: Object.fromEntries(LOCOMO_RANKERS.map((r) => [r, ranked[r].slice(0, 10)])) }),
  );
  writeFileSync(path, lines.length > 0 ? `${lines.join('\n')}\n` : '');
}
