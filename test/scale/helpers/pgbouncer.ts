/**
 * A private PgBouncer (Debian's `pgbouncer`, 1.18) in front of a PostgreSQL server on loopback, in
 * transaction mode as production runs it: a server connection is a client's only for the length
 * of one transaction. It runs as the `postgres` OS user (PgBouncer refuses root; started as root
 * it switches user itself), its files in a fresh temporary directory, on its own port. Clients
 * log in with SCRAM against the passwords given; PgBouncer logs in to the server as the same user.
 * Only this process is ever signalled.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../helpers/process.ts';
import { sleep } from '../../helpers/wait.ts';

export interface PgBouncerUser {
  name: string;
  password: string;
}

export interface PgBouncerOptions {
  /** The PostgreSQL server's port on 127.0.0.1. */
  serverPort: number;
  /** Who may log in through it (every database of the server is reachable under its own name). */
  users: readonly PgBouncerUser[];
  /** Server connections per database and user (PgBouncer's default_pool_size). Default 20. */
  poolSize?: number;
}

export interface PgBouncer {
  port: number;
  /** PgBouncer's own pid (not a wrapper's), e.g. for its CPU time. */
  pid: number;
  /** `url` with its host and port turned to this PgBouncer's. */
  through(url: string): string;
  /** PgBouncer's log, for a failure message. */
  log(): string;
  stop(): Promise<void>;
}

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** The `postgres` OS user's ids, which PgBouncer switches to and which must read its files. */
function postgresIds(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) throw new Error('no postgres OS user on this machine (the PostgreSQL server package creates it)');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

export async function startPgBouncer({ serverPort, users, poolSize = 20 }: PgBouncerOptions): Promise<PgBouncer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-scale-pgbouncer-'));
  const asRoot = process.getuid?.() === 0;
  const quoted = (value: string) => `"${value.replaceAll('"', '""')}"`;
  writeFileSync(join(dir, 'userlist.txt'), users.map((u) => `${quoted(u.name)} ${quoted(u.password)}\n`).join(''));
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    `[databases]
* = host=127.0.0.1 port=${serverPort}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = ${join(dir, 'userlist.txt')}
pool_mode = transaction
default_pool_size = ${poolSize}
max_client_conn = 1000
log_connections = 0
log_disconnections = 0
${asRoot ? 'user = postgres\n' : ''}`,
  );
  if (asRoot) {
    const { uid, gid } = postgresIds();
    for (const path of [dir, join(dir, 'userlist.txt'), join(dir, 'pgbouncer.ini')]) chownSync(path, uid, gid);
  }

  let output = '';
  const child: ChildProcess = spawn('pgbouncer', [join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir });
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;

  const stop = async () => {
    if (running()) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 10_000;
  while (!(await listening(port))) {
    if (!running() || Date.now() > deadline) {
      await stop();
      throw new Error(`pgbouncer on port ${port} did not start: ${output.slice(-2000)}`);
    }
    await sleep(50);
  }

  return {
    port,
    pid: child.pid!,
    through(url) {
      const next = new URL(url);
      next.hostname = '127.0.0.1';
      next.port = String(port);
      return next.toString();
    },
    log: () => output,
    stop,
  };
}
