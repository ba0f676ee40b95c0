/**
 * Child processes the tests and the benchmarks start (the API, the worker, the CLI): node in the
 * project root with only the settings given, what it prints kept, waited for until a line
 * appears, stopped as operators stop it or killed as a crash, and asked whether it still runs.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const projectRoot = fileURLToPath(new URL('..', import.meta.url));

export interface RunningProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves when stdout contains `text`; rejects if the process exits first or time runs out. */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  /**
   * From now on what it prints is read and dropped, not kept: a service that runs for long (a
   * bench's API under load) would otherwise grow its log in this process without end.
   */
  forgetOutput(): void;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

/**
 * Starts node with `nodeArgs` (an entry and its arguments, and any loader before them) as its
 * own process, one process, so a signal reaches the program itself.
 */
export function startNode(nodeArgs: string[], env: Record<string, string | undefined>): RunningProcess {
  const child = spawn(process.execPath, nodeArgs, {
    cwd: projectRoot,
    // Only the settings given: never a developer's ./.env in the project (src/env-file.ts).
    env: { PATH: process.env.PATH, MNEMO_ENV_FILE: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let keep = true;
  child.stdout!.on('data', (chunk) => keep && (out += chunk));
  child.stderr!.on('data', (chunk) => keep && (err += chunk));
  // 'close', not 'exit': by then stdout and stderr are read to their end, so a test reading them
  // after the process ended sees its last lines.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    forgetOutput: () => {
      keep = false;
      out = '';
      err = '';
    },
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
