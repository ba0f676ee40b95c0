import { defineConfig } from 'vitest/config';
import { suiteDefaults } from './test/setup/suites.ts';

/**
 * `npm run test:slow`: the same behaviours as `npm test` at full size, where size is the point —
 * retrieval quality over whole collections with the real model, model switches over 1,000 facts,
 * a report over 100,000 episodes. Two files at a time: each is CPU-bound (embedding, big SQL),
 * and their timings are asserted.
 */
export default defineConfig({
  test: {
    ...suiteDefaults,
    include: ['test/slow/**/*.test.ts'],
    maxWorkers: 2,
    testTimeout: 300_000,
    hookTimeout: 900_000,
  },
});
