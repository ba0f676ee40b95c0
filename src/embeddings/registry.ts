import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
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
  return { configured: forModel(embeddings.model), forModel };
}
