/**
 * A private PgBouncer (Debian's `pgbouncer`, 1.18) on loopback in front of a PostgreSQL server, in
 * transaction mode as production runs it (a server connection is a client's only for the length of
 * one transaction): its own port, config and log in a fresh temporary directory. It refuses to run
 * as root, so as root it runs as the `postgres` OS user. Clients log in with SCRAM against the
 * passwords given; PgBouncer logs in to the server as the same user. Only the process started here
 * is ever signalled.
 *
 * 1.18 keeps no prepared statement from one transaction to the next in transaction mode (1.21 can):
 * the apps it serves run with MNEMO_DB_PREPARED_STATEMENTS=false. With them on, postgres.js's
 * second use of a statement lands on another server connection and the query never answers.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from '../../../support/ports.ts';
import { postgresUserIds } from '../../../support/postgres-cluster.ts';
import { sleep } from '../../../support/wait.ts';

export interface PgBouncerUser {
  name: string;
  /** Checked by PgBouncer (SCRAM) when every user has one; without passwords it trusts (auth_type trust). */
  password?: string;
}

export interface PgBouncerOptions {
  /** The PostgreSQL server behind it; default 127.0.0.1. */
  serverHost?: string;
  serverPort: number;
  /** The databases it serves; default every database of the server (PgBouncer's `*`). */
  databases?: readonly string[];
  /** Who may connect (PgBouncer needs each user in its auth file, trust or not). */
  users: readonly PgBouncerUser[];
  /** Server connections per user and database (`default_pool_size`); default 20. */
  poolSize?: number;
  /** `max_client_conn`; default 1000. */
  maxClientConnections?: number;
  poolMode?: 'transaction' | 'session' | 'statement';
  port?: number;
}

export interface PgBouncer {
  port: number;
  /** The same URL (user, password, database) through PgBouncer: its host and port replaced. */
  through(url: string): string;
  /** A SHOW command on PgBouncer's admin console (e.g. `pools`, `stats`), its rows. */
  show(what: string): Promise<Record<string, unknown>[]>;
  /** PgBouncer's own pid (not a wrapper's), e.g. for its CPU time. */
  pid: number;
  /** PgBouncer's log, for a failure message. */
  log(): string;
  /** SIGTERM (immediate shutdown), SIGKILL if it lingers; removes its directory. */
  stop(): Promise<void>;
}

/** The admin console's user: a name no test database has. */
const ADMIN_USER = 'mnemo_bouncer_admin';

const quoted = (value: string) => `"${value.replaceAll('"', '""')}"`;

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-scale-pgbouncer-'));
  const ids = postgresUserIds('PgBouncer');
  if (ids) chownSync(dir, ids.uid, ids.gid);
  const adminPassword = `admin-${Math.random().toString(36).slice(2)}`;
  const users: PgBouncerUser[] = [...options.users, { name: ADMIN_USER, password: adminPassword }];
  const scram = options.users.every((user) => user.password !== undefined);
  const server = `host=${options.serverHost ?? '127.0.0.1'} port=${options.serverPort}`;
  const databases = options.databases?.map((name) => `${name} = ${server} dbname=${name}`) ?? [`* = ${server}`];
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text, { mode: 0o600 });
    if (ids) chownSync(join(dir, name), ids.uid, ids.gid);
  };
  file('userlist.txt', `${users.map((user) => `${quoted(user.name)} ${quoted(user.password ?? '')}`).join('\n')}\n`);
  file(
    'pgbouncer.ini',
    `[databases]
${databases.join('\n')}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = ${scram ? 'scram-sha-256' : 'trust'}
auth_file = ${join(dir, 'userlist.txt')}
admin_users = ${ADMIN_USER}
stats_users = ${ADMIN_USER}
pool_mode = ${options.poolMode ?? 'transaction'}
default_pool_size = ${options.poolSize ?? 20}
max_client_conn = ${options.maxClientConnections ?? 1000}
; SHOW STATS totals are refreshed every stats_period (60 s by default): a test reads them within a second.
stats_period = 1
; One line per client connection would drown what matters.
log_connections = 0
log_disconnections = 0
`,
  );

  const child: ChildProcess = spawn('pgbouncer', [join(dir, 'pgbouncer.ini')], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(ids ?? {}),
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // In the foreground PgBouncer logs to stderr.
  const log = () => output.slice(-4000);

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  // If the test process dies without stop(), do not leave a PgBouncer behind.
  const onExit = () => child.kill('SIGKILL');
  process.once('exit', onExit);
  void exited.then(() => process.removeListener('exit', onExit));

  const deadline = Date.now() + 15_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`pgbouncer on port ${port} did not start:\n${log()}`);
    }
    await sleep(50);
  }

  return {
    port,
    pid: child.pid!,
    through(url) {
      const moved = new URL(url);
      moved.hostname = '127.0.0.1';
      moved.port = String(port);
      return moved.toString();
    },
    async show(what) {
      // The admin console speaks the simple protocol only, and has no catalog to read types from.
      const admin = postgres({ host: '127.0.0.1', port, database: 'pgbouncer', username: ADMIN_USER, password: adminPassword, max: 1, fetch_types: false, onnotice: () => {} });
      try {
        return [...(await admin.unsafe(`show ${what}`))] as Record<string, unknown>[];
      } finally {
        await admin.end({ timeout: 1 });
      }
    },
    log,
    stop,
  };
}
