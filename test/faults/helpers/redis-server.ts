/**
 * A private redis-server for the fault suite: its own port on loopback, no persistence at all
 * (`--save ''`, `--appendonly no`), so stopping it loses every key, as a Redis without
 * persistence does when it restarts. Never the machine's own Redis: only this process is killed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../../support/ports.ts';
import { sleep } from '../../../support/wait.ts';

export interface PrivateRedis {
  port: number;
  url: string;
  /** The running server's pid (undefined while stopped). */
  pid(): number | undefined;
  /** SIGKILL (the default, a crash) or SHUTDOWN NOSAVE (a clean stop); either way every key is gone. */
  stop(how?: 'kill' | 'shutdown'): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  /** Stops it for good and removes its working directory. */
  close(): Promise<void>;
  /** Everything the server wrote to stdout/stderr, for a failure message. */
  log(): string;
}

/** Sends one inline command and resolves with the first reply line (or rejects on a connection error). */
function command(port: number, line: string, timeoutMs = 1000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no reply to ${line} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('connect', () => socket.write(`${line}\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      if (reply.includes('\r\n')) {
        clearTimeout(timer);
        socket.end();
        resolve(reply.split('\r\n')[0]!);
      }
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(reply.split('\r\n')[0] ?? '');
    });
  });
}

export async function startPrivateRedis(options: { port?: number } = {}): Promise<PrivateRedis> {
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-faults-redis-'));
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let output = '';

  const launch = async () => {
    const started = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'yes'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    started.stdout!.on('data', (chunk) => (output += chunk));
    started.stderr!.on('data', (chunk) => (output += chunk));
    exited = new Promise((resolve) => started.on('exit', () => resolve()));
    child = started;
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (started.exitCode !== null || started.signalCode !== null) {
        throw new Error(`redis-server on port ${port} exited at start: ${output.slice(-2000)}`);
      }
      const pong = await command(port, 'PING').catch(() => '');
      if (pong === '+PONG') return;
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING: ${output.slice(-2000)}`);
      await sleep(50);
    }
  };

  const stop = async (how: 'kill' | 'shutdown' = 'kill') => {
    const running = child;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    if (how === 'shutdown') {
      await command(port, 'SHUTDOWN NOSAVE').catch(() => '');
      const stopped = await Promise.race([exited.then(() => true), sleep(5000).then(() => false)]);
      if (!stopped) running.kill('SIGKILL');
    } else {
      running.kill('SIGKILL');
    }
    await exited;
    child = undefined;
  };

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    pid: () => child?.pid,
    stop,
    restart: launch,
    close: async () => {
      await stop('kill');
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => output,
  };
}
