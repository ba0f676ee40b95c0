import { defineConfig } from 'vitest/config';
import { suiteDefaults } from './test/setup/suites.ts';

/**
 * The Citus suite (`npm run test:citus`): the flows of `npm test` that make up the product (facts,
 * retrieval in every mode, access, reports, erasure, lifecycle, isolation) run unchanged against a
 * private Citus cluster (a coordinator and two workers on loopback, test/setup/citus.ts), where the
 * app's role may run only single-shard (router) statements; and test/citus/ for what is Citus's
 * own: the distribution `mnemo migrate` makes, indexes on the shards, a shard moved under writes.
 * One file at a time: the cluster's three servers already fill both cores.
 */
export default defineConfig({
  test: {
    ...suiteDefaults,
    include: [
      'test/citus/**/*.test.ts',
      'test/e2e/facts.test.ts',
      'test/e2e/facts-batch.test.ts',
      'test/e2e/retrieval.test.ts',
      'test/e2e/conversation-expand.test.ts',
      'test/e2e/permissions-matrix.test.ts',
      'test/e2e/episodes.test.ts',
      'test/e2e/erasure.test.ts',
      'test/e2e/security.test.ts',
      'test/e2e/idempotency.test.ts',
      'test/e2e/mcp-memory.test.ts',
      'test/integration/keyword.test.ts',
      'test/integration/conversation-sequence.test.ts',
      'test/integration/vector-search.test.ts',
      'test/integration/retention.test.ts',
    ],
    globalSetup: ['test/setup/citus.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
});
