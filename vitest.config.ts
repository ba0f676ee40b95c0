import { defineConfig } from 'vitest/config';
import { suiteDefaults } from './test/setup/suites.ts';

/**
 * `npm test`: every behaviour, in a few minutes. Long runs of the same behaviours at full size
 * (whole IR collections, 1,000-fact model switches, 100,000-episode reports) are in test/slow/
 * (`npm run test:slow`, vitest.slow.config.ts); the fault-injection suite, which starts and
 * kills its own servers, is `npm run test:faults`, and the multi-node load test `npm run test:scale`.
 */
export default defineConfig({
  test: {
    ...suiteDefaults,
    include: ['test/**/*.test.ts'],
    exclude: ['test/faults/**', 'test/slow/**', 'test/scale/**', 'test/citus/**', 'test/clients/**', 'test/console/**', '**/node_modules/**'],
    // Each file gets its own database (test/helpers/database.ts) and its own Redis queue prefix
    // (support/redis.ts), so files run in parallel. Most of a file's time is spent waiting
    // on Postgres, Redis or a child process, so more files than cores keep both cores busy.
    maxWorkers: 5,
    // A worker keeps the modules it loaded from one file to the next: each file importing the app
    // anew cost 139 s of import time across the run (36 s shared), and the suite is CPU-bound on
    // two cores. Files share no state through modules: each has its own database, queue prefix
    // and app instance.
    isolate: false,
    // Files share two cores: a test that starts child processes can take twice its time alone.
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
