import { Redis } from 'ioredis';
import type { Logger } from '../log.ts';

/**
 * Redis connections for BullMQ. A worker's connection blocks on Redis and must retry forever
 * (`maxRetriesPerRequest: null`, which BullMQ requires); a producer's connection fails fast, so
 * an API request does not hang when Redis is away (its outbox row is kept and re-enqueued later).
 */
export function createRedis(url: string, purpose: 'worker' | 'producer'): Redis {
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
