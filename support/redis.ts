/**
 * Keys of one deployment in a Redis shared with others. Every test file's API and workers run
 * under a MNEMO_QUEUE_PREFIX of their own on the test run's Redis, which the files running in
 * parallel share, and so does a bench run on the machine's Redis: what a test or a bench reads
 * or removes stays under its prefix, never beyond it.
 */
import type { Redis } from 'ioredis';
import { createRedis } from '../src/jobs/redis.ts';

/** `prefix:*` as a SCAN pattern, the prefix taken literally even if it holds a glob character. */
const under = (prefix: string) => `${prefix.replace(/[*?[\]\\]/g, '\\$&')}:*`;

async function* batchesUnder(redis: Redis, prefix: string): AsyncGenerator<string[]> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', under(prefix), 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) yield keys;
  } while (cursor !== '0');
}

/** Every key under the prefix: the queues, their job schedulers, locks and anything else. */
export async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const batch of batchesUnder(redis, prefix)) keys.push(...batch);
  return keys;
}

/** Deletes every key under the prefix (what FLUSHDB does to that deployment, and nothing more). */
export async function deleteKeysUnder(redis: Redis, prefix: string): Promise<void> {
  for await (const batch of batchesUnder(redis, prefix)) await redis.del(...batch);
}

/**
 * After a test or a bench: removes everything its API and workers left under their queue prefix
 * (jobs, schedulers, the lot) from the Redis at `redisUrl`, over a connection of its own.
 */
export async function removeQueuePrefix(prefix: string, redisUrl: string): Promise<void> {
  // A run without Redis ('') wrote nothing there.
  if (!redisUrl) return;
  const redis = createRedis(redisUrl, 'producer');
  try {
    await deleteKeysUnder(redis, prefix);
  } finally {
    await redis.quit();
  }
}
