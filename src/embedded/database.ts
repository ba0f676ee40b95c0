/**
 * The embedded database (DESIGN §1): PostgreSQL compiled to WebAssembly (PGlite, with pgvector
 * and btree_gin) in this process, served over the wire protocol (src/embedded/wire-server.ts), so
 * the app reaches it through the same postgres.js code path, migrations and row-level security as
 * a real server. Measured facts this module is built on (docs/guide/embedded.md):
 *
 * - PGlite has one backend. The wire server gives each connection its turn between two
 *   ReadyForQuery messages and keeps a transaction's turns together, so connections never see each
 *   other's results; transactions are serialised. The app uses one connection all the same
 *   (`max: 1`): a second one would only wait for the first.
 * - PGlite ignores the login user: every session is its superuser. The wire server takes the
 *   connection's login role (`SET ROLE`) before each of its turns, so the app runs as `mnemo_api`
 *   and row-level security applies as with a real server. It is not a wall against SQL the process
 *   itself runs (`RESET ROLE` would undo it): embedded is one trusted process, not a server others
 *   connect to.
 * - So that nobody else can connect as that superuser, the server listens on a Unix socket inside
 *   the data directory (mode 0700), not on a TCP port; a path too long for a socket falls back to
 *   127.0.0.1 on a random port.
 * - `statement_timeout` has no effect and cancel requests are ignored.
 * - Commits are written to the files before they are acknowledged: none was lost in four SIGKILLs
 *   under load. PGlite never calls fsync, so an OS crash or power cut can lose the last ones.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type ConnectOptions, type Database } from '../db/client.ts';
import { migrate } from '../db/migrate.ts';
import { displayDataDir, lockDataDir, restrictFiles } from './data-dir.ts';
import { createPGlite } from './pglite.ts';
import { startWireServer } from './wire-server.ts';

/** The app's login role inside the embedded database (provisioned by migrate, as on a server). */
export const EMBEDDED_APP_ROLE = 'mnemo_api';
/** Unix socket paths are limited to 107 bytes (Linux; 103 on macOS). */
const SOCKET_PATH_MAX = 100;

export interface EmbeddedDatabase {
  /** The app's client: one connection, the restricted role in every tenant transaction. */
  database: Database;
  /** Where it listens, for the startup banner and logs. */
  listening: string;
  /** Closes the app's client, the socket server and PGlite, then releases the directory's lock. */
  close(): Promise<void>;
}

export interface OpenOptions {
  dataDir: string;
  /** Options of the app's client (timeouts, application name); its pool is always one connection. */
  connectOptions?: Omit<ConnectOptions, 'max' | 'socketPath' | 'maxLifetimeSeconds'>;
  log?: (message: string) => void;
}

export async function openEmbeddedDatabase({ dataDir, connectOptions = {}, log = () => {} }: OpenOptions): Promise<EmbeddedDatabase> {
  const server = await startEmbeddedServer({ dataDir });
  let database: Database | undefined;
  try {
    // The migration's client closes before the app's opens: the server takes one connection.
    await migrate({ adminUrl: server.url('postgres'), appUrl: server.url(EMBEDDED_APP_ROLE), ...server.socket, log });

    database = connect(server.url(EMBEDDED_APP_ROLE), { ...connectOptions, ...server.socket, max: 1, maxLifetimeSeconds: 0 });
  } catch (error) {
    await database?.close().catch(() => {});
    await server.close();
    throw error;
  }
  const app = database;
  return {
    database: app,
    listening: server.listening,
    close: async () => {
      await app.close().catch(() => {});
      await server.close();
    },
  };
}

export interface EmbeddedServer {
  /** Where it listens: the socket file, or host:port. */
  listening: string;
  /** postgres.js's `path` option when it listens on a Unix socket (spread into the client's options). */
  socket: { socketPath?: string };
  /** A URL naming `user` on this server (the user is only a name: every connection is the superuser). */
  url(user: string): string;
  /** Stops the socket server and PGlite, then releases the directory's lock. Never throws. */
  close(): Promise<void>;
}

/**
 * Takes the data directory's lock, starts PGlite on its files and serves it on the socket; the
 * one place the embedded PostgreSQL is started (the API through openEmbeddedDatabase, `mnemo
 * export` directly). No migrations, no app role: the caller's one connection is the superuser.
 * `mustExist` refuses a directory that holds no database instead of creating one.
 */
export async function startEmbeddedServer({ dataDir, mustExist = false }: { dataDir: string; mustExist?: boolean }): Promise<EmbeddedServer> {
  // Before PGlite touches the files: a second process must not open them.
  const lock = lockDataDir(dataDir);
  const undo: (() => Promise<void>)[] = [async () => lock.release()];
  const unwind = async () => {
    for (const step of undo.reverse()) await step().catch(() => {});
  };
  try {
    const pgdata = join(dataDir, 'pgdata');
    if (mustExist && !existsSync(join(pgdata, 'PG_VERSION'))) {
      throw new Error(`${displayDataDir(dataDir)} holds no embedded database (no ${join(displayDataDir(dataDir), 'pgdata')}); set MNEMO_DATA_DIR to the directory the API used`);
    }
    // Loaded only in this mode: PGlite and its extensions are tens of megabytes of WebAssembly.
    const pglite = await createPGlite({ dataDir: pgdata });
    undo.push(() => pglite.close());
    // After PGlite has written a new database's files (0666) or opened an older one's.
    restrictFiles(dataDir);

    const socketPath = join(dataDir, '.s.PGSQL.5432');
    const viaSocket = Buffer.byteLength(socketPath) <= SOCKET_PATH_MAX;
    // A socket file left by a process that was killed; the lock says no process uses it now.
    if (viaSocket && existsSync(socketPath)) rmSync(socketPath);
    const server = await startWireServer(pglite, viaSocket ? { path: socketPath } : {});
    undo.push(() => server.close());
    const listening = server.listening;
    const base = viaSocket ? 'localhost' : listening;
    return {
      listening,
      socket: viaSocket ? { socketPath } : {},
      url: (user) => `postgres://${user}@${base}/postgres`,
      close: unwind,
    };
  } catch (error) {
    await unwind();
    throw error;
  }
}
