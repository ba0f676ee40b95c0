/**
 * The closing line through vitest itself: a fixture run (test/fixtures/needs-run/) with tests
 * skipped for each need and one for no reason, through the same reporters as `npm test`.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../support/processes.ts';

describe('the needs reporter', () => {
  it('prints, after the summary, how many tests each need skipped, what runs them, and the unexplained skip', () => {
    const run = spawnSync(process.execPath, [join(projectRoot, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'test/fixtures/needs-run/vitest.config.ts'], {
      cwd: projectRoot,
      encoding: 'utf8',
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
      timeout: 60_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(run.stdout).toMatch(/Tests\s+1 passed \| 6 skipped \(7\)/);
    expect(lines.at(-1)).toBe(
      '  Skipped: 2 tests need a PostgreSQL server: set DATABASE_URL; 3 tests need Redis: set REDIS_URL or start redis-server on 127.0.0.1:6379; 1 test was skipped without saying what it needs',
    );
  });
});
