/**
 * A test that means nothing on what this run found — several connections racing on one
 * PostgreSQL server, roles and databases made on a server, BullMQ's own behaviour — says what it
 * needs: `it('…', needs('postgres-server'), async () => …)`, or on a `describe`. Where that is
 * missing it is skipped, and never silently: its tag is counted and named in the run's last line
 * (test/setup/needs-reporter.ts), with what would run it.
 */
import { inject, type TestOptions } from 'vitest';
import type { Need } from '../setup/needs.ts';

const found: Record<Need, () => boolean> = {
  'postgres-server': () => inject('postgres') === 'server',
  redis: () => inject('redisUrl') !== '',
};

/** Whether this run has what `need` names. */
export const runHas = (need: Need): boolean => found[need]();

/** A test's options: tagged with each need, skipped where one is missing. */
export function needs(...what: Need[]): TestOptions {
  return { tags: what, skip: what.some((need) => !runHas(need)) };
}
