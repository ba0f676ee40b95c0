/**
 * Fault rows at the HTTP edge (issue 10), against a real API process (`src/server.ts`) over this
 * file's own database and the machine's Redis:
 *
 * - SIGTERM under keep-alive load: 12 clients on keep-alive connections write in a loop; SIGTERM
 *   mid-load. The process must stop accepting connections, answer what is in flight (and what
 *   arrives on a connection that was already open) with `Connection: close`, close idle
 *   connections, and exit 0 well within MNEMO_SHUTDOWN_TIMEOUT_MS. Every request either succeeded
 *   or got an answer a client may retry: a 503, or a connection refused / closed before any byte of
 *   the request went out. Each outcome is checked against the database.
 * - Oversized and chunked bodies: 2 MiB and 50 MB with a Content-Length, and a chunked body with no
 *   length growing past 1 MiB, on /v1 and /api/kiwi, from curl and from node:http: a readable 413
 *   `payload-too-large`, and the route handler never runs (the body is a valid fact padded with
 *   JSON whitespace, so a handler that ran would store it).
 */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenFor } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type Deployment, startDeployment } from '../helpers/deployment.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { type RunningProcess, stopProcess } from '../../support/processes.ts';
import { eventually, sleep } from '../../support/wait.ts';

const FACTS = '/v1/memory/facts';
const MiB = 1024 * 1024;
const SHUTDOWN_TIMEOUT_MS = 10_000;

/** A valid fact, then JSON whitespace up to `size` bytes: stored if a handler ever parsed it. */
function paddedFact(marker: string, size: number): Buffer {
  const json = Buffer.from(JSON.stringify({ type: 'acme.note', content: { text: marker } }));
  const body = Buffer.alloc(Math.max(size, json.length), 0x20);
  json.copy(body);
  return body;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** A failure sending the body (EPIPE, ECONNRESET): the server hung up while the body was still coming. */
  sendError: string | undefined;
}

/**
 * One request over node:http. `body` as a Buffer goes with its Content-Length; as chunks it goes
 * chunked (no length), written until the answer arrives or the chunks run out.
 */
function send(port: number, path: string, token: string, body: Buffer | { chunk: Buffer; count: number }, agent: http.Agent | false = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const chunked = !Buffer.isBuffer(body);
    let answer: Omit<Answer, 'sendError'> | undefined;
    let socketClosed = false;
    let sendError: string | undefined;
    // Settled once the answer is read and the connection is gone, so a reset after the answer counts too.
    const settle = () => {
      if (answer && socketClosed) resolve({ ...answer, sendError });
    };
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(body.length) }),
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          answer = { status: response.statusCode!, headers: response.headers, body: text };
          settle();
        });
        response.on('error', reject);
      },
    );
    request.on('socket', (socket) =>
      socket.once('close', () => {
        socketClosed = true;
        settle();
      }),
    );
    let answered = false;
    request.on('response', () => (answered = true));
    request.on('error', (error: NodeJS.ErrnoException) => {
      if (!answered) reject(error);
      else sendError ??= error.code ?? error.message;
    });
    if (!chunked) {
      request.end(body);
      return;
    }
    let sent = 0;
    const pump = () => {
      while (!answered && sent < body.count) {
        sent++;
        if (!request.write(body.chunk)) return void request.once('drain', pump);
      }
      request.end();
    };
    pump();
  });
}

/**
 * The simplest client there is: writes the whole request, and only then reads the answer. If the
 * server hangs up while the body is still coming, the write fails and the answer is lost.
 */
function sendAllThenRead(port: number, path: string, token: string, body: Buffer): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = netConnect({ host: '127.0.0.1', port });
    socket.pause();
    let text = '';
    let written = false;
    let closed = false;
    let sendError: string | undefined;
    const settle = () => {
      if (!written || !closed) return;
      const [head = '', rest = ''] = text.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      const headers = Object.fromEntries(
        head
          .split('\r\n')
          .slice(1)
          .map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      resolve({ status, headers, body: rest, sendError });
    };
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => (sendError ??= error.code ?? error.message));
    socket.on('close', () => {
      closed = true;
      settle();
    });
    socket.once('connect', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
      socket.write(body, () => {
        // Only now does it read.
        written = true;
        socket.resume();
        settle();
      });
    });
  });
}

