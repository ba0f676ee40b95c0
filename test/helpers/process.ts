/**
 * How a test starts one of the program's entries: the run's bundle of it when the global setup
 * built one, else through tsx (support/processes.ts starts, waits for and stops the process).
 */
import { join } from 'node:path';
import { inject } from 'vitest';
import { type RunningProcess, startNode } from '../../support/processes.ts';
import { BUNDLED_ENTRIES } from '../setup/entry-bundles.ts';

/**
 * The command line that runs `entry`: the run's bundle of it when the global setup built one
 * (test/setup/entry-bundles.ts: the same code, started in half the time), else `node --import tsx`
 * as operators run it (a `.js` entry such as the `mnemo` bin as it is).
 */
export function nodeArgsFor(entry: string, args: string[]): string[] {
  const bundles = inject('entryBundles');
  const bundled = BUNDLED_ENTRIES[entry];
  if (bundles && bundled) return [join(bundles, bundled), ...args];
  return entry.endsWith('.js') ? [entry, ...args] : ['--import', 'tsx', entry, ...args];
}

/** Starts an entry as its own process, one process, so a signal reaches the program itself. */
export function startProcess(entry: string, args: string[], env: Record<string, string | undefined>): RunningProcess {
  return startNode(nodeArgsFor(entry, args), env);
}

/** Runs a command to completion. */
export async function runProcess(entry: string, args: string[], env: Record<string, string | undefined>) {
  const running = startProcess(entry, args, env);
  const code = await running.exited;
  return { code, stdout: running.stdout(), stderr: running.stderr() };
}
