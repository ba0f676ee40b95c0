/**
 * PGlite served over the PostgreSQL wire protocol to any number of connections, each answered as a
 * real server would answer it: its own results, its own role.
 *
 * PGlite is one PostgreSQL backend, and pglite-socket's server (which the embedded mode used
 * before) runs every connection as that backend's superuser, whatever its login user: a test's
 * owner connection and the app's restricted one cannot both exist, and anything the app runs
 * outside a transaction that sets its role bypasses row-level security. It also queues each wire
 * message on its own, keeping one connection's messages together only inside a transaction. Here a
 * connection's turn is what a backend does between two ReadyForQuery messages: its messages up to a
 * Sync (or a simple Query, a Flush, the end of a COPY) go to PGlite together, and a connection whose
 * turn ended inside a transaction, a COPY or an unfinished extended query keeps the backend until a
 * ReadyForQuery says "idle". Other connections wait their turn, as they wait on locks in a server.
 * So transactions are serialised: never two at once, never a deadlock; a transaction that waits on
 * another connection waits forever.
 *
 * Per connection, as on a server:
 * - the role: PGlite ignores the login user (every session is its superuser), so each turn of a
 *   connection other than the last one's starts with `SET ROLE` to its login user (`RESET ROLE` for
 *   the superuser), and row-level security applies to what it runs; a login user the database does
 *   not have is refused at startup, as a server refuses it, and so is a database other than the
 *   one PGlite has (`postgres`);
 * - prepared statements: postgres.js names them at random per connection, so they never collide,
 *   and those of a connection that closes are deallocated;
 * - a connection that closes in the middle of its turn has its transaction rolled back.
 * Shared, unlike a server: everything else of the session (`set_config(…, false)`, advisory locks
 * held by the session, `LISTEN`), which the app never relies on across connections. Passwords are
 * not checked: whoever can reach the socket is trusted, which is why the embedded mode listens on a
 * Unix socket in an owner-only directory (src/embedded/database.ts).
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { PGlite } from '@electric-sql/pglite';

/** The superuser, the one role a PGlite session really has. */
const SUPERUSER = 'postgres';
const PROTOCOL_3 = 196608;
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;

/** Frontend messages after which the backend answers and the client waits for that answer. */
const ENDS_TURN = new Set(['S', 'Q', 'H', 'c', 'f']);
const SYNC = Buffer.from([0x53, 0, 0, 0, 4]);

export interface WireServerOptions {
  /** A Unix socket file to listen on; else `host` (127.0.0.1) and `port` (0: any free one). */
  path?: string;
  host?: string;
  port?: number;
}

export interface WireServer {
  /** The socket file, or host:port. */
  listening: string;
  /** The TCP port, when it listens on one. */
  port: number | undefined;
  /** Open connections. */
  connections(): number;
  /** Closes every connection (rolling back what they left open) and stops listening. PGlite stays open. */
  close(): Promise<void>;
}

/** What a connection asks of the backend, in order: its startup, its turns, and at the end cleaning up after it. */
type Turn = { kind: 'startup'; message: Buffer } | { kind: 'messages'; bytes: Buffer } | { kind: 'release' };

interface Connection {
  socket: Socket;
  /** Bytes received and not yet cut into messages. */
  pending: Buffer;
  started: boolean;
  role: string;
  /** Messages of the turn being received. */
  building: Buffer[];
  turns: Turn[];
  statements: Set<string>;
  closed: boolean;
}