/** curl, the way an operator tries it: exit code, status and body. */
function curl(args: string[]): Promise<{ code: number | null; status: string; body: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('curl', ['-sS', '-o', '-', '-w', '\n%{http_code}', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => (err += chunk));
    child.on('exit', (code) => {
      const cut = out.lastIndexOf('\n');
      resolve({ code, status: out.slice(cut + 1), body: out.slice(0, cut), stderr: err });
    });
  });
}

type Outcome =
  | { kind: 'ok'; marker: string; status: number; close: boolean }
  | { kind: 'retryable'; marker: string; why: string }
  | { kind: 'failed'; marker: string; why: string };

/**
 * One write on a keep-alive agent, classified from the client's side: a 2xx is ok; a 503, a
 * refused connection, or a connection that failed before any byte of this request reached the
 * kernel is retryable; anything else (another status, a reset after the request went out, a
 * response cut short) is a failure — the request may have committed and the client cannot know.
 */
function write(port: number, agent: http.Agent, token: string, marker: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ type: 'acme.note', content: { text: marker } });
    let settled = false;
    const settle = (outcome: Outcome) => {
      if (!settled) resolve(outcome);
      settled = true;
    };
    let socket: Socket | undefined;
    let writtenBefore = 0;
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        path: FACTS,
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (response) => {
        response.resume();
        response.on('end', () => {
          const status = response.statusCode!;
          const close = response.headers.connection?.toLowerCase() === 'close';
          if (status >= 200 && status < 300) settle({ kind: 'ok', marker, status, close });
          else if (status === 503) settle({ kind: 'retryable', marker, why: '503' });
          else settle({ kind: 'failed', marker, why: `status ${status}` });
        });
        response.on('error', (error: NodeJS.ErrnoException) => settle({ kind: 'failed', marker, why: `response cut: ${error.code ?? error.message}` }));
      },
    );
    request.on('socket', (s) => {
      socket = s;
      writtenBefore = s.bytesWritten;
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') return settle({ kind: 'retryable', marker, why: 'ECONNREFUSED' });
      const sentNothing = socket !== undefined && socket.bytesWritten === writtenBefore;
      if (sentNothing) return settle({ kind: 'retryable', marker, why: `closed before sending (${error.code})` });
      settle({ kind: 'failed', marker, why: `${error.code ?? error.message} after sending (reused socket: ${request.reusedSocket})` });
    });
    request.end(body);
  });
}

/** A raw HTTP/1.1 connection, to hold a request half-sent or a connection idle. */
function rawConnection(port: number): Promise<{ socket: Socket; received: () => string; ended: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: '127.0.0.1', port });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    const ended = new Promise<void>((done) => socket.on('close', () => done()));
    socket.on('error', () => {});
    socket.once('connect', () => resolve({ socket, received: () => text, ended }));
    socket.once('error', reject);
  });
}

