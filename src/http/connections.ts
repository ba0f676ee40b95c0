/**
 * The API's connections, at the Node level below Hono (Hono sees requests, not sockets):
 *
 * - Refused bodies. A request answered before its body arrived (413, 401, …) is answered with
 *   `Connection: close`; Node then closes the socket at once, and closing with unread bytes makes
 *   the kernel send a reset: a client still sending its body fails with EPIPE/ECONNRESET (curl
 *   exit 55) and never reads the answer. Instead the connection lingers: our side is shut for
 *   writing after the answer, and what the client still sends is read and discarded — bounded in
 *   time and bytes — until it has sent it all or hangs up. A body declared too large to a client
 *   that asks first (`Expect: 100-continue`) gets the final answer instead of `100 Continue`, so
 *   it is never sent at all.
 * - Keep-alive longer than the proxy in front (KEEP_ALIVE_TIMEOUT_MS).
 * - Draining on shutdown: stop listening; answer every request in flight, and any that still
 *   arrives on a connection already open, with `Connection: close`; close connections that stay
 *   idle; resolve once none is left.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import { errorBody } from './errors.ts';

export interface ConnectionOptions {
  /** A body declared larger than its path's limit is refused before the client sends it (no `100 Continue`). */
  bodyLimitFor: (path: string) => number;
  /** While draining, a connection idle this long is closed. */
  idleGraceMs: number;
  /** After answering a request whose body is still arriving, read on for at most this long… */
  lingerMs?: number;
  /** …and at most this many more bytes, then close regardless. */
  lingerBytes?: number;
}

export interface Connections {
  /** Stops accepting, lets what is in flight finish (each answer saying `Connection: close`), closes idle connections; resolves when none is left. */
  drain(): Promise<void>;
  /** Connections open now. */
  open(): number;
}

interface SocketState {
  /** Requests on this connection not yet answered (more than one only when a client pipelines). */
  active: number;
  idleSince: number;
  /** The latest request on this connection: is its body still arriving when Node closes? */
  request: IncomingMessage | undefined;
  lingering: boolean;
}

const SWEEP_EVERY_MS = 50;

/**
 * How long an idle keep-alive connection stays open: longer than the load balancers in front keep
 * theirs (nginx's upstream `keepalive_timeout`, haproxy's `timeout http-keep-alive` as deploy/
 * sets them, a cloud load balancer's 60 s idle timeout). Node's default of 5 s closes first, and
 * a proxy that sends its next request on the connection just as Node closes it gets a reset and
 * answers 502; a direct client sees "other side closed". Node requires `headersTimeout` to be the
 * larger of the two.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export function manageConnections(server: Server, options: ConnectionOptions): Connections {
  const { bodyLimitFor, idleGraceMs, lingerMs = 5000, lingerBytes = 64 * 1024 * 1024 } = options;
  const sockets = new Map<Socket, SocketState>();
  const inFlight = new Set<ServerResponse>();
  let draining = false;
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1000;

  server.on('connection', (socket: Socket) => {
    const state: SocketState = { active: 0, idleSince: Date.now(), request: undefined, lingering: false };
    sockets.set(socket, state);
    socket.once('close', () => sockets.delete(socket));
    // Node calls destroySoon() to close a connection after its last answer (`Connection: close`).
    const destroySoon = socket.destroySoon.bind(socket);
    socket.destroySoon = () => {
      if (state.lingering) return;
      const request = state.request;
      if (socket.destroyed || !request || request.complete) return destroySoon();
      state.lingering = true;
      linger(socket, request, destroySoon);
    };
  });

  function linger(socket: Socket, request: IncomingMessage, destroySoon: () => void): void {
    // Whatever still reads the body (a stream nobody pulls from any more) lets go of it; the
    // bytes are discarded as they come.
    request.removeAllListeners('data');
    request.resume();
    socket.end();
    request.once('end', destroySoon);
    const deadline = Date.now() + lingerMs;
    const byteLimit = socket.bytesRead + lingerBytes;
    const bound = setInterval(() => {
      if (Date.now() >= deadline || socket.bytesRead > byteLimit) socket.destroy();
    }, SWEEP_EVERY_MS);
    bound.unref();
    socket.once('close', () => clearInterval(bound));
  }

  // First in line, so a response Hono writes synchronously is already marked while draining.
  server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
    const state = sockets.get(request.socket);
    if (state) {
      state.active++;
      state.request = request;
    }
    inFlight.add(response);
    if (draining) response.shouldKeepAlive = false;
    response.once('close', () => {
      inFlight.delete(response);
      if (state) {
        state.active--;
        state.idleSince = Date.now();
      }
    });
  });

  // RFC 9110 §10.1.1: a server may answer `Expect: 100-continue` with the final status. Node
  // would send `100 Continue` to everyone; a body declared over the limit gets the route's 413.
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    const declared = Number(request.headers['content-length']);
    const path = (request.url ?? '/').split('?', 1)[0]!;
    if (!(declared > bodyLimitFor(path))) response.writeContinue();
    server.emit('request', request, response);
  });

  return {
    open: () => sockets.size,
    drain: () =>
      new Promise<void>((resolve) => {
        draining = true;
        for (const response of inFlight) if (!response.headersSent) response.shouldKeepAlive = false;
        const started = Date.now();
        // Idle connections get a grace period rather than being closed at once: a client that has
        // just had an answer may be sending its next request on that connection right now, and
        // closing under it would reset a request it cannot tell apart from one that failed midway.
        // Within the grace it gets an answer with `Connection: close`; past it, it was truly idle.
        // A refused body still arriving gets the same grace, so lingering cannot outlast the deadline.
        const sweep = setInterval(() => {
          const now = Date.now();
          for (const [socket, state] of sockets) {
            const idle = state.active === 0 && !state.lingering && now - Math.max(state.idleSince, started) >= idleGraceMs;
            if (idle || (state.lingering && now - started >= idleGraceMs)) socket.destroy();
          }
        }, SWEEP_EVERY_MS);
        // net's close, not http's: http.Server#close() would also destroy every idle keep-alive
        // connection at once (the race above). It calls back when the last connection is gone.
        NetServer.prototype.close.call(server, () => {
          clearInterval(sweep);
          resolve();
        });
      }),
  };
}

/**
 * Requests Node's HTTP parser refuses before any of the app runs — a NUL or other control byte
 * in a header, a header block over Node's 16 KiB limit, a malformed request line — are answered
 * in the error envelope with an `X-Request-Id`, as every other refusal is, instead of Node's bare
 * `400 Bad Request`. The parser's own message stays in the process (it may quote the request).
 */
export function answerMalformedRequests(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    // A peer that went away, or a socket already answered: nothing to say to it.
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, reason, message] =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'Request headers are larger than the server accepts (16 KiB)']
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout', 'The request was not received in time']
          : [400, 'Bad Request', 'Malformed HTTP request (request line or headers)'];
    const requestId = randomUUID();
    const body = JSON.stringify(errorBody('bad-input', message, requestId));
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
