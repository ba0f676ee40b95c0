/**
 * What a test may need beyond the repository (test/helpers/needs.ts), each with what would give
 * it, and the closing line that counts the tests skipped for each. Defined here, below both the
 * test helpers and the reporter, and in the test configurations' `tags`.
 */
import type { TestTagDefinition } from 'vitest/config';

export type Need = 'postgres-server' | 'redis';

export const NEEDS: Readonly<Record<Need, { what: string; remedy: string }>> = {
  'postgres-server': { what: 'a PostgreSQL server', remedy: 'set DATABASE_URL' },
  redis: { what: 'Redis', remedy: 'set REDIS_URL or start redis-server on 127.0.0.1:6379' },
};

/** The `tags` of a vitest configuration. */
export const needTags: TestTagDefinition[] = (Object.keys(NEEDS) as Need[]).map((name) => ({
  name,
  description: `needs ${NEEDS[name].what} (${NEEDS[name].remedy})`,
}));

/**
 * The run's closing line about skipped tests: how many were skipped for each need and what would
 * run them, and any test skipped for no stated need (a skip nobody explained is a defect). Empty
 * when nothing was skipped.
 */
export function skippedLine(skipped: readonly { tags: readonly string[] }[]): string {
  const counts = new Map<string, number>();
  let unexplained = 0;
  for (const test of skipped) {
    const need = test.tags.find((tag): tag is Need => tag in NEEDS);
    if (need) counts.set(need, (counts.get(need) ?? 0) + 1);
    else unexplained++;
  }
  const parts = (Object.keys(NEEDS) as Need[])
    .filter((need) => counts.has(need))
    .map((need) => `${counts.get(need)} ${plural(counts.get(need)!)} ${NEEDS[need].what}: ${NEEDS[need].remedy}`);
  if (unexplained > 0) parts.push(unexplained === 1 ? '1 test was skipped without saying what it needs' : `${unexplained} tests were skipped without saying what they need`);
  return parts.join('; ');
}

const plural = (n: number) => (n === 1 ? 'test needs' : 'tests need');
