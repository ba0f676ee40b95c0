import { defineConfig } from 'vitest/config';
import { suiteDefaults } from './test/setup/suites.ts';

/**
 * The scale suite (`npm run test:scale`): several API and worker processes behind a load balancer
 * (HAProxy) over PgBouncer, PostgreSQL (and a streaming replica) and Redis of its own on loopback,
 * under load. One file at a time with nothing else running: each loads both cores on purpose, and
 * prints figures that another file's load would skew.
 */
export default defineConfig({
  test: {
    ...suiteDefaults,
    include: ['test/scale/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 180_000,
  },
});
