/**
 * MNEMO_SEMANTIC_WEIGHT through a real API process (src/server.ts): `both` fuses with it, says so
 * in `journal.weights`, and a request's weights still win.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOpenAICompatProvider } from '../../src/embeddings/openai-compat.ts';
import { ensureConfiguredModel } from '../../src/memory/facts/vectors.ts';
import { type FakeEmbeddings, startFakeEmbeddings } from '../../support/fake-embeddings.ts';
import { tokenFor } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { type RunningProcess, stopProcess } from '../../support/processes.ts';
import { startApi } from '../helpers/deployment.ts';
import { needs } from '../helpers/needs.ts';

describe('MNEMO_SEMANTIC_WEIGHT (a real API process)', () => {
  const MODEL = 'nomic-embed-text';
  let t: TestDatabase;
  let embeddings: FakeEmbeddings;
  let api: RunningProcess;
  let base: string;
  let admin: string;

  beforeAll(async () => {
    t = await createTestDatabase();
    embeddings = await startFakeEmbeddings({ model: MODEL, dims: 8 });
    await ensureConfiguredModel(t.app.db, createOpenAICompatProvider({ url: embeddings.url, model: MODEL }));
    ({ process: api, url: base } = await startApi(t, { embeddings: { url: embeddings.url, model: MODEL }, env: { MNEMO_SEMANTIC_WEIGHT: '0.3' } }));
    admin = await tokenFor({ tid: uniqueTenant('weights'), role: 'admin' });
    const written = await post('/v1/memory/facts', { type: 'acme.note', content: { text: 'The dishwasher is leaking.' } });
    expect(written.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    if (api) await stopProcess(api);
    await embeddings?.close();
    await t?.drop();
  });

  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  it('fuses with the configured weight, and says so', needs('redis'), async () => {
    const { status, body } = await post('/v1/memory/retrieve', { query: 'dishwasher' });
    expect(status).toBe(200);
    expect(body.journal).toMatchObject({ mode: 'both', embeddingModel: MODEL, weights: { keyword: 1, semantic: 0.3 } });
    expect(body.journal.degraded).toBeUndefined();
    // First in the keyword list (no vectors yet: the semantic list is empty): 1 / 61.
    expect(body.results[0].score).toBe(1 / 61);
  });

  it("lets a request's weights win, each on its own", needs('redis'), async () => {
    const both = await post('/v1/memory/retrieve', { query: 'dishwasher', weights: { keyword: 2, semantic: 1 } });
    expect(both.body.journal.weights).toEqual({ keyword: 2, semantic: 1 });
    expect(both.body.results[0].score).toBe(2 / 61);
    const semanticOnly = await post('/v1/memory/retrieve', { query: 'dishwasher', weights: { semantic: 0.9 } });
    expect(semanticOnly.body.journal.weights).toEqual({ keyword: 1, semantic: 0.9 });
  });

  it('names no weights outside mode both', async () => {
    for (const mode of ['keyword', 'semantic', 'list']) {
      const { status, body } = await post('/v1/memory/retrieve', { mode, query: 'dishwasher' });
      expect(status, mode).toBe(200);
      expect(body.journal.weights, mode).toBeUndefined();
    }
  });
});