function refused(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = netConnect({ host: '127.0.0.1', port });
    socket.on('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

describe('HTTP faults: a real API process', () => {
  let t: TestDatabase;
  const deployments: Deployment[] = [];

  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    for (const deployment of deployments) await deployment.close();
    await t.drop();
  });

  /** A new API process over this file's database, under this file's queue prefix. */
  async function startApi(): Promise<{ api: RunningProcess; port: number }> {
    const deployment = await startDeployment({
      db: t,
      prefix: `mnemo-faults-http-${t.name}`,
      env: { MNEMO_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) },
    });
    deployments.push(deployment);
    return { api: deployment.api, port: Number(new URL(deployment.apiUrl).port) };
  }

  const storedMarkers = async (tenantId: string): Promise<Set<string>> => {
    const rows = await t.admin<{ text: string }[]>`select content->>'text' as text from facts where tenant_id = ${tenantId}`;
    return new Set(rows.map((row) => row.text));
  };

  it('oversized and chunked bodies (2 MiB, 50 MB, chunked with no length) → 413, handler never runs', async () => {
    const { api, port } = await startApi();
    const tenantId = uniqueTenant('bodies');
    const token = await tokenFor({ tid: tenantId, role: 'admin' });
    const url = `http://127.0.0.1:${port}`;
    const files: string[] = [];
    const file = (name: string, body: Buffer) => {
      const path = join(tmpdir(), `mnemo-faults-${process.pid}-${name}`);
      writeFileSync(path, body);
      files.push(path);
      return path;
    };
    const expect413 = (answer: { status: number | string; body: string; sendError?: string | undefined }, label: string) => {
      expect(answer.sendError, `${label}: sending the body`).toBeUndefined();
      expect(String(answer.status), label).toBe('413');
      const parsed = JSON.parse(answer.body) as { error: { code: string; requestId: string } };
      expect(parsed.error.code, label).toBe('payload-too-large');
      expect(parsed.error.requestId, label).toBeTruthy();
    };
    try {
      // The control: the same padded shape under the limit is a valid fact, and is stored.
      const control = await send(port, FACTS, token, paddedFact('control', 512 * 1024));
      expect(control.status, control.body).toBe(201);

      const results: Record<string, string> = {};
      const fiftyMB = paddedFact('refused-50mb', 50_000_000);
      const twoMiB = paddedFact('refused-2mib', 2 * MiB);

      // curl, as the issue tried it: with Expect: 100-continue (its default for big bodies) and
      // without (the body streams at once and the server must read on after answering).
      const big = file('50mb.json', fiftyMB);
      for (const expectHeader of [[], ['-H', 'Expect:']]) {
        const answer = await curl([...expectHeader, '-H', `authorization: Bearer ${token}`, '-H', 'content-type: application/json', '--data-binary', `@${big}`, `${url}${FACTS}`]);
        expect(answer.code, `curl ${expectHeader.join(' ')}: ${answer.stderr}`).toBe(0);
        expect413(answer, `curl 50 MB ${expectHeader.join(' ')}`);
      }
      const small = file('2mib.json', twoMiB);
      const curl2 = await curl(['-H', 'Expect:', '-H', `authorization: Bearer ${token}`, '--data-binary', `@${small}`, `${url}${FACTS}`]);
      expect(curl2.code, curl2.stderr).toBe(0);
      expect413(curl2, 'curl 2 MiB');

      // node:http, no Expect: the whole body is on its way when the answer comes.
      const node2 = await send(port, FACTS, token, twoMiB);
      expect413(node2, 'node 2 MiB');
      expect(node2.headers.connection).toBe('close');
      results['2MiB'] = String(node2.status);
      const node50 = await send(port, FACTS, token, fiftyMB);
      expect413(node50, 'node 50 MB');
      results['50MB'] = String(node50.status);

      // A client that sends everything before it reads.
      expect413(await sendAllThenRead(port, FACTS, token, twoMiB), 'send-all 2 MiB');
      expect413(await sendAllThenRead(port, FACTS, token, fiftyMB), 'send-all 50 MB');

      // Chunked with no length: the first 64 KiB is a valid fact, then whitespace past 1 MiB.
      const head = paddedFact('refused-chunked', 64 * 1024);
      const chunked = await send(port, FACTS, token, { chunk: head, count: 64 }); // up to 4 MiB
      expect413(chunked, 'node chunked');
      results.chunked = String(chunked.status);

      // KiwiFS's path has the same limit.
      expect413(await send(port, '/api/kiwi/memory/report', token, twoMiB), 'kiwi 2 MiB');
      expect413(await send(port, '/api/kiwi/memory/report', token, { chunk: head, count: 64 }), 'kiwi chunked');

      // Nothing but the control was stored, and the API is still serving.
      const stored = await storedMarkers(tenantId);
      stored.delete('control');
      expect([...stored]).toEqual([]);
      const after = await send(port, FACTS, token, paddedFact('after', 100));
      expect(after.status).toBe(201);
      expect(api.child.exitCode).toBeNull();

      console.log(`[faults] oversized bodies: 2MiB→${results['2MiB']}, 50MB→${results['50MB']}, chunked→${results.chunked}, stored=${stored.size}`);
    } finally {
      for (const path of files) rmSync(path, { force: true });
      await stopProcess(api);
    }
  });

  it('Expect: 100-continue follows each route’s limit: a 2 MiB batch write is invited, a 2 MiB single write gets 413 at once', async () => {
    const { api, port } = await startApi();
    const token = await tokenFor({ tid: uniqueTenant('continue'), role: 'admin' });
    // The first line the server sends after headers that announce a body and wait for leave to send it.
    const firstLine = (path: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = netConnect(port, '127.0.0.1');
        socket.setTimeout(5000, () => socket.destroy(new Error(`no answer for ${path}`)));
        socket.on('error', reject);
        socket.once('data', (chunk: Buffer) => {
          resolve(chunk.toString('latin1').split('\r\n', 1)[0]!);
          socket.destroy();
        });
        socket.write(
          `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${2 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n`,
        );
      });
    try {
      expect(await firstLine('/v1/memory/facts:batch')).toBe('HTTP/1.1 100 Continue');
      expect(await firstLine(FACTS)).toBe('HTTP/1.1 413 Payload Too Large');
    } finally {
      await stopProcess(api);
    }
  });

  it('keeps an idle keep-alive connection open longer than a load balancer keeps its own (60 s): a request after 8 s idle is answered on it', async () => {
    const { api, port } = await startApi();
    const socket = netConnect(port, '127.0.0.1');
    let received = '';
    let closed = false;
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('close', () => (closed = true));
    socket.on('error', () => {});
    const healthz = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
    const answers = () => received.split('HTTP/1.1 200').length - 1;
    try {
      socket.write(healthz);
      await eventually(async () => answers() === 1, 5000, () => `first answer: ${JSON.stringify(received)}`);
      // Node closes an idle connection after 5 s by default; a proxy that reuses it after that
      // (nginx, haproxy, a cloud load balancer: 60 s idle) gets a reset and answers 502.
      await sleep(8000);
      expect(closed).toBe(false);
      socket.write(healthz);
      await eventually(async () => answers() === 2, 5000, () => `closed=${closed}, received: ${JSON.stringify(received)}`);
    } finally {
      socket.destroy();
      await stopProcess(api);
    }
  });

  it('SIGTERM under keep-alive load: drains, answers or refuses retryably, exits 0', async () => {
    const { api, port } = await startApi();
    const tenantId = uniqueTenant('drain');
    const token = await tokenFor({ tid: tenantId, role: 'admin' });
    const clients = 12;
    const outcomes: Outcome[] = [];
    const byClient: Outcome[][] = Array.from({ length: clients }, () => []);
    let sequence = 0;
    let stop = false;

    // Two keep-alive connections that sit idle after one request: one stays idle (the server must
    // close it), the other asks for readiness once the drain has begun.
    const idle = await rawConnection(port);
    const probe = await rawConnection(port);
    for (const connection of [idle, probe]) {
      connection.socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      await eventually(async () => connection.received().includes('"ok"'), 5000, () => 'a first answer on an idle connection', 10);
    }

    const agents = Array.from({ length: clients }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    const loops = agents.map(async (agent, client) => {
      while (!stop) {
        const outcome = await write(port, agent, token, `drain-${client}-${sequence++}`);
        outcomes.push(outcome);
        byClient[client]!.push(outcome);
        // A refused connection means the server has stopped accepting: this client is done.
        if (outcome.kind !== 'ok' && outcome.why === 'ECONNREFUSED') return;
        if (outcome.kind === 'failed') return;
      }
    });

    // A request in flight at SIGTERM: headers and half the body sent, the rest after.
    const slowBody = JSON.stringify({ type: 'acme.note', content: { text: 'drain-slow' } });
    const slow = await rawConnection(port);
    slow.socket.write(
      `POST ${FACTS} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(slowBody)}\r\n\r\n${slowBody.slice(0, 20)}`,
    );

    await sleep(1500);
    const before = outcomes.length;
    expect(before, 'requests before SIGTERM').toBeGreaterThan(clients);
    const signalled = performance.now();
    api.child.kill('SIGTERM');
    await api.waitFor('"api stopping"', 5000);

    // Not accepting: a new connection is refused while the process is still up (the slow request holds it).
    await sleep(200);
    const fresh = await refused(port);
    const upWhileRefusing = api.child.exitCode === null;
    // A request on a connection opened before: answered (readiness fails now), with Connection: close.
    probe.socket.write(`GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    // The idle one is closed by the server once its grace is over.
    await Promise.race([idle.ended, sleep(3000)]);

    // The request in flight gets the rest of its body.
    slow.socket.write(slowBody.slice(20));

    const code = await Promise.race([api.exited, sleep(SHUTDOWN_TIMEOUT_MS + 5000).then(() => 'still running' as const)]);
    const exitMs = Math.round(performance.now() - signalled);
    stop = true;
    await Promise.all(loops);
    for (const agent of agents) agent.destroy();

    // Each outcome against the database: what was acknowledged is stored, nothing else is.
    const stored = await storedMarkers(tenantId);
    const ok = outcomes.filter((o) => o.kind === 'ok');
    const retryable = outcomes.filter((o) => o.kind === 'retryable');
    const failed = outcomes.filter((o) => o.kind === 'failed');
    console.log(
      `[faults] SIGTERM drain: clients=${clients}, requests=${outcomes.length}, ok=${ok.length}, retryable=${retryable.length}, failed=${failed.length}, exit=${code} in ${exitMs}ms`,
    );
    expect(failed.map((o) => `${o.marker}: ${o.why}`)).toEqual([]);
    expect(code, api.stdout().slice(-2000)).toBe(0);
    expect(exitMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS / 2);
    expect(api.stdout()).not.toContain('shutdown timed out');
    expect(fresh, 'a new connection during the drain').toBe('ECONNREFUSED');
    expect(upWhileRefusing, 'the API waits for the request in flight').toBe(true);
    expect(idle.socket.destroyed || idle.socket.readableEnded, 'the idle keep-alive connection is closed').toBe(true);
    const readiness = probe.received().split('HTTP/1.1 ').at(-1)!;
    expect(readiness).toMatch(/^503 /);
    expect(readiness).toMatch(/\r\nconnection: close\r\n/i);
    expect(readiness).toContain('"code":"unavailable"');
    expect(ok.filter((o) => !stored.has(o.marker)).map((o) => o.marker), 'acknowledged and not stored').toEqual([]);
    expect(retryable.filter((o) => stored.has(o.marker)).map((o) => `${o.marker}: ${o.why}`), 'refused yet stored').toEqual([]);
    // The request in flight was answered, with Connection: close, and the connection closed.
    await Promise.race([slow.ended, sleep(1000)]);
    expect(slow.received()).toMatch(/^HTTP\/1\.1 201 /);
    expect(slow.received()).toMatch(/\r\nconnection: close\r\n/i);
    expect(slow.socket.destroyed || slow.socket.readableEnded, 'the connection of the request in flight is closed').toBe(true);
    expect(stored.has('drain-slow')).toBe(true);
    // Every client was told to close its connection (its last answer said Connection: close)
    // before it found the server no longer accepting.
    for (const [client, history] of byClient.entries()) {
      const last = history.at(-1);
      const answered = history.at(-2);
      expect(last?.kind === 'retryable' && last.why, `client ${client} ends refused`).toBe('ECONNREFUSED');
      expect(answered?.kind === 'ok' && answered.close, `client ${client}: its last answer says Connection: close`).toBe(true);
    }
  });
});
