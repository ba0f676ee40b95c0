/**
 * What the rest of Mnemo knows about embeddings (DESIGN §2, §9): a provider that turns texts
 * into vectors, three errors the embed jobs tell apart, and the one function that decides
 * which text of a fact gets embedded.
 */

export interface EmbeddingProvider {
  /** The model name vectors are stored under, e.g. 'nomic-embed-text'. */
  readonly model: string;
  /** For the startup line and logs, e.g. 'openai-compat nomic-embed-text at http://127.0.0.1:11434/v1'. */
  readonly describe: string;
  /**
   * Embeds texts in order; batches internally. Throws EmbeddingsUnavailable when the endpoint
   * cannot be reached after retries, EmbeddingRequestRejected on a non-retryable answer, and
   * EmbeddingDimensionChanged when the vectors' dimension differs from `expectedDims`.
   * An aborted `signal` rejects with the signal's reason, without retrying.
   */
  embed(texts: readonly string[], options?: { expectedDims?: number; signal?: AbortSignal }): Promise<number[][]>;
}

/** Retryable: the endpoint is down, slow or overloaded; the job should try again later. */
export class EmbeddingsUnavailable extends Error {
  override name = 'EmbeddingsUnavailable';
}

/**
 * Not retryable: the endpoint refused the request (400/401/404…) or answered with something
 * that is not an embeddings response. Retrying sends the same request and gets the same answer,
 * so jobs stop (BullMQ's UnrecoverableError) and an operator fixes the configuration.
 */
export class EmbeddingRequestRejected extends Error {
  override name = 'EmbeddingRequestRejected';
  /** The HTTP status, when the endpoint answered with an error status. */
  readonly status: number | undefined;

  constructor(message: string, options?: ErrorOptions & { status?: number }) {
    super(message, options);
    this.status = options?.status;
  }
}

/**
 * The endpoint has no model of that name (OpenAI's 404 model_not_found, Ollama's "model … not
 * found"): most often a typo in KINDGI_MEMORY_EMBEDDINGS_MODEL. Rejected like any 4xx, with a
 * message that names the model and the setting.
 */
export class EmbeddingModelNotFound extends EmbeddingRequestRejected {
  override name = 'EmbeddingModelNotFound';
}

/**
 * The model now returns vectors of another length than the ones stored for it. Vectors of two
 * lengths under one model name cannot be compared, so this is not retryable: switching dimension
 * takes a new model name, which the reembed job (DESIGN §9) then fills.
 */
export class EmbeddingDimensionChanged extends Error {
  override name = 'EmbeddingDimensionChanged';

  constructor(
    readonly model: string,
    readonly dims: number,
    readonly expectedDims: number,
    /** Where `expectedDims` came from; the jobs pass it from the database. */
    source: 'database' | 'same-call' = 'database',
  ) {
    super(
      source === 'database'
        ? `Model "${model}" returned ${dims} dimensions, the database holds ${expectedDims} for it; a new model name is needed to switch dimension`
        : `Model "${model}" returned ${dims} dimensions after returning ${expectedDims} earlier in the same call; the endpoint changed models mid-call`,
    );
  }
}

/** USE lite and most hosted models read a few thousand tokens at most; 8000 characters is about 2000 tokens. */
export const EMBEDDING_TEXT_MAX_CHARS = 8000;

/**
 * The text embedded for a fact, the same everywhere (API, workers, CLI, tests), because a query
 * is compared with vectors made by this function: the type with '.', '_' and '-' turned into
 * spaces, then every string inside content in document order (object values in key order as
 * given, arrays in order; numbers, booleans and null skipped), joined with '\n', cut at
 * EMBEDDING_TEXT_MAX_CHARS characters.
 */
export function embeddingText(type: string, content: unknown): string {
  const parts = [type.replace(/[._-]/g, ' ')];
  let length = parts[0]!.length;
  // Stops walking once the text is long enough: the rest would be cut anyway.
  const visit = (value: unknown): void => {
    if (length > EMBEDDING_TEXT_MAX_CHARS) return;
    if (typeof value === 'string') {
      parts.push(value);
      length += value.length + 1;
    } else if (Array.isArray(value)) {
      for (const item of value) visit(item);
    } else if (value !== null && typeof value === 'object') {
      for (const item of Object.values(value)) visit(item);
    }
  };
  visit(content);
  return truncate(parts.join('\n'), EMBEDDING_TEXT_MAX_CHARS);
}

/** Cuts at `max` UTF-16 units without leaving half of a surrogate pair (an unpaired one is not valid UTF-8 on the wire). */
function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}
