import { defineConfig } from 'vitest/config';
import { suiteDefaults } from './test/setup/suites.ts';

/**
 * The fault-injection and adversarial suite (`npm run test:faults`): real processes on loopback,
 * private PostgreSQL and Redis servers it may kill. One file at a time, so the figures each row
 * prints are not skewed by another row's load on a 2-core machine.
 */
export default defineConfig({
  test: {
    ...suiteDefaults,
    include: ['test/faults/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 180_000,
  },
});
