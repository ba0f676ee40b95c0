/**
 * The embedded database (DESIGN §1): PostgreSQL compiled to WebAssembly (PGlite, with pgvector
 * and btree_gin) in this process, served over the wire protocol by pglite-socket, so the app
 * reaches it through the same postgres.js code path, migrations and row-level security as a
 * real server. Measured facts this module is built on (a spike, 2026-12-01; docs/embedded.md):
 *
 * - PGlite has one backend. The socket server serialises wire messages, and keeps a transaction's
 *   messages together, but statements of two connections outside a transaction interleave and
 *   came back with each other's results (300 of 600, no error). So the whole process uses ONE
 *   connection (`max: 1`, the server's `maxConnections: 1`): migrations first, then the app's.
 * - The socket server ignores the login user: every connection is the superuser. The app's role
 *   is taken with `SET ROLE` once (the one backend keeps it) and again in every tenant
 *   transaction (`transactionRole`), so row-level security applies as with a real server. It is
 *   not a wall against SQL the process itself runs (`RESET ROLE` would undo it): embedded is one
 *   trusted process, not a server others connect to.
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
import { lockDataDir } from './data-dir.ts';

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
  connectOptions?: Omit<ConnectOptions, 'max' | 'socketPath' | 'maxLifetimeSeconds' | 'transactionRole'>;
  log?: (message: string) => void;
}

export async function openEmbeddedDatabase({ dataDir, connectOptions = {}, log = () => {} }: OpenOptions): Promise<EmbeddedDatabase> {
  // Before PGlite touches the files: a second process must not open them.
  const lock = lockDataDir(dataDir);
  const undo: (() => Promise<void>)[] = [async () => lock.release()];
  const unwind = async () => {
    for (const step of undo.reverse()) await step().catch(() => {});
  };
  try {
    // Loaded only in this mode: PGlite and its extensions are tens of megabytes of WebAssembly.
    const [{ PGlite }, { vector }, { btree_gin }, { PGLiteSocketServer }] = await Promise.all([
      import('@electric-sql/pglite'),
      import('@electric-sql/pglite-pgvector'),
      import('@electric-sql/pglite/contrib/btree_gin'),
      import('@electric-sql/pglite-socket'),
    ]);
    const pglite = await PGlite.create({ dataDir: join(dataDir, 'pgdata'), extensions: { vector, btree_gin } });
    undo.push(() => pglite.close());

    const socketPath = join(dataDir, '.s.PGSQL.5432');
    const viaSocket = Buffer.byteLength(socketPath) <= SOCKET_PATH_MAX;
    // A socket file left by a process that was killed; the lock says no process uses it now.
    if (viaSocket && existsSync(socketPath)) rmSync(socketPath);
    const server = new PGLiteSocketServer({ db: pglite, maxConnections: 1, ...(viaSocket ? { path: socketPath } : { host: '127.0.0.1', port: 0 }) });
    await server.start();
    undo.push(() => server.stop());
    const listening = viaSocket ? socketPath : server.getServerConn();
    const base = viaSocket ? 'localhost' : listening;
    const socket = viaSocket ? { socketPath } : {};

    // The migration's client closes before the app's opens: the server takes one connection.
    await migrate({ adminUrl: `postgres://postgres@${base}/postgres`, appUrl: `postgres://${EMBEDDED_APP_ROLE}@${base}/postgres`, ...socket, log });

    const database = connect(`postgres://${EMBEDDED_APP_ROLE}@${base}/postgres`, {
      ...connectOptions,
      ...socket,
      max: 1,
      maxLifetimeSeconds: 0,
      transactionRole: EMBEDDED_APP_ROLE,
    });
    undo.push(() => database.close());
    await database.sql.unsafe(`set role ${EMBEDDED_APP_ROLE}`);
    return { database, listening, close: unwind };
  } catch (error) {
    await unwind();
    throw error;
  }
}
