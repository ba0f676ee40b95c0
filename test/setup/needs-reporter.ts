/**
 * Prints, last, which tests were skipped and what would run them (test/setup/needs.ts), e.g.
 * "14 tests need a PostgreSQL server: set DATABASE_URL". A reporter beside the default one, so the
 * line comes after the summary, where a newcomer reads.
 */
import type { Reporter, TestModule } from 'vitest/node';
import { skippedLine } from './needs.ts';

export default class NeedsReporter implements Reporter {
  onTestRunEnd(testModules: readonly TestModule[]): void {
    const skipped = testModules.flatMap((module) => [...module.children.allTests('skipped')]);
    const line = skippedLine(skipped);
    if (line) process.stdout.write(`\n  Skipped: ${line}\n`);
  }
}
