/**
 * Private PostgreSQL servers on loopback, for the suites that crash, replicate or distribute one
 * (faults, scale, citus, the README run): `pg_ctl` as the `postgres` OS user, the data directory
 * under a fresh temporary directory, its own port on 127.0.0.1 (and its own socket directory),
 * trust authentication. A server can be crashed with `kill -9` of the postmaster and started again
 * on the same port (crash recovery then runs, as after a real crash). Never the machine's own
 * cluster: only the pid read from this server's postmaster.pid is ever signalled.
 *
 * One lifecycle (startPrivateServer) serves every kind: a new cluster (`initdb`,
 * startPostgresCluster) and a copy of one (`pg_basebackup`, test/scale/helpers/replica.ts).
 *
 * Uses the machine's PostgreSQL binaries (PG_BIN, default /usr/lib/postgresql/15/bin), which must
 * have pgvector installed (scripts/install-pgvector.sh).
 */
import { execFile } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import postgres, { type Sql } from 'postgres';
import { createMigratedDatabase } from './database.ts';
import { freePort } from './ports.ts';
import { alive } from './processes.ts';
import { TEST_APP_PASSWORD, TEST_APP_ROLE } from './urls.ts';
import { sleep } from './wait.ts';

const run = promisify(execFile);

export interface ClusterDatabase {
  name: string;
  /** The owner (superuser) URL, for what a test does behind the app's back. */
  adminUrl: string;
  /** The app role's URL (not the owner, no BYPASSRLS), as the API and the worker connect. */
  appUrl: string;
}

export interface PrivateServer {
  port: number;
  /** postgres://postgres@127.0.0.1:PORT/postgres */
  adminUrl: string;
  dataDir: string;
  /** The postmaster's pid from postmaster.pid, or undefined when none runs. */
  postmasterPid(): number | undefined;
  /**
   * A crash: SIGKILL to the postmaster, then waits until its backends have noticed and exited
   * (a new postmaster refuses to start while they still hold the old shared memory); any that
   * linger past `backendGraceMs` are killed too.
   */
  kill9(options?: { backendGraceMs?: number }): Promise<void>;
  /** Starts the server again on the same port; resolves once it is ready. */
  start(): Promise<void>;
  /** A clean stop (`pg_ctl stop -m fast`). */
  stop(): Promise<void>;
  /** Stops it for good and removes its directory. */
  remove(): Promise<void>;
  /** The server log, for a failure message. */
  log(): string;
}

export interface PostgresCluster extends PrivateServer {
  /** Creates a database and applies the migrations (provisioning the app role), as `mnemo migrate` does. */
  createDatabase(name?: string): Promise<ClusterDatabase>;
}

const pgBin = () => process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';

/**
 * The `postgres` OS user's ids when this process is root (undefined otherwise): the server, and
 * `program` beside it (e.g. PgBouncer), refuse to run as root.
 */
