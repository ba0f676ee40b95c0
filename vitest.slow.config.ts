import { defineConfig } from 'vitest/config';
import { needTags } from './test/setup/needs.ts';

/**
 * `npm run test:slow`: the same behaviours as `npm test` at full size, where size is the point —
 * retrieval quality over whole collections with the real model, model switches over 1,000 facts,
 * a report over 100,000 episodes. Two files at a time: each is CPU-bound (embedding, big SQL),
 * and their timings are asserted.
 */
export default defineConfig({
  test: {
    include: ['test/slow/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts'],
    // Tests that need a server or Redis say so (test/helpers/needs.ts); the last line counts those skipped.
    tags: needTags,
    reporters: ['default', './test/setup/needs-reporter.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 300_000,
    hookTimeout: 900_000,
  },
});
