import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * `npm run test:readme` (test/readme/readme.check.ts): the README's shell blocks against a private
 * PostgreSQL and Redis. Its own project, not part of `npm test`: the file is named `.check.ts` so
 * the main config's `test/**\/*.test.ts` never picks it up (readme-script.test.ts, the pure
 * parsing, is in `npm test`). No global setup: it needs no shared test database. Its output (each
 * command and what it answered) is printed as it runs.
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/readme/**/*.check.ts'],
    pool: 'forks',
    disableConsoleIntercept: true,
    testTimeout: 600_000,
    hookTimeout: 180_000,
  },
});
