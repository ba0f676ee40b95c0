import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { BUNDLED_ENTRIES } from '../setup/entry-bundles.ts';

export const projectRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface RunningProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves when stdout contains `text`; rejects if the process exits first or time runs out. */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

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
  const nodeArgs = nodeArgsFor(entry, args);
  const child = spawn(process.execPath, nodeArgs, {
    cwd: projectRoot,
    // Only the settings a test gives: never a developer's ./.env in the project (src/env-file.ts).
    env: { PATH: process.env.PATH, MNEMO_ENV_FILE: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk) => (out += chunk));
  child.stderr!.on('data', (chunk) => (err += chunk));
  // 'close', not 'exit': by then stdout and stderr are read to their end, so a test reading them
  // after the process ended sees its last lines.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor: (text, timeoutMs = 20_000) =>
      new Promise((resolve, reject) => {
        const matches = () => (typeof text === 'string' ? out.includes(text) : text.test(out));
        const timer = setTimeout(() => {
          clearInterval(poll);
          reject(new Error(`timed out waiting for ${text}; stdout: ${out} stderr: ${err}`));
        }, timeoutMs);
        const poll = setInterval(() => {
          if (matches()) {
            clearInterval(poll);
            clearTimeout(timer);
            resolve();
          }
        }, 20);
        void exited.then((code) => {
          if (matches()) return;
          clearInterval(poll);
          clearTimeout(timer);
          reject(new Error(`exited (${code}) before ${text}; stdout: ${out} stderr: ${err}`));
        });
      }),
  };
}

/** Exited as far as node has seen (an exit code or the signal that ended it). */
export const hasExited = (p: RunningProcess) => p.child.exitCode !== null || p.child.signalCode !== null;

/**
 * Running: a pid (or a process started here, not yet exited) that names a live process. A zombie,
 * dead but not yet reaped, does not count.
 */
export function alive(target: number | undefined | RunningProcess): boolean {
  if (typeof target === 'object' && hasExited(target)) return false;
  const pid = typeof target === 'object' ? target.child.pid : target;
  if (pid === undefined) return false;
  try {
    return !/^\d+ \(.*\) [ZX]/s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** SIGKILL, as a crash (the process is node itself, so the signal reaches the program); resolves once it has exited. */
export async function killProcess(p: RunningProcess): Promise<void> {
  if (!hasExited(p)) p.child.kill('SIGKILL');
  await p.exited;
}

/**
 * SIGTERM, as operators stop it, and SIGKILL if it has not exited within `graceMs`. Resolves with
 * its exit code, or `'killed'` when it had to be killed.
 */
export async function stopProcess(p: RunningProcess, graceMs = 10_000): Promise<number | null | 'killed'> {
  if (hasExited(p)) return p.exited;
  p.child.kill('SIGTERM');
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    p.child.kill('SIGKILL');
  }, graceMs);
  const code = await p.exited;
  clearTimeout(timer);
  return killed ? 'killed' : code;
}

/** Runs a command to completion. */
export async function runProcess(entry: string, args: string[], env: Record<string, string | undefined>) {
  const running = startProcess(entry, args, env);
  const code = await running.exited;
  return { code, stdout: running.stdout(), stderr: running.stderr() };
}
