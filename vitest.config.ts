import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The fault-injection suite starts and kills its own servers: `npm run test:faults`.
    exclude: ['test/faults/**', '**/node_modules/**'],
    globalSetup: ['test/setup/global.ts'],
    // Each file gets its own database (test/helpers/database.ts), so files run in parallel.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
