/**
 * A private HAProxy (Debian's `haproxy`, 2.6) in front of API processes on loopback, as a load
 * balancer in production would be: round-robin over the servers, each checked on /readyz, a server
 * taken out after three failed checks and back after two good ones. A request whose
 * connection to a server is refused (a node just killed) is sent to another server; one already
 * sent to a node that dies is answered 502 by HAProxy, never repeated.
 *
 * Every answer, HAProxy's own 502/503 included, carries `X-Served-By: <server name>` (the server
 * the request was sent to last; empty when none was), so a test knows which node answered, and
 * every abnormal one (a 5xx, an abort) is in HAProxy's log by its X-Request-Id.
 *
 * Each request has a connection of its own (`option httpclose`): when a node dies under a request
 * that came on a kept-alive client connection, HAProxy closes that connection without an answer
 * and without a log line (what a client takes for a keep-alive race), and nothing would tell which
 * node the request was lost on. On a connection of its own, it is a logged 502 naming the node.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../../support/ports.ts';
import { sleep } from '../../../support/wait.ts';

export interface Backend {
  /** The server's name in HAProxy, and what X-Served-By says. */
  name: string;
  port: number;
}

export interface Haproxy {
  url: string;
  pid: number;
  /** Each server's state as HAProxy sees it: UP, DOWN, or a transition (e.g. "DOWN 1/1"). */
  states(): Promise<Record<string, string>>;
  /** Resolves once HAProxy has `server` in the given state (UP or DOWN), with the ms it took. */
  waitFor(server: string, state: 'UP' | 'DOWN', timeoutMs?: number): Promise<number>;
  /** HAProxy's own lines: state changes and abnormal requests (502s, aborts). */
  log(): string;
  /** The abnormal requests logged so far. */
  abnormal(): AbnormalRequest[];
  stop(): Promise<void>;
}

export const SERVED_BY = 'x-served-by';

/** A request HAProxy logged as abnormal (a 5xx, a connection closed early), by the X-Request-Id it came with. */
export interface AbnormalRequest {
  requestId: string;
  /** The server it was sent to ('<NOSRV>' when none). */
  server: string;
  /** The status HAProxy logged (-1 when the client got none: its connection was closed). */
  status: number;
  /** HAProxy's termination state, e.g. SH: the server closed before answering. */
  termination: string;
}

const ABNORMAL = 'mnemo-abnormal';

export async function startHaproxy(backends: readonly Backend[]): Promise<Haproxy> {
  const [port, statsPort] = [await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-scale-haproxy-'));
  const config = join(dir, 'haproxy.cfg');
  writeFileSync(
    config,
    `global
  log stdout format raw local0
  maxconn 2000

defaults
  mode http
  log global
  # Only what went wrong (a 5xx, an abort): one line per request would be tens of thousands.
  option dontlog-normal
  log-format "${ABNORMAL} id=%[capture.req.hdr(0)] server=%s status=%ST termination=%ts"
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  option httpclose
  # A refused connection (a node just killed, not yet marked down) goes to another server.
  retries 3
  option redispatch 1

frontend api
  bind 127.0.0.1:${port}
  http-request capture req.hdr(x-request-id) len 64
  default_backend nodes

backend nodes
  balance roundrobin
  option httpchk
  # HTTP/1.1 with a Host: the API, like any HTTP/1.1 server, answers 400 to a request without one.
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr host localhost
  http-check expect status 200
  # Checked every second, every 250 ms once a check has failed: a dead node is out within about
  # 1.5 s, while a node merely slow to answer under load (up to 3 s) stays in.
  timeout check 3s
  default-server check inter 1s fastinter 250ms fall 3 rise 2
  http-after-response set-header ${SERVED_BY} %[srv_name]
${backends.map((b) => `  server ${b.name} 127.0.0.1:${b.port}`).join('\n')}

listen stats
  bind 127.0.0.1:${statsPort}
  stats enable
  stats uri /stats
`,
  );

  let output = '';
  const child: ChildProcess = spawn('haproxy', ['-db', '-f', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;

  const states = async (): Promise<Record<string, string>> => {
    const csv = await (await fetch(`http://127.0.0.1:${statsPort}/stats;csv`)).text();
    const [header, ...rows] = csv.replace(/^# /, '').trim().split('\n');
    const columns = header!.split(',');
    const [proxy, server, status] = ['pxname', 'svname', 'status'].map((name) => columns.indexOf(name));
    const found: Record<string, string> = {};
    for (const row of rows) {
      const cells = row.split(',');
      if (cells[proxy!] === 'nodes' && cells[server!] !== 'BACKEND') found[cells[server!]!] = cells[status!]!;
    }
    return found;
  };

  const stop = async () => {
    if (running()) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };

  const waitFor = async (server: string, state: 'UP' | 'DOWN', timeoutMs = 30_000) => {
    const started = performance.now();
    for (;;) {
      const now = await states().catch(() => ({}) as Record<string, string>);
      if (now[server] === state) return performance.now() - started;
      if (!running()) throw new Error(`haproxy exited: ${output.slice(-2000)}`);
      if (performance.now() - started > timeoutMs) {
        throw new Error(`haproxy: ${server} not ${state} after ${timeoutMs} ms (${JSON.stringify(now)}): ${output.slice(-2000)}`);
      }
      await sleep(50);
    }
  };

  try {
    // Every server checked and UP before the first request: a test's load then starts spread.
    for (const backend of backends) await waitFor(backend.name, 'UP', 20_000);
  } catch (error) {
    await stop();
    throw error;
  }
  const abnormal = () =>
    [...output.matchAll(new RegExp(`${ABNORMAL} id=(\\S*) server=(\\S+) status=(-?\\d+) termination=(\\S+)`, 'g'))].map(
      ([, requestId, server, status, termination]) => ({ requestId: requestId!, server: server!, status: Number(status), termination: termination! }),
    );
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, states, waitFor, log: () => output, abnormal, stop };
}
