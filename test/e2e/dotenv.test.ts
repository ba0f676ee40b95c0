/**
 * Settings from ./.env (src/env-file.ts): the API, the worker and the CLI, each started as its own
 * process in a directory holding a .env and with nothing but PATH in its environment (no
 * DATABASE_URL, no secret), work together: the CLI's token is accepted by the API, an erasure
 * (which needs MNEMO_ERASURE_KEY) is queued by the API and completed by the worker.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { freePort } from '../../support/ports.ts';
import { projectRoot } from '../../support/processes.ts';
import { removeQueuePrefix } from '../../support/redis.ts';
import { needs } from '../helpers/needs.ts';

/** `node --import tsx` as `npm start` runs it, with tsx found from the project, not the working directory. */
const tsx = import.meta.resolve('tsx');
const entries = {
  api: ['--import', tsx, join(projectRoot, 'src/server.ts')],
  worker: ['--import', tsx, join(projectRoot, 'workers/index.ts')],
  cli: [join(projectRoot, 'bin/mnemo.js')],
};

interface Child {
  process: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Runs an entry in `cwd` with only PATH (and `env`) in its environment. */
function run(entry: keyof typeof entries, args: string[], cwd: string, env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, [...entries[entry], ...args], { cwd, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { process: child, output: () => output, exited };
}

async function finish(child: Child): Promise<{ code: number | null; output: string }> {
  const code = await child.exited;
  return { code, output: child.output() };
}

async function stop(child: Child | undefined): Promise<void> {
  if (!child || child.process.exitCode !== null || child.process.signalCode !== null) return;
  child.process.kill('SIGTERM');
  await child.exited;
}

describe('settings from ./.env', () => {
  let t: TestDatabase;
  let dir: string;
  let prefix: string;
  let filePort: number;
  let settings: string;
  const started: Child[] = [];
  const start = (...args: Parameters<typeof run>) => {
    const child = run(...args);
    started.push(child);
    return child;
  };

  beforeAll(async () => {
    t = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'mnemo-dotenv-'));
    prefix = `mnemo-dotenv-${t.name}`;
    filePort = await freePort();
    settings = [
      '# as .env.example, pointed at this test database',
      `DATABASE_URL=${t.appUrl}`,
      `REDIS_URL="${inject('redisUrl')}"`,
      `PORT=${filePort}`,
      'MNEMO_JWT_SECRET=dotenv-secret-of-at-least-32-bytes!!',
      'export MNEMO_ERASURE_KEY=dotenv-erasure-key-of-at-least-32-bytes',
      `MNEMO_QUEUE_PREFIX=${prefix}`,
      'MNEMO_SHUTDOWN_TIMEOUT_MS=5000',
    ].join('\n');
    writeFileSync(join(dir, '.env'), `${settings}\n`);
  });

  afterAll(async () => {
    for (const child of started) await stop(child);
    rmSync(dir, { recursive: true, force: true });
    await removeQueuePrefix(prefix, inject('redisUrl'));
    await t.drop();
  });

  it('the API, the worker and the CLI started in its directory share its settings; the environment wins over it', needs('redis'), async () => {
    // PORT is in .env too: the environment's value is the one used.
    const port = await freePort();
    const api = start('api', [], dir, { PORT: String(port) });
    const worker = start('worker', [], dir);
    await vi.waitFor(() => expect(api.output()).toContain('"api listening"'), { timeout: 20_000, interval: 50 });
    expect(api.output()).toContain(`"port":${port}`);
    await vi.waitFor(() => expect(worker.output()).toContain('"worker started"'), { timeout: 20_000, interval: 50 });
    expect(worker.output()).toContain(`"prefix":"${prefix}"`);

    // The CLI signs with the secret from .env, and the API accepts it.
    const minted = await finish(start('cli', ['token', '--tenant', uniqueTenant('dotenv'), '--sub', 'dpo-1', '--role', 'admin'], dir));
    expect(minted.code, minted.output).toBe(0);
    const auth = { authorization: `Bearer ${minted.output.trim()}`, 'content-type': 'application/json' };
    const base = `http://127.0.0.1:${port}`;

    // Erasure needs MNEMO_ERASURE_KEY in both processes (without it: 503), and the worker's queue prefix.
    const requested = await fetch(`${base}/v1/memory/erasures`, { method: 'POST', headers: auth, body: JSON.stringify({ subject: { kind: 'participant', id: 'end-9' } }) });
    expect(requested.status).toBe(202);
    const { id } = (await requested.json()) as { id: string };
    await vi.waitFor(
      async () => {
        const erasure = (await (await fetch(`${base}/v1/memory/erasures/${id}`, { headers: auth })).json()) as { status: string };
        expect(erasure.status).toBe('completed');
      },
      { timeout: 20_000, interval: 100 },
    );
  });

  it('the environment wins even with an empty value', async () => {
    const result = await finish(start('cli', ['token', '--tenant', 't', '--sub', 's', '--role', 'admin'], dir, { MNEMO_JWT_SECRET: '' }));
    expect(result).toEqual({ code: 2, output: 'Invalid configuration: MNEMO_JWT_SECRET is required\n' });
  });

  it('without a .env in the working directory nothing is loaded; MNEMO_ENV_FILE names another file or turns it off', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'mnemo-dotenv-none-'));
    try {
      writeFileSync(join(elsewhere, 'mnemo.env'), `${settings}\n`);
      const token = ['token', '--tenant', 't', '--sub', 's', '--role', 'admin'];
      // Independent processes: started together, as each takes a second or so to start.
      const [none, named, off, missing] = await Promise.all([
        // No REDIS_URL came from anywhere: the worker is not needed (jobs would run in the API).
        finish(start('worker', [], elsewhere)),
        finish(start('cli', token, elsewhere, { MNEMO_ENV_FILE: 'mnemo.env' })),
        // DATABASE_URL given, so the secret is required (embedded, the data directory has one).
        finish(start('cli', token, dir, { MNEMO_ENV_FILE: '', DATABASE_URL: 'postgres://app@db.internal/mnemo' })),
        finish(start('worker', [], elsewhere, { MNEMO_ENV_FILE: 'nowhere.env' })),
      ]);
      expect(none).toEqual({
        code: 0,
        output: 'mnemo worker: not needed without REDIS_URL: jobs run in the API process (npm start); set REDIS_URL to run them in workers\n',
      });
      expect(named.code, named.output).toBe(0);
      expect(named.output).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
      expect(off).toEqual({ code: 2, output: 'Invalid configuration: MNEMO_JWT_SECRET is required\n' });
      expect(missing).toEqual({ code: 1, output: 'mnemo worker: Invalid configuration: MNEMO_ENV_FILE (default .env): cannot read nowhere.env (ENOENT)\n' });
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });
});
