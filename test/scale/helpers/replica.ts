/**
 * A streaming replica of a private cluster (test/faults/helpers/postgres-cluster.ts), as operators
 * make one: `pg_basebackup -R` over loopback, then the copy started as a hot standby on its own port
 * and socket directory. `applyDelayMs` sets `recovery_min_apply_delay`, so the replica is visibly
 * behind: it receives the WAL at once but shows a commit only that long after it happened. Runs as
 * the `postgres` OS user (the server refuses root); only this server's pid is ever signalled.
 */
import { execFile } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import type { PostgresCluster } from '../../faults/helpers/postgres-cluster.ts';
import { alive } from '../../../support/processes.ts';
import { freePort } from '../../../support/ports.ts';
import { sleep } from '../../../support/wait.ts';

const run = promisify(execFile);
const pgBin = () => process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';

export interface Replica {
  port: number;
  /** The same URL (user, password, database) on the replica: its port replaced. */
  through(url: string): string;
  /** A clean stop (`pg_ctl stop -m fast`): its connections are closed, new ones refused. */
  stop(): Promise<void>;
  /** Starts it again; resolves once it accepts connections in recovery. */
  start(): Promise<void>;
  /** Stops it for good and removes its directory. */
  remove(): Promise<void>;
  /** The server log, for a failure message. */
  log(): string;
}

function postgresIds(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) throw new Error('no postgres OS user on this machine (the PostgreSQL server package creates it)');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

export async function startReplica(primary: PostgresCluster, { applyDelayMs = 0 }: { applyDelayMs?: number } = {}): Promise<Replica> {
  const port = await freePort();
  const root = mkdtempSync(join(tmpdir(), 'mnemo-scale-replica-'));
  const dataDir = join(root, 'data');
  const socketDir = join(root, 'socket');
  const logFile = join(root, 'server.log');
  const ids = postgresIds();
  const asPostgres = async (binary: string, args: string[]) => {
    await run(join(pgBin(), binary), args, { timeout: 120_000, cwd: root, ...(ids ?? {}) });
  };
  if (ids) chownSync(root, ids.uid, ids.gid);
  mkdirSync(socketDir, { mode: 0o700 });
  if (ids) chownSync(socketDir, ids.uid, ids.gid);

  const readPid = (): number | undefined => {
    const file = join(dataDir, 'postmaster.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  };
  let removed = false;
  const onExit = () => {
    if (removed) return;
    const pid = readPid();
    if (pid && alive(pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    rmSync(root, { recursive: true, force: true });
  };
  process.once('exit', onExit);

  // -R writes primary_conninfo and standby.signal; the copy's settings (the primary's port and
  // socket directory included) are overridden below, later lines of the file winning.
  await asPostgres('pg_basebackup', ['-D', dataDir, '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-R', '-X', 'stream', '-c', 'fast', '--no-sync']);
  appendFileSync(
    join(dataDir, 'postgresql.auto.conf'),
    [
      `port = ${port}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${socketDir}'`,
      `recovery_min_apply_delay = '${applyDelayMs}ms'`,
      'hot_standby = on',
      '',
    ].join('\n'),
  );

  const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const log = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4000) : '');
  const start = async () => {
    await asPostgres('pg_ctl', ['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'start']).catch((error: unknown) => {
      throw new Error(`replica on port ${port} did not start: ${String(error)}\n${log()}`);
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const sql = postgres(adminUrl, { max: 1, connect_timeout: 2, onnotice: () => {} });
      try {
        const [row] = await sql<{ recovery: boolean }[]>`select pg_is_in_recovery() as recovery`;
        if (!row?.recovery) throw new Error(`the server on port ${port} is not in recovery: not a replica`);
        return;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`replica on port ${port} does not answer: ${String(error)}\n${log()}`);
        await sleep(100);
      } finally {
        await sql.end({ timeout: 1 }).catch(() => {});
      }
    }
  };
  const stop = async () => {
    const pid = readPid();
    if (!pid || !alive(pid)) return;
    await asPostgres('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', '-t', '30', 'stop']);
  };

  try {
    await start();
  } catch (error) {
    onExit();
    removed = true;
    process.removeListener('exit', onExit);
    throw error;
  }

  return {
    port,
    through(url) {
      const moved = new URL(url);
      moved.hostname = '127.0.0.1';
      moved.port = String(port);
      return moved.toString();
    },
    stop,
    start,
    async remove() {
      if (removed) return;
      await stop().catch(() => onExit());
      removed = true;
      process.removeListener('exit', onExit);
      rmSync(root, { recursive: true, force: true });
    },
    log,
  };
}
