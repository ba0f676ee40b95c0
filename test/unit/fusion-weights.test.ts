/** The semantic list's weight in `both` (DESIGN §5): MNEMO_SEMANTIC_WEIGHT, measured defaults, else 1. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { MEASURED_SEMANTIC_WEIGHTS, semanticWeightOf } from '../../src/embeddings/registry.ts';

const base = {
  DATABASE_URL: 'postgres://mnemo_api:pw@db.internal:5432/mnemo',
  REDIS_URL: 'redis://cache.internal:6379',
  MNEMO_JWT_SECRET: 'x'.repeat(32),
  KINDGI_MEMORY_EMBEDDINGS: 'openai-compat',
  KINDGI_MEMORY_EMBEDDINGS_URL: 'http://127.0.0.1:11434/v1',
  KINDGI_MEMORY_EMBEDDINGS_MODEL: 'nomic-embed-text',
};

const embeddingsOf = (env: Record<string, string>) => {
  const { embeddings } = loadConfig({ ...base, ...env }, 'api');
  if (embeddings.kind !== 'openai-compat') throw new Error('embeddings expected');
  return embeddings;
};

describe('MNEMO_SEMANTIC_WEIGHT', () => {
  it('is unset by default (and when empty), and read as a number from 0 to 100', () => {
    expect(embeddingsOf({}).semanticWeight).toBeUndefined();
    expect(embeddingsOf({ MNEMO_SEMANTIC_WEIGHT: '' }).semanticWeight).toBeUndefined();
    expect(embeddingsOf({ MNEMO_SEMANTIC_WEIGHT: '0.3' }).semanticWeight).toBe(0.3);
    expect(embeddingsOf({ MNEMO_SEMANTIC_WEIGHT: '0' }).semanticWeight).toBe(0);
  });

  it.each(['heavy', '-0.1', '101'])('stops startup with one line naming the variable for %j', (value) => {
    expect(() => loadConfig({ ...base, MNEMO_SEMANTIC_WEIGHT: value }, 'api')).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, MNEMO_SEMANTIC_WEIGHT: value }, 'api')).toThrow(
      'Invalid configuration: MNEMO_SEMANTIC_WEIGHT must be a number from 0 to 100',
    );
  });
});

describe('semanticWeightOf', () => {
  it('gives the built-in model its measured weight, any other model 1', () => {
    expect(semanticWeightOf('use-lite-512')).toBe(MEASURED_SEMANTIC_WEIGHTS['use-lite-512']);
    expect(MEASURED_SEMANTIC_WEIGHTS['use-lite-512']).toBeGreaterThan(0);
    expect(MEASURED_SEMANTIC_WEIGHTS['use-lite-512']).toBeLessThan(1);
    expect(semanticWeightOf('nomic-embed-text')).toBe(1);
    expect(semanticWeightOf('use-lite-512-b'), 'an alias is another model').toBe(1);
  });

  it("applies the operator's weight to the configured model only (during a switch the old model keeps its own)", () => {
    const configured = { model: 'nomic-embed-text', semanticWeight: 0.4 };
    expect(semanticWeightOf('nomic-embed-text', configured)).toBe(0.4);
    expect(semanticWeightOf('use-lite-512', configured)).toBe(MEASURED_SEMANTIC_WEIGHTS['use-lite-512']);
    expect(semanticWeightOf('use-lite-512', { model: 'use-lite-512', semanticWeight: 1 })).toBe(1);
    expect(semanticWeightOf('nomic-embed-text', { model: 'nomic-embed-text' })).toBe(1);
  });
});
