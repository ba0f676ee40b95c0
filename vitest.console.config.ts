import { defineConfig } from 'vitest/config';
import { suiteDefaults } from './test/setup/suites.ts';

/**
 * `npm run test:console`: the console in a real browser (Debian's chromium, driven by
 * playwright-core) against the real API over this run's database. One file at a time: a browser
 * and the API share the machine's two cores.
 */
export default defineConfig({
  test: {
    ...suiteDefaults,
    include: ['test/console/**/*.test.ts'],
    maxWorkers: 1,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
