/**
 * The bench's LoCoMo path end to end (bench/locomo.ts's benchLocomo, what `npm run bench --
 * --only=locomo` runs), on the invented conversations of test/fixtures/locomo/ (LoCoMo's own data
 * cannot be in the repository): every turn written through writeFacts, one tenant per
 * conversation, embedded with the real local model (USE lite), every question asked through
 * retrieve() in each mode on real PostgreSQL, and the bench's plain BM25 beside them.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin } from '../../bench/harness.ts';
import { benchLocomo, loadLocomo, type LocomoAnswer, type LocomoResult, RECALL_KS, writeAnswers } from '../../bench/locomo.ts';
import { renderLocomo } from '../../bench/results.ts';
import { LOCAL_MODEL, type LocalEmbeddingsServer, startLocalEmbeddingsServer } from '../../src/embeddings/local-server.ts';
import { createOpenAICompatProvider } from '../../src/embeddings/openai-compat.ts';
import { retrieve } from '../../src/memory/retrieval/retrieve.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/locomo/conversations.json', import.meta.url));
const at = (k: number) => RECALL_KS.indexOf(k as (typeof RECALL_KS)[number]);

describe('the LoCoMo bench on invented conversations (real model, real PostgreSQL)', () => {
  let t: TestDatabase;
  let server: LocalEmbeddingsServer;
  let result: LocomoResult;
  let answers: LocomoAnswer[];
  const answer = (id: string) => answers.find((a) => a.id === id)!;

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startLocalEmbeddingsServer({ port: 0 });
    const provider = createOpenAICompatProvider({ url: server.url, model: LOCAL_MODEL, timeoutMs: 120_000 });
    ({ result, answers } = await benchLocomo(t.app.db, provider, loadLocomo(FIXTURE, 'dev'), {
      split: 'dev',
      tenantOf: (sampleId) => uniqueTenant(`locomo-${sampleId}`),
      analyze: async () => {
        await t.admin`analyze facts`;
        await t.admin`analyze fact_embeddings`;
      },
    }));
  }, 600_000);

  afterAll(async () => {
    await server?.close();
    await t?.drop();
  });

  it('counts the fixture’s questions, per category, and what it leaves out', () => {
    expect(result).toMatchObject({ split: 'dev', questions: 11, withoutEvidence: 1, unknownEvidence: 1 });
    expect(result.categories.map((c) => [c.category, c.questions])).toEqual([
      [1, 2],
      [2, 2],
      [3, 1],
      [4, 3],
      [5, 2],
    ]);
    expect(result.conversations.map((c) => [c.sampleId, c.turns, c.questions])).toEqual([
      ['conv-f1', 14, 6],
      ['conv-f2', 15, 5],
    ]);
    for (const mode of ['keyword', 'semantic', 'both'] as const) expect(result.latency[mode].n).toBe(11);
  });

  it('writes each turn as the issue’s episodic fact, a tenant per conversation', async () => {
    const [f1, f2] = result.conversations;
    expect(f1!.tenantId).not.toBe(f2!.tenantId);
    const { results } = await retrieve({ db: t.app.db, principal: admin(f1!.tenantId) }, { mode: 'keyword', query: 'manure stables', limit: 50 });
    // The turn holding the words first; then, by conversation context (keyword search reads the
    // 2 turns on each side of a turn, at a lower weight), its neighbours and no other turn.
    expect(results[0]!.fact.episodeId).toBe('conv-f1:D1:3');
    expect(results.slice(1).map((r) => r.fact.episodeId).sort()).toEqual(['conv-f1:D1:1', 'conv-f1:D1:2', 'conv-f1:D1:4', 'conv-f1:D1:5']);
    expect(results[0]!.fact).toMatchObject({
      type: 'locomo.turn',
      content: { text: 'Ingrid said, "Heavy clay, so I dug in manure from the stables down the road."' },
      memoryKind: 'episodic',
      episodeId: 'conv-f1:D1:3',
      scope: { projectId: 'locomo', threadId: 'conv-f1', sessionId: 'conv-f1-s1' },
    });
    expect(Date.parse(results[0]!.fact.observedAt!)).toBe(Date.parse('2024-03-02T15:15:02Z'));
    // The other conversation's tenant holds none of it.
    const other = await retrieve({ db: t.app.db, principal: admin(f2!.tenantId) }, { mode: 'keyword', query: 'manure stables', limit: 50 });
    expect(other.results).toEqual([]);
    for (const a of answers.filter((x) => x.conversation === 'conv-f2')) {
      for (const ranked of Object.values(a.ranked)) expect(ranked.every((id) => id.startsWith('conv-f2:'))).toBe(true);
    }
  });

  it('finds a turn that shares a question’s rare words within the top 5, by keyword and by plain BM25', () => {
    const q = answer('conv-f1:q0');
    expect(q.evidence).toEqual(['conv-f1:D1:3']);
    expect(q.ranked.keyword.slice(0, 5)).toContain('conv-f1:D1:3');
    expect(q.ranked.bm25.slice(0, 5)).toContain('conv-f1:D1:3');
    expect(answer('conv-f2:q0').ranked.keyword.slice(0, 5)).toContain('conv-f2:D1:1');
  });

  it('ranks every turn in semantic and both (limit 50 > turns): R@50 misses only the id naming no turn', () => {
    expect(answer('conv-f1:q0').ranked.semantic).toHaveLength(14);
    expect(answer('conv-f2:q0').ranked.both).toHaveLength(15);
    // 9 questions with every evidence id a turn, and one whose second id (D3:9) names none.
    expect(result.recall.semantic[at(50)]).toBeCloseTo(9.5 / 10, 10);
    expect(result.recall.both[at(50)]).toBeCloseTo(9.5 / 10, 10);
    // Keyword and BM25 match any word, so they return fewer; recall only grows with k.
    for (const ranker of ['keyword', 'semantic', 'both', 'bm25'] as const) {
      const r = result.recall[ranker];
      for (let i = 1; i < r.length; i++) expect(r[i]).toBeGreaterThanOrEqual(r[i - 1]!);
    }
  });

  it('writes each question’s evidence and top 10 for failure analysis, and prints beside DRAGON', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mnemo-locomo-'));
    try {
      writeAnswers(join(dir, 'misses.jsonl'), answers);
      const lines = readFileSync(join(dir, 'misses.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
      expect(lines).toHaveLength(11);
      expect(lines[0]).toMatchObject({ id: 'conv-f1:q0', conversation: 'conv-f1', category: 4, evidence: ['conv-f1:D1:3'] });
      expect(Object.keys(lines[0].top10).sort()).toEqual(['bm25', 'both', 'keyword', 'semantic']);
      expect(lines[0].top10.semantic).toHaveLength(10);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const text = renderLocomo(result);
    expect(text).toContain('LoCoMo paper, DRAGON (Table 3, dialog)');
    expect(text).toContain('averaged over the 10 questions with evidence (1 without left out; 1 evidence ids naming no turn count as missed)');
  });
});
