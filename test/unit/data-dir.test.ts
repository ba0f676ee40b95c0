/**
 * The embedded data directory's lock (src/embedded/data-dir.ts): PGlite does not lock its files,
 * so this is all that keeps two processes from running two PostgreSQLs over them.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DataDirectoryBusy, displayDataDir, lockDataDir, resolveDataDir } from '../../src/embedded/data-dir.ts';
import { withLocalSecrets } from '../../src/embedded/secrets.ts';

const root = mkdtempSync(join(tmpdir(), 'mnemo-datadir-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the data directory', () => {
  it('is ./.mnemo unless MNEMO_DATA_DIR names another, and is shown relative to the working directory', () => {
    expect(resolveDataDir({}, '/srv/app')).toBe('/srv/app/.mnemo');
    expect(resolveDataDir({ MNEMO_DATA_DIR: 'data/mnemo' }, '/srv/app')).toBe('/srv/app/data/mnemo');
    expect(resolveDataDir({ MNEMO_DATA_DIR: '/var/lib/mnemo' }, '/srv/app')).toBe('/var/lib/mnemo');
    expect(displayDataDir('/srv/app/.mnemo', '/srv/app')).toBe('./.mnemo');
    expect(displayDataDir('/var/lib/mnemo', '/srv/app')).toBe('/var/lib/mnemo');
  });

  it('is locked with this process\'s pid, released on close, and creatable with owner-only access', () => {
    const dir = join(root, 'fresh');
    const lock = lockDataDir(dir);
    expect(readFileSync(join(dir, 'lock'), 'utf8').trim()).toBe(String(process.pid));
    lock.release();
    expect(existsSync(join(dir, 'lock'))).toBe(false);
  });

  it('refuses a directory another live process holds, naming it and what to do', () => {
    const dir = join(root, 'busy');
    mkdirSync(dir);
    // The parent of this test process is alive for as long as the test runs.
    writeFileSync(join(dir, 'lock'), `${process.ppid}\n`);
    expect(() => lockDataDir(dir)).toThrow(DataDirectoryBusy);
    expect(() => lockDataDir(dir)).toThrow(new RegExp(`in use by another Mnemo process \\(pid ${process.ppid}\\).*MNEMO_DATA_DIR`));
    // Refusing leaves the holder's lock alone.
    expect(readFileSync(join(dir, 'lock'), 'utf8').trim()).toBe(String(process.ppid));
  });

  it('takes over a lock left by a process that is gone (killed, power cut)', () => {
    const dir = join(root, 'stale');
    mkdirSync(dir);
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    writeFileSync(join(dir, 'lock'), `${gone.stdout}\n`);
    const lock = lockDataDir(dir);
    expect(readFileSync(join(dir, 'lock'), 'utf8').trim()).toBe(String(process.pid));
    lock.release();
  });

  it('is made owner-only when its group or others may use it, before the lock or a secret is written in it', () => {
    for (const loose of [0o755, 0o750, 0o711, 0o777]) {
      const dir = join(root, `loose-${loose.toString(8)}`);
      mkdirSync(dir);
      chmodSync(dir, loose);
      lockDataDir(dir).release();
      expect(statSync(dir).mode & 0o777, loose.toString(8)).toBe(0o700);
    }
    const secrets = join(root, 'loose-secrets');
    mkdirSync(secrets);
    chmodSync(secrets, 0o777);
    withLocalSecrets({ MNEMO_DATA_DIR: secrets });
    expect(statSync(secrets).mode & 0o777).toBe(0o700);
    expect(statSync(join(secrets, 'jwt-secret')).mode & 0o777).toBe(0o600);
  });
});
