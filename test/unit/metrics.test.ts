/**
 * The parts of the metrics that need no server: MNEMO_METRICS_PORT's parse, the pool figures'
 * arithmetic (in use up to the pool size, the rest waiting) and a queue-count source that fails
 * at scrape time. What needs PostgreSQL, Redis or a worker process is in test/e2e/metrics.test.ts
 * and test/integration/metrics.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { countQueueJobs, registry, trackPool } from '../../src/foundation/metrics.ts';
import { parseMetrics, valueOf } from '../helpers/metrics.ts';

const worker = { DATABASE_URL: 'postgres://mnemo_api:pw@db.internal:5432/mnemo', REDIS_URL: 'redis://cache.internal:6379' };
const metrics = async () => parseMetrics(await registry.metrics());

describe('MNEMO_METRICS_PORT', () => {
  it('defaults to 9464; 0 serves no metrics', () => {
    expect(loadConfig(worker, 'worker').metricsPort).toBe(9464);
    expect(loadConfig({ ...worker, MNEMO_METRICS_PORT: '' }, 'worker').metricsPort).toBe(9464);
    expect(loadConfig({ ...worker, MNEMO_METRICS_PORT: '0' }, 'worker').metricsPort).toBe(0);
    expect(loadConfig({ ...worker, MNEMO_METRICS_PORT: '9100' }, 'worker').metricsPort).toBe(9100);
  });

  it.each(['abc', '-1', '65536', '94.5'])('%s stops startup with one line naming the variable', (value) => {
    expect(() => loadConfig({ ...worker, MNEMO_METRICS_PORT: value }, 'worker')).toThrow(
      new ConfigError('MNEMO_METRICS_PORT', 'must be a port number from 1 to 65535, or 0 to serve no metrics'),
    );
  });
});

describe('database pool figures', () => {
  it('count transactions in flight: up to the pool size in use, the rest waiting, per pool name', async () => {
    const primary = trackPool('primary', 2);
    const read = trackPool('read', 4);
    const gates: (() => void)[] = [];
    const hold = (pool: typeof primary) => pool.track(() => new Promise<void>((resolve) => gates.push(resolve)));
    const running = [hold(primary), hold(primary), hold(primary), hold(read)];
    try {
      const samples = await metrics();
      expect(valueOf(samples, 'mnemo_db_pool_size', { pool: 'primary' })).toBe(2);
      expect(valueOf(samples, 'mnemo_db_transactions_in_use', { pool: 'primary' })).toBe(2);
      expect(valueOf(samples, 'mnemo_db_transactions_waiting', { pool: 'primary' })).toBe(1);
      expect(valueOf(samples, 'mnemo_db_pool_size', { pool: 'read' })).toBe(4);
      expect(valueOf(samples, 'mnemo_db_transactions_in_use', { pool: 'read' })).toBe(1);
      expect(valueOf(samples, 'mnemo_db_transactions_waiting', { pool: 'read' })).toBe(0);
    } finally {
      for (const open of gates) open();
      await Promise.all(running);
    }
    // A failed transaction leaves the count too.
    await expect(primary.track(async () => Promise.reject(new Error('rolled back')))).rejects.toThrow('rolled back');
    expect(valueOf(await metrics(), 'mnemo_db_transactions_in_use', { pool: 'primary' })).toBe(0);

    // A second open pool of the same name adds its size; a closed one leaves the figures.
    const other = trackPool('primary', 3);
    expect(valueOf(await metrics(), 'mnemo_db_pool_size', { pool: 'primary' })).toBe(5);
    for (const pool of [primary, read, other]) pool.close();
    expect(valueOf(await metrics(), 'mnemo_db_pool_size', { pool: 'primary' })).toBeUndefined();
  });
});

describe('queue depth', () => {
  it('a source that fails at scrape time is left out; the others and the rest of the scrape still answer', async () => {
    const stop = [
      countQueueJobs(async () => ({ embed: { waiting: 3, failed: 1 } })),
      countQueueJobs(async () => Promise.reject(new Error('Redis is away'))),
    ];
    try {
      const samples = await metrics();
      expect(valueOf(samples, 'mnemo_queue_jobs', { queue: 'embed', state: 'waiting' })).toBe(3);
      expect(valueOf(samples, 'mnemo_queue_jobs', { queue: 'embed', state: 'active' })).toBe(0);
      expect(valueOf(samples, 'mnemo_queue_jobs', { queue: 'embed', state: 'failed' })).toBe(1);
      expect(valueOf(samples, 'mnemo_rate_limit_fallback')).toBe(0);
    } finally {
      for (const unregister of stop) unregister();
    }
    expect(valueOf(await metrics(), 'mnemo_queue_jobs', { queue: 'embed', state: 'waiting' })).toBeUndefined();
  });
});
