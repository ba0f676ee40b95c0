/**
 * What every suite's vitest configuration shares (vitest*.config.ts): the global setup that finds
 * PostgreSQL and Redis (test/setup/global.ts; test:citus has its own), the needs' tags and the
 * reporter whose closing line counts what they skipped, and a process per worker.
 */
import type { TestUserConfig } from 'vitest/config';
import { needTags } from './needs.ts';

export const suiteDefaults = {
  globalSetup: ['test/setup/global.ts'],
  // Tests that need a server or Redis say so (test/helpers/needs.ts); the last line counts those skipped.
  tags: needTags,
  reporters: ['default', './test/setup/needs-reporter.ts'],
  pool: 'forks',
} satisfies TestUserConfig;