export async function startWireServer(pglite: PGlite, options: WireServerOptions = {}): Promise<WireServer> {
  const open = new Set<Connection>();
  /** Connections with turns waiting, oldest first. */
  const waiting: Connection[] = [];
  /** The connection holding the backend between turns (in a transaction, a COPY, an unfinished extended query). */
  let holder: Connection | undefined;
  /** The connection whose role the backend has now. */
  let current: Connection | undefined;
  let pumping = false;
  let drained: (() => void) | undefined;

  const raw = (bytes: Uint8Array, onRawData: (chunk: Uint8Array) => void) =>
    pglite.runExclusive(() => pglite.execProtocolRawStream(bytes, { onRawData }));

  function enqueue(connection: Connection, turn: Turn): void {
    connection.turns.push(turn);
    if (!waiting.includes(connection)) waiting.push(connection);
    void pump();
  }

  async function run(connection: Connection, turn: Turn): Promise<void> {
    if (turn.kind === 'release') return release(connection);
    if (turn.kind === 'startup') return startup(connection, turn.message);
    if (current !== connection) {
      await pglite.exec(connection.role === SUPERUSER ? 'reset role' : `set role ${quoteIdent(connection.role)}`);
      current = connection;
    }
    noteStatements(connection, turn.bytes);
    let status: string | undefined;
    const replies = new MessageCutter((type, body) => {
      if (type === 'Z') status = String.fromCharCode(body[0]!);
    });
    await raw(turn.bytes, (chunk) => {
      replies.push(chunk);
      if (!connection.closed) connection.socket.write(chunk);
    });
    // No ReadyForQuery (a Flush, a COPY started) or one that is not "idle": the backend stays this connection's.
    holder = status === 'I' ? undefined : connection;
  }

  async function pump(): Promise<void> {
    if (pumping) return;
    pumping = true;
    try {
      for (;;) {
        const next = holder ?? waiting[0];
        const turn = next?.turns.shift();
        if (!next || !turn) break;
        if (next.turns.length === 0) waiting.splice(waiting.indexOf(next), 1);
        try {
          await run(next, turn);
        } catch {
          // PGlite threw rather than answering with an ErrorResponse: this connection's state is unknown.
          next.socket.destroy();
          if (turn.kind === 'release') holder = undefined;
        }
      }
    } finally {
      pumping = false;
      if (open.size === 0) drained?.();
    }
  }

  /** Leaves the backend an idle session for the next connection: no open transaction, extended query or statement of this one. */
  async function release(connection: Connection): Promise<void> {
    try {
      if (holder === connection) {
        holder = undefined;
        await raw(SYNC, () => {});
        await pglite.exec('rollback');
      }
      // A name is noted when its Parse is sent, and a Parse that failed prepared nothing: no such statement is fine.
      for (const name of connection.statements) await pglite.exec(`deallocate ${quoteIdent(name)}`).catch(() => {});
    } finally {
      if (current === connection) current = undefined;
      open.delete(connection);
    }
  }

  async function startup(connection: Connection, message: Buffer): Promise<void> {
    const params = message.subarray(8).toString('utf8').split('\0');
    const param = (name: string) => {
      const at = params.findIndex((value, index) => index % 2 === 0 && value === name);
      return at >= 0 ? params[at + 1] : undefined;
    };
    const role = param('user') || SUPERUSER;
    const database = param('database') || role;
    const { rows } = await pglite.query<{ role: boolean; database: boolean }>(
      'select exists (select from pg_roles where rolname = $1) as role, exists (select from pg_database where datname = $2 and datallowconn) as database',
      [role, database],
    );
    // PGlite has one database and answers whatever a client names: refused here, as a server refuses it.
    const refusal = !rows[0]?.role ? ['28000', `role "${role}" does not exist`] : !rows[0].database ? ['3D000', `database "${database}" does not exist`] : undefined;
    if (refusal) {
      connection.socket.end(errorResponse('FATAL', refusal[0]!, refusal[1]!));
      return;
    }
    connection.role = role;
    await raw(message, (chunk) => {
      if (!connection.closed) connection.socket.write(chunk);
    });
  }

  function receive(connection: Connection, data: Buffer): void {
    connection.pending = connection.pending.length === 0 ? data : Buffer.concat([connection.pending, data]);
    if (!connection.started) {
      if (connection.pending.length < 8) return;
      const length = connection.pending.readInt32BE(0);
      const code = connection.pending.readInt32BE(4);
      if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
        connection.pending = connection.pending.subarray(8);
        connection.socket.write('N');
        if (connection.pending.length > 0) receive(connection, Buffer.alloc(0));
        return;
      }
      // PGlite cannot cancel a running statement; a cancel request is answered, as a server may, by closing.
      if (code === CANCEL_REQUEST || code !== PROTOCOL_3) {
        connection.socket.destroy();
        return;
      }
      if (connection.pending.length < length) return;
      connection.started = true;
      enqueue(connection, { kind: 'startup', message: connection.pending.subarray(0, length) });
      connection.pending = connection.pending.subarray(length);
    }
    let offset = 0;
    const buffer = connection.pending;
    while (buffer.length - offset >= 5) {
      const end = offset + 1 + buffer.readInt32BE(offset + 1);
      if (buffer.length < end) break;
      const type = String.fromCharCode(buffer[offset]!);
      if (type === 'X') {
        connection.socket.end();
        return;
      }
      connection.building.push(buffer.subarray(offset, end));
      if (ENDS_TURN.has(type)) {
        enqueue(connection, { kind: 'messages', bytes: Buffer.concat(connection.building) });
        connection.building = [];
      }
      offset = end;
    }
    connection.pending = buffer.subarray(offset);
  }

  const server: Server = createServer((socket) => {
    const connection: Connection = { socket, pending: Buffer.alloc(0), started: false, role: SUPERUSER, building: [], turns: [], statements: new Set(), closed: false };
    open.add(connection);
    socket.setNoDelay(true);
    socket.on('data', (data) => receive(connection, data));
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      if (connection.closed) return;
      connection.closed = true;
      // Turns not yet run are dropped; the cleaning up waits for the backend like any turn.
      connection.turns.length = 0;
      enqueue(connection, { kind: 'release' });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if (options.path) server.listen(options.path, resolve);
    else server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : undefined;

  return {
    listening: options.path ?? `${options.host ?? '127.0.0.1'}:${port}`,
    port,
    connections: () => open.size,
    close: async () => {
      const closing = new Promise<void>((resolve) => server.close(() => resolve()));
      const idle = open.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => (drained = resolve));
      for (const connection of open) connection.socket.destroy();
      await Promise.all([closing, idle]);
    },
  };
}

