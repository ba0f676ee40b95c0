/**
 * The embedded default (issue 13): `npm start` with no settings at all — no DATABASE_URL, no
 * REDIS_URL, no secret — runs the whole service on PGlite in the process, jobs included, as a new
 * user starts it. The test runs it exactly so (its own data directory and port, nothing else),
 * mints tokens with the CLI as the README says, runs the main flows over HTTP, kills the process
 * with SIGKILL and reads everything back after a restart, and checks that a second process is
 * refused the same directory.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../support/ports.ts';
import { nodeArgsFor } from '../helpers/process.ts';
import { eventually, sleep } from '../../support/wait.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
// How long a process gets to answer /readyz: 5–10 s alone, but `npm test` runs five files on two
// cores and CI runs it beside nothing else; a start under that load has taken over a minute.
const READY_WITHIN_MS = 150_000;
const home = mkdtempSync(join(tmpdir(), 'mnemo-embedded-'));
const dataDir = join(home, 'data');
// Last, after every describe's own afterAll has stopped its process.
afterAll(() => rmSync(home, { recursive: true, force: true }));

/** What a user's shell has: no Mnemo settings (and no ./.env: MNEMO_ENV_FILE= skips a developer's). */
const userEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH ?? '',
  HOME: home,
  MNEMO_ENV_FILE: '',
  MNEMO_DATA_DIR: dataDir,
  ...extra,
});

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** `npm start`, as the README says, until it answers /readyz. */
async function start(port: number): Promise<Started> {
  const child = spawn('npm', ['start'], { cwd: root, env: userEnv({ PORT: String(port) }), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + READY_WITHIN_MS;
  for (;;) {
    if (child.exitCode !== null) {
      await exited;
      throw new Error(`npm start exited (${child.exitCode}): ${out}`);
    }
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status === 200, () => false);
    if (ready) return { child, output: () => out, exited };
    if (Date.now() > deadline) throw new Error(`npm start did not get ready within ${READY_WITHIN_MS / 1000} s: ${out}`);
    await sleep(200);
  }
}

/** The node process under npm (the one holding the data directory's lock). */
const apiPid = () => Number(readFileSync(join(dataDir, 'lock'), 'utf8').trim());

const token = (tenant: string, role = 'admin') =>
  execFileSync(process.execPath, nodeArgsFor('bin/mnemo.js', ['token', '--tenant', tenant, '--sub', 'you', '--role', role]), { cwd: root, env: userEnv(), encoding: 'utf8' }).trim();

describe('npm start with nothing installed or set (embedded PostgreSQL, in-process jobs)', () => {
  let port: number;
  let api: Started | undefined;
  let admin: string;
  let other: string;
  const call = async (method: string, path: string, body?: unknown, as = admin) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { authorization: `Bearer ${as}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };
  const written: { id?: string; episode?: string; erased?: string } = {};

  beforeAll(async () => {
    port = await freePort();
    api = await start(port);
    admin = token('demo');
    other = token('someone-else');
  }, READY_WITHIN_MS + 30_000);

  afterAll(async () => {
    if (api?.child.exitCode === null) {
      process.kill(-api.child.pid!, 'SIGKILL');
      await api.exited;
    }
  });

  it('says what runs, makes its secrets, and keeps its data in the directory', () => {
    const out = api!.output();
    expect(out).toContain('Storage: embedded PostgreSQL (');
    expect(out).toContain('Jobs: in-process');
    expect(out).toContain('Memory search: keyword (KINDGI_MEMORY_EMBEDDINGS turns on search by meaning)');
    expect(out).toContain('Try: npx mnemo token --tenant demo --sub you --role admin');
    expect(out).toMatch(/Console: http:\/\/localhost:\d+\/console \(add --console to the token command for a sign-in link\)/);
    for (const file of ['jwt-secret', 'erasure-key', 'lock', 'pgdata']) expect(existsSync(join(dataDir, file))).toBe(true);
  });

  it('writes, supersedes, keeps revisions and finds by keyword; another tenant sees none of it', async () => {
    const created = await call('POST', '/v1/memory/facts', { type: 'note', content: { text: 'The customer prefers dark roast coffee' } });
    expect(created.status).toBe(201);
    written.id = created.body.id;
    const superseded = await call('POST', `/v1/memory/facts/${written.id}/supersede`, { content: { text: 'The customer prefers light roast coffee now' }, expectVersion: 1 });
    expect(superseded.status).toBe(200);
    expect(superseded.body.version).toBe(2);
    const revisions = await call('GET', `/v1/memory/facts/${written.id}/revisions`);
    expect(revisions.body.data.map((r: { version: number }) => r.version).sort()).toEqual([1, 2]);
    const found = await call('POST', '/v1/memory/retrieve', { mode: 'keyword', query: 'roast coffee' });
    expect(found.status).toBe(200);
    expect(found.body.results.map((r: { fact: { id: string } }) => r.fact.id)).toEqual([written.id]);
    // Row-level security applies in the embedded database as on a server.
    expect((await call('GET', `/v1/memory/facts/${written.id}`, undefined, other)).status).toBe(404);
    expect((await call('POST', '/v1/memory/retrieve', { mode: 'keyword', query: 'roast coffee' }, other)).body.results).toEqual([]);
  });

  it('answers the coverage report', async () => {
    const episode = await call('POST', '/v1/memory/facts', {
      type: 'kiwi.page',
      memoryKind: 'episodic',
      episodeId: 'run-249',
      path: 'episodes/2026/run-249.md',
      content: { text: 'asked twice about spare parts' },
    });
    expect(episode.status).toBe(201);
    written.episode = episode.body.id;
    const report = await call('GET', '/v1/memory/report?episodesPrefix=episodes/');
    expect(report.body.unmerged_count).toBe(1);
    expect(report.body.unmerged[0].episode_id).toBe('run-249');
    await call('POST', '/v1/memory/facts', { type: 'note', memoryKind: 'semantic', content: { text: 'buys spare parts' }, mergedFrom: [{ type: 'run', id: 'run-249' }] });
    expect((await call('GET', '/v1/memory/report')).body.unmerged_count).toBe(0);
    // A background report runs as an in-process job on the one connection, writing its progress.
    const requested = await call('POST', '/v1/memory/reports', { episodesPrefix: 'episodes/' });
    expect(requested.status).toBe(202);
    let background = requested.body;
    for (let i = 0; i < 100 && background.status !== 'completed' && background.status !== 'failed'; i++) {
      await sleep(200);
      background = (await call('GET', `/v1/memory/reports/${requested.body.id}`)).body;
    }
    expect(background).toMatchObject({ status: 'completed', progress: { done: 1, total: 1 }, result: { episodic_count: 1, unmerged_count: 0 } });
  });

  it('runs an erasure to completion in the process (no worker, no Redis)', async () => {
    const fact = await call('POST', '/v1/memory/facts', { type: 'note', content: { text: 'end-9 called about a refund' }, scope: { projectId: 'p1', participantId: 'end-9' } });
    written.erased = fact.body.id;
    const erasure = await call('POST', '/v1/memory/erasures', { subject: { kind: 'participant', id: 'end-9' } });
    expect(erasure.status).toBe(202);
    let status = erasure.body.status;
    for (let i = 0; i < 100 && status !== 'completed' && status !== 'failed'; i++) {
      await sleep(200);
      status = (await call('GET', `/v1/memory/erasures/${erasure.body.id}`)).body.status;
    }
    expect(status).toBe('completed');
    expect((await call('GET', `/v1/memory/facts/${written.erased}`)).status).toBe(404);
  });

  it('refuses a second process on the same directory, with a clear message', async () => {
    let failure: { status: number | null; stderr: string } | undefined;
    try {
      execFileSync(process.execPath, nodeArgsFor('src/server.ts', []), { cwd: root, env: userEnv({ PORT: String(await freePort()) }), encoding: 'utf8', stdio: 'pipe', timeout: 30_000 });
    } catch (error) {
      failure = error as { status: number | null; stderr: string };
    }
    expect(failure?.status).toBe(1);
    expect(failure?.stderr).toContain(`is in use by another Mnemo process (pid ${apiPid()})`);
  });

  it('loses no acknowledged write when killed (SIGKILL), and reads everything back after a restart', async () => {
    const last = await call('POST', '/v1/memory/facts', { type: 'note', content: { text: 'written just before the crash' } });
    expect(last.status).toBe(201);
    process.kill(-api!.child.pid!, 'SIGKILL');
    await api!.exited;
    // The lock of the killed process is left behind; the restart takes it over.
    api = await start(port);
    admin = token('demo');
    expect((await call('GET', `/v1/memory/facts/${last.body.id}`)).body.content).toEqual({ text: 'written just before the crash' });
    const fact = await call('GET', `/v1/memory/facts/${written.id}`);
    expect(fact.body).toMatchObject({ version: 2, content: { text: 'The customer prefers light roast coffee now' } });
    expect((await call('GET', `/v1/memory/facts/${written.id}/revisions`)).body.data).toHaveLength(2);
    expect((await call('POST', '/v1/memory/retrieve', { mode: 'keyword', query: 'roast coffee' })).body.results).toHaveLength(1);
    expect((await call('GET', '/v1/memory/report')).body.episodic_count).toBe(1);
    // Stopped as a user does (Ctrl-C / SIGTERM): it exits 0 and leaves no lock behind.
    process.kill(apiPid(), 'SIGTERM');
    expect(await api!.exited).toBe(0);
    expect(existsSync(join(dataDir, 'lock'))).toBe(false);
  }, READY_WITHIN_MS + 30_000);
});

describe('KINDGI_MEMORY_EMBEDDINGS=local: search by meaning with the built-in model, in the same process', () => {
  const dir = join(home, 'local-model');
  let child: ChildProcess | undefined;
  let exited: Promise<number | null> | undefined;

  afterAll(async () => {
    if (child?.exitCode === null) {
      process.kill(-child.pid!, 'SIGKILL');
      await exited;
    }
  });

  it('embeds what is written (in-process jobs) and finds it by meaning', async () => {
    const port = await freePort();
    const env = { ...userEnv({ PORT: String(port), KINDGI_MEMORY_EMBEDDINGS: 'local' }), MNEMO_DATA_DIR: dir };
    child = spawn(process.execPath, nodeArgsFor('src/server.ts', []), { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    exited = new Promise((resolve) => child!.on('exit', (code) => resolve(code)));
    await eventually(
      async () => {
        if (child!.exitCode !== null) throw new Error(`the server exited (${child!.exitCode}): ${out}`);
        return fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false);
      },
      READY_WITHIN_MS,
      () => `not ready: ${out}`,
      200,
    );
    expect(out).toContain('Memory search: keyword and by meaning (built-in use-lite-512, in this process)');
    const auth = {
      authorization: `Bearer ${execFileSync(process.execPath, nodeArgsFor('bin/mnemo.js', ['token', '--tenant', 'demo', '--sub', 'you', '--role', 'admin']), { cwd: root, env, encoding: 'utf8' }).trim()}`,
      'content-type': 'application/json',
    };
    const texts = ['The cat sleeps on the warm windowsill', 'Quarterly revenue grew by twelve percent', 'The kitten naps in the sun'];
    for (const text of texts) {
      const response = await fetch(`http://127.0.0.1:${port}/v1/memory/facts`, { method: 'POST', headers: auth, body: JSON.stringify({ type: 'note', content: { text } }) });
      expect(response.status).toBe(201);
    }
    // The embed job runs in the process; wait until search by meaning serves all three.
    type Found = { results: { fact: { content: { text: string } } }[]; journal: { degraded?: string } };
    let last: Found | undefined;
    const found = await eventually(
      async () => {
        const response = await fetch(`http://127.0.0.1:${port}/v1/memory/retrieve`, { method: 'POST', headers: auth, body: JSON.stringify({ mode: 'semantic', query: 'a sleepy pet', limit: 3 }) });
        last = (await response.json()) as Found;
        return !last.journal.degraded && last.results.length === 3 && last;
      },
      90_000,
      () => `search by meaning did not serve all three: ${JSON.stringify(last)}; the server said: ${out}`,
      200,
    );
    expect(found.results.slice(0, 2).map((r) => r.fact.content.text).sort()).toEqual([texts[0], texts[2]].sort());
  }, READY_WITHIN_MS + 120_000);
});
