import type { Config } from '../foundation/config.ts';
import type { Logger } from '../foundation/log.ts';
import { createOpenAICompatProvider } from './openai-compat.ts';
import type { EmbeddingProvider } from './provider.ts';

/**
 * One provider per model name on the configured endpoint. During a model switch two models are in
 * use at once: the configured (new) one being backfilled, and the active (old) one that semantic
 * search keeps serving — and whose queries must be embedded with the old model.
 */
export interface EmbeddingProviders {
  /** The configured model (KINDGI_MEMORY_EMBEDDINGS_MODEL). */
  readonly configured: EmbeddingProvider;
  forModel(model: string): EmbeddingProvider;
  /** A model's weight in `both` under this configuration (semanticWeightOf). */
  semanticWeight(model: string): number;
}

export function createEmbeddingProviders(
  embeddings: Extract<Config['embeddings'], { kind: 'openai-compat' }>,
  logger?: Logger,
): EmbeddingProviders {
  const cache = new Map<string, EmbeddingProvider>();
  const forModel = (model: string) => {
    let provider = cache.get(model);
    if (!provider) {
      provider = createOpenAICompatProvider({
        url: embeddings.url,
        model,
        apiKey: embeddings.apiKey,
        batchSize: embeddings.batchSize,
        ...(logger ? { logger } : {}),
      });
      cache.set(model, provider);
    }
    return provider;
  };
  return { configured: forModel(embeddings.model), forModel, semanticWeight: (model) => semanticWeightOf(model, embeddings) };
}

/**
 * The semantic list's weight in `both` for models Mnemo has measured (DESIGN §5; the sweep is in
 * docs/decisions/0052-fusion-weights-per-model.md, and `npm run bench -- --calibrate` repeats it for
 * any model). USE lite is a small model: at equal weights it drags the keyword list down on every
 * classic collection measured.
 */
export const MEASURED_SEMANTIC_WEIGHTS: Readonly<Record<string, number>> = { 'use-lite-512': 0.075 };

/**
 * The semantic weight of the model serving a search: the operator's MNEMO_SEMANTIC_WEIGHT for the
 * configured model, else the measured default of a known model, else 1 (standard RRF). The
 * operator's weight is for the model they configured: during a switch the model still serving
 * keeps its own default.
 */
export function semanticWeightOf(model: string, configured?: { model: string; semanticWeight?: number | undefined }): number {
  if (configured?.semanticWeight !== undefined && configured.model === model) return configured.semanticWeight;
  return MEASURED_SEMANTIC_WEIGHTS[model] ?? 1;
}
