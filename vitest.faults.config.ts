import { defineConfig } from 'vitest/config';
import { needTags } from './test/setup/needs.ts';

/**
 * The fault-injection and adversarial suite (`npm run test:faults`): real processes on loopback,
 * private PostgreSQL and Redis servers it may kill. One file at a time, so the figures each row
 * prints are not skewed by another row's load on a 2-core machine.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts'],
    // Tests that need a server or Redis say so (test/helpers/needs.ts); the last line counts those skipped.
    tags: needTags,
    reporters: ['default', './test/setup/needs-reporter.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 180_000,
  },
});
