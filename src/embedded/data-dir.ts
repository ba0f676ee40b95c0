/**
 * The embedded mode's data directory (DESIGN §1): `./.mnemo/` unless MNEMO_DATA_DIR names
 * another. It holds the embedded PostgreSQL's files (`pgdata/`), the secrets generated on the
 * first run (`jwt-secret`, `erasure-key`) and, while a process uses it, a lock file.
 *
 * PGlite does not lock its directory: two processes opening the same one would each run a
 * PostgreSQL over the same files and corrupt them. The lock file holds the owner's pid; it is
 * created exclusively (`wx`), so of two processes starting at once exactly one gets it. A lock
 * left by a process that is gone (killed with SIGKILL, a power cut) is taken over: its pid no
 * longer answers `kill(pid, 0)`. A pid reused by an unrelated process after a crash would make
 * the directory look busy; the message names the file to remove in that case.
 */
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';

export const DEFAULT_DATA_DIR = '.mnemo';

export class DataDirectoryBusy extends Error {
  override name = 'DataDirectoryBusy';
}

/** The data directory: MNEMO_DATA_DIR, else ./.mnemo, resolved against the working directory. */
export function resolveDataDir(env: NodeJS.ProcessEnv, cwd = process.cwd()): string {
  const named = env.MNEMO_DATA_DIR?.trim();
  return resolve(cwd, named ? named : DEFAULT_DATA_DIR);
}

/** How a directory is shown to people: relative to the working directory when inside it (`./.mnemo`). */
export function displayDataDir(dir: string, cwd = process.cwd()): string {
  const rel = relative(cwd, dir);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? `./${rel}` : dir;
}

export interface DataDirLock {
  /** Removes the lock file (only if it is still ours). */
  release(): void;
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A killed process whose parent has not reaped it yet (a zombie) still answers kill(pid, 0) but
  // holds no files: on Linux, /proc says so (state Z).
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/**
 * Takes the directory's lock for this process, creating the directory if needed, or throws
 * DataDirectoryBusy naming the process that holds it.
 */
export function lockDataDir(dir: string): DataDirLock {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return {
        release() {
          try {
            if (Number(readFileSync(file, 'utf8').trim()) === process.pid) rmSync(file);
          } catch {
            // Already gone.
          }
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(readFileSync(file, 'utf8').trim());
      if (alive(holder) && holder !== process.pid) {
        throw new DataDirectoryBusy(
          `${displayDataDir(dir)} is in use by another Mnemo process (pid ${holder}); stop it first, or set MNEMO_DATA_DIR to use another directory. ` +
            `If no such process is running, remove ${join(displayDataDir(dir), 'lock')}.`,
        );
      }
      // Left by a process that is gone: take it over (once; a racing process may win instead).
      rmSync(file, { force: true });
    }
  }
  throw new DataDirectoryBusy(`${displayDataDir(dir)} is being opened by another Mnemo process; try again`);
}
