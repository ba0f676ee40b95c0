import { defineConfig } from 'vitest/config';
import { needTags } from './test/setup/needs.ts';

/**
 * The scale suite (`npm run test:scale`): several API and worker processes behind a load balancer
 * (HAProxy) over PgBouncer, PostgreSQL (and a streaming replica) and Redis of its own on loopback,
 * under load. One file at a time with nothing else running: each loads both cores on purpose, and
 * prints figures that another file's load would skew.
 */
export default defineConfig({
  test: {
    include: ['test/scale/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts'],
    // Tests that need a server or Redis say so (test/helpers/needs.ts); the last line counts those skipped.
    tags: needTags,
    reporters: ['default', './test/setup/needs-reporter.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 180_000,
  },
});
