import { defineConfig } from 'vitest/config';

/**
 * The fault-injection and adversarial suite (`npm run test:faults`): real processes on loopback,
 * private PostgreSQL and Redis servers it may kill. One file at a time, so the figures each row
 * prints are not skewed by another row's load on a 2-core machine.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 180_000,
  },
});