export function postgresUserIds(program = 'PostgreSQL'): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) throw new Error(`${program} refuses to run as root, and there is no postgres OS user to run it as (the PostgreSQL server package creates it)`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Runs a PostgreSQL binary as the `postgres` OS user (the server refuses to run as root). */
export async function asPostgres(binary: string, args: string[], timeoutMs = 60_000): Promise<string> {
  const asRoot = process.getuid?.() === 0;
  const command = asRoot ? 'runuser' : join(pgBin(), binary);
  const argv = asRoot ? ['-u', 'postgres', '--', join(pgBin(), binary), ...args] : args;
  const { stdout } = await run(command, argv, { timeout: timeoutMs, cwd: tmpdir() });
  return stdout;
}

/** The pid names a process, a zombie included (kill(pid, 0) succeeds for one, as the server's own check does). */
const exists = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The pids whose parent is `pid` (a postmaster's backends and auxiliary processes). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the command name, which is in parentheses and may contain spaces.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return children;
}

/** Those of `known` still running as a PostgreSQL server process (orphaned backends included). */
function stillRunning(known: readonly number[]): number[] {
  return known.filter((pid) => {
    if (!alive(pid)) return false;
    try {
      // A reused pid would belong to something else: only processes of the postgres user's server binary.
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('postgres');
    } catch {
      return false;
    }
  });
}

export interface PrivateServerSetup {
  /** What its errors call it, e.g. "private cluster", "replica". */
  what: string;
  /** The temporary directory's prefix, so a leftover says which suite made it. */
  label: string;
  port?: number;
  /** Fills the (not yet existing) data directory as the postgres user: initdb, pg_basebackup. */
  create(dataDir: string): Promise<void>;
  /** postgresql.conf lines added after the port, address and socket directory; later lines win. */
  settings: readonly string[];
  /** Throws unless the server that answers is the one wanted (e.g. a replica in recovery). */
  check?(sql: Sql): Promise<void>;
}

/** Makes a server's data directory (`setup.create`), configures it, and starts it. */
export async function startPrivateServer(setup: PrivateServerSetup): Promise<PrivateServer> {
  const { what } = setup;
  const port = setup.port ?? (await freePort());
  const root = mkdtempSync(join(tmpdir(), `mnemo-${setup.label}-pg-`));
  const dataDir = join(root, 'data');
  const socketDir = join(root, 'socket');
  const logFile = join(root, 'server.log');
  // mkdtemp makes the directory 0700 for root; the server runs as postgres.
  const ids = postgresUserIds();
  if (ids) chownSync(root, ids.uid, ids.gid);
  chmodSync(root, 0o700);

  let removed = false;
  // If the test process dies without remove(), do not leave a server behind.
  const onExit = () => {
    if (removed) return;
    const pid = readPid();
    if (pid && alive(pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    try {
      rmSync(root, { recursive: true, force: true });
    } catch {}
  };
  process.once('exit', onExit);

  function readPid(): number | undefined {
    const file = join(dataDir, 'postmaster.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  }

  const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const log = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4000) : '');

  const start = async () => {
    await asPostgres('pg_ctl', ['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'start']).catch((error: unknown) => {
      throw new Error(`${what} on port ${port} did not start: ${String(error)}\n${log()}`);
    });
    // pg_ctl -w waits for the server to accept connections; prove it over TCP as the tests will.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const sql = postgres(adminUrl, { max: 1, connect_timeout: 2, onnotice: () => {} });
      try {
        await sql`select 1`;
        await setup.check?.(sql);
        return;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`${what} on port ${port} does not answer: ${String(error)}\n${log()}`);
        await sleep(100);
      } finally {
        await sql.end({ timeout: 1 }).catch(() => {});
      }
    }
  };

  const kill9 = async ({ backendGraceMs = 5000 } = {}) => {
    const pid = readPid();
    if (!pid || !alive(pid)) throw new Error(`no running postmaster for ${dataDir}`);
    const backends = childrenOf(pid);
    process.kill(pid, 'SIGKILL');
    while (alive(pid)) await sleep(10);
    // Backends notice their postmaster's death and exit; one busy in a query may take a moment.
    const deadline = Date.now() + backendGraceMs;
    while (stillRunning(backends).length > 0 && Date.now() < deadline) await sleep(20);
    for (const left of stillRunning(backends)) {
      try {
        process.kill(left, 'SIGKILL');
      } catch {}
    }
    while (stillRunning(backends).length > 0) await sleep(10);
    // The dead postmaster stays a zombie until init reaps it (here after up to ~2 s), and a new
    // postmaster takes a zombie named in postmaster.pid for a running server. The lock file names
    // nobody alive and the backends that held the old shared memory are gone, so it can go, with
    // the socket's lock file, which names the same pid.
    if (exists(pid)) {
      rmSync(join(dataDir, 'postmaster.pid'), { force: true });
      rmSync(join(socketDir, `.s.PGSQL.${port}.lock`), { force: true });
    }
  };

  const stop = async () => {
    const pid = readPid();
    if (!pid || !alive(pid)) return;
    await asPostgres('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', '-t', '30', 'stop']);
  };

  try {
    await setup.create(dataDir);
    appendFileSync(
      join(dataDir, 'postgresql.auto.conf'),
      [`port = ${port}`, `listen_addresses = '127.0.0.1'`, `unix_socket_directories = '${socketDir}'`, ...setup.settings, ''].join('\n'),
    );
    mkdirSync(socketDir, { mode: 0o700 });
    if (ids) chownSync(socketDir, ids.uid, ids.gid);
    await start();
  } catch (error) {
    onExit();
    removed = true;
    process.removeListener('exit', onExit);
    throw error;
  }

  return {
    port,
    adminUrl,
    dataDir,
    postmasterPid: () => {
      const pid = readPid();
      return pid && alive(pid) ? pid : undefined;
    },
    kill9,
    start,
    stop,
    remove: async () => {
      if (removed) return;
      await stop().catch(async () => {
        const pid = readPid();
        if (pid && alive(pid)) await kill9({ backendGraceMs: 1000 }).catch(() => {});
      });
      removed = true;
      process.removeListener('exit', onExit);
      rmSync(root, { recursive: true, force: true });
    },
    log,
  };
}

export interface ClusterOptions {
  port?: number;
  /** More postgresql.conf lines (e.g. `shared_preload_libraries = 'citus'`); later lines win. */
  settings?: string[];
  /** The temporary directory's prefix, so a leftover says which suite made it. */
  label?: string;
}

/** A new cluster (`initdb`), started; its databases are made and migrated by `createDatabase`. */
export async function startPostgresCluster(options: ClusterOptions = {}): Promise<PostgresCluster> {
  const server = await startPrivateServer({
    what: 'private cluster',
    label: options.label ?? 'faults',
    ...(options.port === undefined ? {} : { port: options.port }),
    create: async (dataDir) => {
      await asPostgres('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
    },
    settings: [
      'max_connections = 60',
      'shared_buffers = 32MB',
      // Not needed here and noisy in the log.
      'log_min_messages = warning',
      ...(options.settings ?? []),
    ],
  });
  const createDatabase = async (name = `mnemo_faults_${Math.random().toString(36).slice(2, 10)}`): Promise<ClusterDatabase> => {
    const { adminUrl, appUrl } = await createMigratedDatabase(server.adminUrl, name, { user: TEST_APP_ROLE, password: TEST_APP_PASSWORD });
    return { name, adminUrl, appUrl };
  };
  return { ...server, createDatabase };
}
