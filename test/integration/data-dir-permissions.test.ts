/**
 * Who may touch the embedded data directory (issue 24, defect 6). PGlite writes the files of a new
 * database with mode 0666 (it chmods them so after creating them, whatever the umask), and before
 * this fix only a directory Mnemo created itself was 0700: with `mkdir -m 755 d2;
 * MNEMO_DATA_DIR=d2 npm start`, the user `nobody` could write `d2/pgdata/global/1261`. These tests
 * run real PGlite in directories other users can reach up to the data directory itself, and ask
 * the operating system (as `nobody`, when the tests run as root) whether another user can write.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedServer } from '../../src/embedded/database.ts';
import { freePort } from '../../support/ports.ts';
import { nodeArgsFor } from '../helpers/process.ts';
import { projectRoot } from '../../support/processes.ts';

const asRoot = process.getuid?.() === 0;
// Traversable by everyone (mkdtemp makes 0700), so that only the data directory's own mode can
// keep another user out: otherwise the "nobody cannot write" checks below could not fail.
const root = mkdtempSync(join(tmpdir(), 'mnemo-modes-'));
chmodSync(root, 0o755);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const mode = (path: string) => statSync(path).mode & 0o777;

/** Every file and directory under `dir` (itself included) that its group or others may use, as `mode path`. */
function openToOthers(dir: string): string[] {
  const found: string[] = [];
  const visit = (path: string) => {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return;
    if (stat.mode & 0o077) found.push(`${(stat.mode & 0o777).toString(8)} ${path}`);
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(dir);
  return found.sort();
}
const summary = (list: string[]) => ({ count: list.length, first: list.slice(0, 3) });

/** Whether the user `nobody` may write `path`, as the kernel decides (directory chain included). */
const nobodyMayWrite = (path: string) => spawnSync('runuser', ['-u', 'nobody', '--', 'test', '-w', path]).status === 0;
const nobodyMayEnter = (path: string) => spawnSync('runuser', ['-u', 'nobody', '--', 'test', '-x', path]).status === 0;

/** Starts the embedded PostgreSQL on `dataDir` (creating its database if there is none) and stops it. */
async function openAndClose(dataDir: string): Promise<void> {
  const server = await startEmbeddedServer({ dataDir });
  await server.close();
}

describe('the embedded data directory is its owner\'s only', () => {
  const fresh = join(root, 'fresh');

  it.runIf(asRoot)('(the check works: nobody may write a 0666 file here, and enter a 0755 directory)', () => {
    const probe = join(root, 'probe');
    writeFileSync(probe, '');
    chmodSync(probe, 0o666);
    expect(nobodyMayWrite(probe)).toBe(true);
    expect(nobodyMayEnter(root)).toBe(true);
  });

  it('a fresh directory: created 0700, and every file PGlite writes in it is owner-only', async () => {
    await openAndClose(fresh);
    expect(mode(fresh)).toBe(0o700);
    expect(summary(openToOthers(fresh))).toEqual({ count: 0, first: [] });
    expect(mode(join(fresh, 'pgdata', 'global', '1261'))).toBe(0o600);
  }, 120_000);

  it('an existing directory others may enter (mkdir -m 755): made 0700 before anything is written, so nobody cannot write the database', async () => {
    const d2 = join(root, 'd2');
    mkdirSync(d2);
    chmodSync(d2, 0o755);
    if (asRoot) expect(nobodyMayEnter(d2)).toBe(true);
    await openAndClose(d2);
    expect(mode(d2)).toBe(0o700);
    expect(summary(openToOthers(d2))).toEqual({ count: 0, first: [] });
    if (asRoot) {
      expect(nobodyMayEnter(d2)).toBe(false);
      expect(nobodyMayWrite(join(d2, 'pgdata', 'global', '1261'))).toBe(false);
    }
  }, 120_000);

  it('a data directory an older Mnemo left (0755, files 0666): repaired when it is opened', async () => {
    await openAndClose(fresh);
    // What an older version left in a directory the user made: every file 0666, every directory 0755.
    const loosen = (path: string) => {
      const stat = lstatSync(path);
      chmodSync(path, stat.isDirectory() ? 0o755 : 0o666);
      if (stat.isDirectory()) for (const name of readdirSync(path)) loosen(join(path, name));
    };
    loosen(fresh);
    const catalog = join(fresh, 'pgdata', 'global', '1261');
    if (asRoot) expect(nobodyMayWrite(catalog)).toBe(true);
    await openAndClose(fresh);
    expect(mode(fresh)).toBe(0o700);
    expect(summary(openToOthers(fresh))).toEqual({ count: 0, first: [] });
    expect(mode(catalog)).toBe(0o600);
    if (asRoot) expect(nobodyMayWrite(catalog)).toBe(false);
  }, 120_000);

  // Started as nobody, the API must be able to read this checkout: not so in a clone under a 0700 directory (mktemp -d).
  it.runIf(asRoot && nobodyMayEnter(projectRoot))('refuses, in one line naming the directory and the fix, a directory others may enter that it may not change', async () => {
    // Owned by root, started as nobody: nobody may enter it but not chmod it.
    const shared = join(root, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o755);
    const run = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, ...nodeArgsFor('src/server.ts', [])], {
      cwd: projectRoot,
      env: { PATH: process.env.PATH, MNEMO_ENV_FILE: '', MNEMO_DATA_DIR: shared, PORT: String(await freePort()) },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(
      `mnemo api: ${shared} is open to other users (mode 755) and belongs to uid 0, so Mnemo cannot make it owner-only: ` +
        `run \`chmod 700 ${shared}\` as its owner, or set MNEMO_DATA_DIR to a directory of your own\n`,
    );
    expect(readdirSync(shared)).toEqual([]);
    expect(mode(shared)).toBe(0o755);
  }, 90_000);
});
