/**
 * The LoCoMo bench's pure parts (bench/locomo.ts): reading LoCoMo's format, the splits, session
 * times, evidence ids, the fact each turn becomes, recall@k and the plain BM25 reference, with
 * expectations computed by hand; and its wiring into `npm run bench`'s options and results.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../bench/harness.ts';
import {
  evidenceIds,
  evidenceRecall,
  type Lexemes,
  loadLocomo,
  type LocomoAnswer,
  type LocomoResult,
  parseLocomo,
  parseSessionTime,
  PlainBm25,
  splitOf,
  summarize,
  turnFact,
} from '../../bench/locomo.ts';
import { renderLocomo, renderMarkdown } from '../../bench/results.ts';
import { parseOptions } from '../../bench/side-by-side.ts';
import type { SideBySideRun } from '../../bench/side-by-side-run.ts';
import { WriteFactBodySchema } from '../../src/memory/facts/schemas.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/locomo/conversations.json', import.meta.url));

describe('LoCoMo session date-times', () => {
  it('are read as UTC, 12 am as midnight and 12 pm as noon', () => {
    expect(parseSessionTime('1:56 pm on 8 May, 2023').toISOString()).toBe('2023-05-08T13:56:00.000Z');
    expect(parseSessionTime('10:04 am on 19 December, 2023').toISOString()).toBe('2023-12-19T10:04:00.000Z');
    expect(parseSessionTime('12:05 am on 3 February, 2024').toISOString()).toBe('2024-02-03T00:05:00.000Z');
    expect(parseSessionTime('12:30 pm on 20 April, 2024').toISOString()).toBe('2024-04-20T12:30:00.000Z');
  });

  it('refuse what is not one, naming it', () => {
    expect(() => parseSessionTime('2023-05-08 13:56')).toThrow(/not a LoCoMo session date-time.*2023-05-08 13:56/);
    expect(() => parseSessionTime('13:56 pm on 8 May, 2023')).toThrow(/not a LoCoMo/);
    expect(() => parseSessionTime('1:56 pm on 8 Maytime, 2023')).toThrow(/not a LoCoMo/);
  });
});

describe('evidence ids', () => {
  it('split the strings that hold several, and count a repeat once', () => {
    expect(evidenceIds(['D8:6; D9:17'])).toEqual(['D8:6', 'D9:17']);
    expect(evidenceIds(['D9:1 D4:4 D4:6'])).toEqual(['D9:1', 'D4:4', 'D4:6']);
    expect(evidenceIds(['D1:3', 'D2:1', 'D1:3'])).toEqual(['D1:3', 'D2:1']);
    expect(evidenceIds([])).toEqual([]);
  });
});

describe('reading LoCoMo’s format', () => {
  const [f1, f2] = loadLocomo(FIXTURE, 'all');

  it('gives every turn in session order with its time, one second more per turn', () => {
    expect(f1!.sampleId).toBe('conv-f1');
    expect(f1!.turns).toHaveLength(14);
    expect(f2!.turns).toHaveLength(15);
    expect(f1!.turns[0]).toEqual({
      diaId: 'D1:1',
      speaker: 'Ingrid',
      text: 'Hi Tomas! I spent the whole weekend at the allotment planting garlic.',
      session: 1,
      observedAt: '2024-03-02T15:15:00.000Z',
    });
    // D2:3 is the third turn of a session that started at 10:02 am.
    expect(f1!.turns[9]).toMatchObject({ diaId: 'D2:3', session: 2, observedAt: '2024-03-18T10:02:02.000Z' });
    expect(f2!.turns.map((t) => t.diaId).slice(4, 6)).toEqual(['D1:5', 'D2:1']);
    expect(f2!.turns[5]!.observedAt).toBe('2024-02-03T00:05:00.000Z');
  });

  it('gives every question with an id, its category and its evidence split', () => {
    expect(f1!.questions).toHaveLength(6);
    expect(f2!.questions).toHaveLength(5);
    expect(f1!.questions[2]).toEqual({ id: 'conv-f1:q2', question: 'What went wrong for Tomas and Ingrid in March?', category: 1, evidence: ['D2:1', 'D2:2'] });
    expect(f1!.questions[5]!.evidence).toEqual([]);
    expect(f2!.questions[3]!.evidence).toEqual(['D3:3', 'D3:9']);
  });

  it('sorts sessions by number, not by key order', () => {
    const [c] = parseLocomo([
      {
        sample_id: 'x',
        qa: [],
        conversation: {
          session_10: [{ speaker: 'A', dia_id: 'D10:1', text: 'later' }],
          session_10_date_time: '1:00 pm on 2 May, 2023',
          session_2: [{ speaker: 'A', dia_id: 'D2:1', text: 'earlier' }],
          session_2_date_time: '1:00 pm on 1 May, 2023',
        },
      },
    ]);
    expect(c!.turns.map((t) => [t.diaId, t.session])).toEqual([
      ['D2:1', 2],
      ['D10:1', 10],
    ]);
  });

  it('names what is missing', () => {
    expect(() => parseLocomo({})).toThrow(/array of samples/);
    expect(() => parseLocomo([{ sample_id: 'x', conversation: {}, qa: {} }])).toThrow(/sample 0: needs sample_id, conversation and qa/);
    expect(() => parseLocomo([{ sample_id: 'x', qa: [], conversation: { session_1: [] } }])).toThrow(/x: session_1 needs its turns and session_1_date_time/);
    expect(() =>
      parseLocomo([{ sample_id: 'x', qa: [], conversation: { session_1: [{ speaker: 'A', text: 'hi' }], session_1_date_time: '1:00 pm on 1 May, 2023' } }]),
    ).toThrow(/x: session_1 turn 0 needs speaker, dia_id and text/);
    expect(() => parseLocomo([{ sample_id: 'x', conversation: {}, qa: [{ question: 'q', category: 1 }] }])).toThrow(/x: qa 0 needs question, category and evidence/);
  });
});

describe('LoCoMo splits', () => {
  const ten = Array.from({ length: 10 }, (_, i) => `conv-${i}`);

  it('dev is conversations 0–4, heldout 5–9, all every one', () => {
    expect(splitOf(ten, 'dev')).toEqual(['conv-0', 'conv-1', 'conv-2', 'conv-3', 'conv-4']);
    expect(splitOf(ten, 'heldout')).toEqual(['conv-5', 'conv-6', 'conv-7', 'conv-8', 'conv-9']);
    expect(splitOf(ten, 'all')).toEqual(ten);
  });

  it('dev by default; the fixture’s two conversations are all dev', () => {
    expect(loadLocomo(FIXTURE).map((c) => c.sampleId)).toEqual(['conv-f1', 'conv-f2']);
    expect(loadLocomo(FIXTURE, 'heldout')).toEqual([]);
  });

  it('missing or foreign data is a usage error naming where to get it', () => {
    expect(() => loadLocomo('/nonexistent/locomo10.json')).toThrow(UsageError);
    expect(() => loadLocomo('/nonexistent/locomo10.json')).toThrow(/no LoCoMo data at \/nonexistent\/locomo10.json.*snap-research\/LoCoMo.*CC BY-NC 4.0/);
    const notLocomo = fileURLToPath(new URL('../fixtures/locomo/README.md', import.meta.url));
    expect(() => loadLocomo(notLocomo)).toThrow(/is not LoCoMo's format/);
  });
});

describe('a turn’s fact', () => {
  it('is the issue’s shape, and a body the batch route accepts', () => {
    const [f1] = loadLocomo(FIXTURE);
    const fact = turnFact('conv-f1', f1!.turns[9]!);
    expect(fact).toEqual({
      type: 'locomo.turn',
      content: { text: 'Tomas said, "Slugs? Did you try copper tape around the beds?"' },
      memoryKind: 'episodic',
      episodeId: 'conv-f1:D2:3',
      scope: { projectId: 'locomo', threadId: 'conv-f1', sessionId: 'conv-f1-s2' },
      observedAt: '2024-03-18T10:02:02.000Z',
    });
    expect(WriteFactBodySchema.parse(fact)).toEqual(fact);
  });
});

describe('recall@k', () => {
  it('is the share of the evidence among the top k', () => {
    const ranked = ['a', 'x', 'b', 'y'];
    expect(evidenceRecall(1, ranked, ['a', 'b'])).toBe(0.5);
    expect(evidenceRecall(2, ranked, ['a', 'b'])).toBe(0.5);
    expect(evidenceRecall(3, ranked, ['a', 'b'])).toBe(1);
    // An id naming no turn is never found.
    expect(evidenceRecall(50, ranked, ['a', 'ghost'])).toBe(0.5);
    expect(evidenceRecall(50, [], ['a'])).toBe(0);
    expect(() => evidenceRecall(5, ranked, [])).toThrow(/without evidence/);
  });

  const answer = (id: string, category: number, evidence: string[], keyword: string[]): LocomoAnswer => ({
    id,
    conversation: 'c',
    category,
    question: id,
    evidence,
    ranked: { keyword, semantic: keyword, both: [], bm25: evidence.filter((id) => id !== 'ghost') },
  });
  const x = (n: number) => Array.from({ length: n }, (_, i) => `x${i}`);
  const answers = [
    answer('a', 1, ['e1', 'e2'], ['e1', ...x(4), 'e2']), // R@1 .5, R@5 .5, R@10 1
    answer('b', 4, ['e3'], ['x', 'x2', 'e3']), // R@1 0, R@5 1
    answer('c', 4, [], ['e1']), // no evidence: left out
    answer('d', 4, ['e4', 'ghost'], [...x(30), 'e4']), // R@25 0, R@50 .5
  ];
  const summary = summarize(answers, new Set(['e1', 'e2', 'e3', 'e4']));

  it('is averaged over the questions with evidence, overall and per category', () => {
    expect(summary).toMatchObject({ questions: 4, withoutEvidence: 1, unknownEvidence: 1 });
    // k = 1, 5, 10, 25, 50
    const overall = summary.recall.keyword;
    [0.5 / 3, 1.5 / 3, 2 / 3, 2 / 3, 2.5 / 3].forEach((want, i) => expect(overall[i]).toBeCloseTo(want, 10));
    expect(summary.recall.semantic).toEqual(overall);
    expect(summary.recall.both).toEqual([0, 0, 0, 0, 0]);
    // bm25 ranks each question's known evidence alone: a .5 at k = 1, d .5 at every k (its ghost id).
    [2 / 3, 2.5 / 3, 2.5 / 3, 2.5 / 3, 2.5 / 3].forEach((want, i) => expect(summary.recall.bm25[i]).toBeCloseTo(want, 10));
    expect(summary.categories.map((c) => [c.category, c.questions])).toEqual([
      [1, 1],
      [4, 2],
    ]);
    expect(summary.categories[0]!.recall.keyword).toEqual([0.5, 0.5, 1, 1, 1]);
    expect(summary.categories[1]!.recall.keyword).toEqual([0, 0.5, 0.5, 0.5, 0.75]);
  });

  it('is printed beside DRAGON’s row, which has no R@1', () => {
    const result: LocomoResult = {
      ...summary,
      split: 'dev',
      conversations: [{ sampleId: 'c', tenantId: 'locomo-c', turns: 40, questions: 4, writeSeconds: 0.1, embedSeconds: 1, askSeconds: 1 }],
      latency: Object.fromEntries(['keyword', 'semantic', 'both'].map((m) => [m, { p50: 12.34, p95: 20, p99: 30, n: 4 }])) as LocomoResult['latency'],
      seconds: 3,
    };
    const text = renderLocomo(result);
    expect(text).toContain('### LoCoMo recall (dev split: c)');
    expect(text).toMatch(/\| Mnemo keyword +\| +16\.7 \| +50\.0 \| +66\.7 \| +66\.7 \| +83\.3 \| +12\.3 \/ 20\.0 \|/);
    expect(text).toMatch(/\| LoCoMo paper, DRAGON \(Table 3, dialog\) \| +— \| +56\.7 \| +66\.2 \| +76\.7 \| +82\.7 \| +— \|/);
    expect(text).toContain('averaged over the 3 questions with evidence (1 without left out; 1 evidence ids naming no turn count as missed)');
    expect(text).toMatch(/\| 4: Mnemo keyword +\| +2 \| +0\.0 \| +50\.0 \| +50\.0 \| +50\.0 \| +75\.0 \|/);
  });
});

describe('plain BM25', () => {
  const lex = (entries: Record<string, number>): Lexemes => new Map(Object.entries(entries));
  // Lengths 1, 3, 1 (average 5/3); df a = 2, b = 1, c = 1; N = 3.
  const bm25 = new PlainBm25([lex({ a: 1 }), lex({ a: 2, b: 1 }), lex({ c: 1 })]);

  it('scores with k1 1.2, b 0.75 and a non-negative idf', () => {
    // idf(a) = ln(1 + 1.5 / 2.5); d0: 2.2 / (1 + 1.2 · (0.25 + 0.75 · 0.6)); d1: 4.4 / (2 + 1.2 · (0.25 + 0.75 · 1.8))
    expect(bm25.score(lex({ a: 1 }), 0)).toBeCloseTo(Math.log(1.6) * (2.2 / 1.84), 10);
    expect(bm25.score(lex({ a: 1 }), 1)).toBeCloseTo(Math.log(1.6) * (4.4 / 3.92), 10);
    expect(bm25.score(lex({ a: 2 }), 0)).toBeCloseTo(2 * Math.log(1.6) * (2.2 / 1.84), 10);
    expect(bm25.score(lex({ c: 1 }), 0)).toBe(0);
  });

  it('ranks every document holding any query word, best first, the others not at all', () => {
    expect(bm25.rank(lex({ a: 1 }), 10)).toEqual([0, 1]);
    // idf(c) = ln(1 + 2.5 / 1.5) beats idf(a).
    expect(bm25.rank(lex({ a: 1, c: 1 }), 10)).toEqual([2, 0, 1]);
    expect(bm25.rank(lex({ a: 1, c: 1 }), 1)).toEqual([2]);
    expect(bm25.rank(lex({ z: 1 }), 10)).toEqual([]);
  });
});

describe('npm run bench -- --only=locomo', () => {
  const options = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const parsed = parseOptions(argv, env);
    if (parsed === 'help') throw new Error('expected options');
    return parsed;
  };

  it('takes the data from --locomo or MNEMO_LOCOMO, dev split by default', () => {
    expect(options(['--only=locomo', `--locomo=${FIXTURE}`]).locomo).toEqual({ path: FIXTURE, split: 'dev' });
    expect(options(['--only=locomo', '--locomo-split=heldout'], { MNEMO_LOCOMO: FIXTURE }).locomo).toEqual({ path: FIXTURE, split: 'heldout' });
    expect(options(['--only=locomo', `--locomo=${FIXTURE}`, '--locomo-misses=/tmp/misses.jsonl']).locomo).toEqual({
      path: FIXTURE,
      split: 'dev',
      misses: '/tmp/misses.jsonl',
    });
    expect(options(['--only=keyword'], { MNEMO_LOCOMO: FIXTURE }).locomo).toBeNull();
  });

  it('asked for by name without data, refuses, naming the source', () => {
    expect(() => options(['--only=locomo'])).toThrow(UsageError);
    expect(() => options(['--only=quality,locomo'])).toThrow(/section locomo needs the LoCoMo data: --locomo=PATH or MNEMO_LOCOMO.*snap-research\/LoCoMo/);
    expect(() => options(['--only=locomo', '--locomo=/nonexistent.json'])).toThrow(/no file at \/nonexistent.json/);
    expect(() => options(['--only=locomo', `--locomo=${FIXTURE}`, '--locomo-split=test'])).toThrow(/--locomo-split must be dev, heldout, all, not test/);
    expect(() => options(['--only=locomo', `--locomo=${FIXTURE}`, '--locomo-misses=/nonexistent/dir/m.jsonl'])).toThrow(/no folder \/nonexistent\/dir/);
  });

  it('in a run of every section without data, is left out with one line saying where to get it', () => {
    const all = options([]);
    expect(all.sections).not.toContain('locomo');
    expect(all.sections).toContain('quality');
    expect(all.notes).toHaveLength(1);
    expect(all.notes[0]).toMatch(/^locomo: left out, no data.*data\/locomo10\.json of the snap-research\/LoCoMo repository.*CC BY-NC 4\.0/);
    expect(options([], { MNEMO_LOCOMO: FIXTURE }).sections).toContain('locomo');
  });

  it('a locomo-only run’s results do not describe synthetic tenants it never made', () => {
    const run = {
      sizeLabel: 'default',
      sizes: [1_000, 10_000],
      sections: ['locomo'],
      machine: { date: '2026-12-01 04:00 UTC', commit: 'abc1234', uname: 'Linux', cpus: 2, memoryGiB: 8, loadBefore: '1.00' },
      search: [],
      breakdown: [],
      recall: [],
      writes: [],
      batch: [],
      embed: [],
      langgraph: [],
      langgraphPuts: [],
      modules: {},
      notes: [],
      seconds: 60,
    } as unknown as SideBySideRun;
    const markdown = renderMarkdown(run);
    expect(markdown).toMatch(/^## 2026-12-01 04:00 UTC — commit abc1234\n/);
    expect(markdown).not.toContain('Main tenant sizes');
    expect(renderMarkdown({ ...run, sections: ['keyword', 'locomo'] })).toContain('Main tenant sizes 1000, 10000 facts');
  });
});
