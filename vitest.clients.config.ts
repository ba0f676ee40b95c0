import { defineConfig } from 'vitest/config';
import { needTags } from './test/setup/needs.ts';

/**
 * `npm run test:clients`: the clients in other languages (clients/), each running its own test
 * suite against the real API over a test database and Redis of its own (test/clients/). Not part
 * of `npm test`: it needs those languages' toolchains (python3 ≥ 3.9).
 */
export default defineConfig({
  test: {
    include: ['test/clients/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts'],
    // Tests that need a server or Redis say so (test/helpers/needs.ts); the last line counts those skipped.
    tags: needTags,
    reporters: ['default', './test/setup/needs-reporter.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 300_000,
    hookTimeout: 180_000,
  },
});
