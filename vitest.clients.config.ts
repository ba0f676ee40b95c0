import { defineConfig } from 'vitest/config';
import { suiteDefaults } from './test/setup/suites.ts';

/**
 * `npm run test:clients`: the clients in other languages (clients/), each running its own test
 * suite against the real API over a test database and Redis of its own (test/clients/). Not part
 * of `npm test`: it needs those languages' toolchains (python3 ≥ 3.9).
 */
export default defineConfig({
  test: {
    ...suiteDefaults,
    include: ['test/clients/**/*.test.ts'],
    maxWorkers: 2,
    testTimeout: 300_000,
    hookTimeout: 180_000,
  },
});
