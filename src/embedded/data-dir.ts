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
 *
 * The directory holds a superuser's socket, the token key and every tenant's data, so it is its
 * owner's only (0700): created so, and an existing one that its group or others may enter (a
 * `mkdir -m 755`, a umask of 002) is made so before anything in it is read or written, or refused
 * when this process may not change it. That is the wall: PGlite writes the files of a new
 * database with mode 0666 (Emscripten's file system chmods them after creating them, so no umask
 * reaches them; under `umask 077` they are 0666 all the same), see restrictFiles.
 */
import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { DEFAULT_DATA_DIR } from '../foundation/environment.ts';

/** A data directory this process will not use; the message is one line saying why and what to do. */
export class DataDirectoryRefused extends Error {
  override name = 'DataDirectoryRefused';
}

export class DataDirectoryBusy extends DataDirectoryRefused {
  override name = 'DataDirectoryBusy';
}

export class DataDirectoryUnsafe extends DataDirectoryRefused {
  override name = 'DataDirectoryUnsafe';
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

/**
 * Makes `dir` if it does not exist (0700), and makes an existing one owner-only if its group or
 * others may use it; throws DataDirectoryUnsafe when that is not this process's to change.
 */
export function ensureDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = statSync(dir);
  if (!stat.isDirectory()) throw new DataDirectoryUnsafe(`${displayDataDir(dir)} is not a directory; set MNEMO_DATA_DIR to a directory`);
  if ((stat.mode & 0o077) === 0) return;
  try {
    chmodSync(dir, stat.mode & 0o700);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error;
    const shown = displayDataDir(dir);
    throw new DataDirectoryUnsafe(
      `${shown} is open to other users (mode ${(stat.mode & 0o777).toString(8)}) and belongs to uid ${stat.uid}, so Mnemo cannot make it owner-only: ` +
        `run \`chmod 700 ${shown}\` as its owner, or set MNEMO_DATA_DIR to a directory of your own`,
    );
  }
}

/**
 * Takes group and other access away from every file and directory under `dir` (files 0600,
 * directories 0700, as PostgreSQL keeps its own). PGlite leaves the files of a new database 0666
 * and the directories it unpacks 0755: behind the data directory's 0700 nobody else reaches them,
 * and this keeps it so should the directory ever be opened up, and repairs a data directory an
 * older Mnemo left so. Files PostgreSQL creates afterwards are 0600 (measured: none with group or
 * other bits after migrations, a VACUUM FULL, a CHECKPOINT and a CREATE DATABASE). Symbolic links
 * are not followed: chmod would change what they point to. Returns how many it changed.
 */
export function restrictFiles(dir: string): number {
  let changed = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isSymbolicLink()) continue;
    const path = join(dir, entry.name);
    const { mode } = lstatSync(path);
    if (mode & 0o077) {
      chmodSync(path, mode & 0o700);
      changed++;
    }
    if (entry.isDirectory()) changed += restrictFiles(path);
  }
  return changed;
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
 * Takes the directory's lock for this process, creating the directory if needed (ensureDataDir),
 * or throws DataDirectoryBusy naming the process that holds it.
 */
export function lockDataDir(dir: string): DataDirLock {
  ensureDataDir(dir);
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
