import { Redis } from 'ioredis';
import type { Logger } from '../foundation/log.ts';

/** How long the rate limiter waits for Redis before the node limits on its own (src/http/rate-limit.ts). */
export const RATE_LIMIT_COMMAND_TIMEOUT_MS = 250;

/**
 * Redis connections for BullMQ and the rate limiter. A worker's connection blocks on Redis and
 * must retry forever (`maxRetriesPerRequest: null`, which BullMQ requires); a producer's
 * connection fails fast, so an API request does not hang when Redis is away (its outbox row is
 * kept and re-enqueued later). The rate limiter's is asked on every limited request, so it never
 * waits for Redis: no queue while disconnected, no retry, and a short timeout for a Redis that
 * hangs; it still reconnects by itself.
 */
export function createRedis(url: string, purpose: 'worker' | 'producer' | 'rate-limit'): Redis {
  if (purpose === 'rate-limit') {
    return new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: RATE_LIMIT_COMMAND_TIMEOUT_MS });
  }
  return new Redis(url, {
    maxRetriesPerRequest: purpose === 'worker' ? null : 3,
    enableReadyCheck: true,
    lazyConnect: false,
  });
}

/**
 * Hands work to Redis from a request without letting Redis hold the request: past a second, or on
 * an error, it gives up with a warning. Only for work Postgres already records (an outbox row, a
 * derived need, a schedule row), which the reconciler hands over later.
 */
export async function promptly(work: Promise<unknown>, logger: Logger, what: string, fields: Record<string, unknown> = {}): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('Redis did not answer in 1 s')), 1000).unref();
  });
  try {
    await Promise.race([work, timeout]);
  } catch (error) {
    logger.warn(`could not ${what} now; the reconciler will`, { ...fields, error: String(error) });
  } finally {
    clearTimeout(timer);
  }
}
