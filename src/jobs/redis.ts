import { Redis } from 'ioredis';

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