/** Remembers the statements a turn prepares under a name and forgets those it closes, so they can be deallocated with the connection. */
function noteStatements(connection: Connection, turn: Buffer): void {
  new MessageCutter((type, body) => {
    if (type === 'P') {
      const name = body.subarray(0, body.indexOf(0)).toString('utf8');
      if (name) connection.statements.add(name);
    } else if (type === 'C' && body[0] === 0x53) {
      connection.statements.delete(body.subarray(1, body.indexOf(0, 1)).toString('utf8'));
    }
  }).push(turn);
}

/** Cuts a stream of typed messages (a type byte, then a length that counts itself) into whole ones. */
class MessageCutter {
  private rest: Buffer = Buffer.alloc(0);
  constructor(private readonly onMessage: (type: string, body: Buffer) => void) {}
  push(chunk: Uint8Array): void {
    const buffer = this.rest.length === 0 ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) : Buffer.concat([this.rest, chunk]);
    let offset = 0;
    while (buffer.length - offset >= 5) {
      const end = offset + 1 + buffer.readInt32BE(offset + 1);
      if (buffer.length < end) break;
      this.onMessage(String.fromCharCode(buffer[offset]!), buffer.subarray(offset + 5, end));
      offset = end;
    }
    this.rest = Buffer.from(buffer.subarray(offset));
  }
}

function errorResponse(severity: string, code: string, message: string): Buffer {
  const fields = Buffer.from(`S${severity}\0V${severity}\0C${code}\0M${message}\0\0`, 'utf8');
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([header, fields]);
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
