/**
 * `npm run test:readme`: the shell blocks of the README and then of every guide page (docs/guide/,
 * in the order of the "## Guide" list of docs/README.md, which must name each page), run as
 * written, in order, in one shell, on a fresh database, as a new user pastes them — and it fails on
 * any curl answering other than 2xx, or any command exiting non-zero, unless the page's comment on
 * that command says so (`# → 404`, `# → exit 1`). The README runs the embedded mode;
 * docs/guide/embedded-to-server.md moves its data to the private PostgreSQL and starts the API and
 * a worker there, and the pages after it run against those.
 *
 * It must not touch the user's machine, so:
 * - PostgreSQL and Redis are private: a cluster made with `initdb` and started with `pg_ctl` as the
 *   `postgres` OS user (support/postgres-cluster.ts) and a `redis-server`
 *   (test/faults/helpers/redis-server.ts), each on a free port on 127.0.0.1, removed at the end.
 *   Your own cluster (and its `mnemo` database), your Redis and port 3000 are never used.
 * - The commands run in a scratch copy of the repository (the files git knows, tracked or not
 *   ignored, as they are in the working tree; `node_modules` linked), so `cp .env.example .env`
 *   writes the copy's `.env`, never yours.
 * - The only rewriting: host:port in URLs — `localhost:3000` / `127.0.0.1:3000` (the API),
 *   `127.0.0.1:5432` (PostgreSQL) and `127.0.0.1:6379` (Redis) — in the pages' commands and in
 *   the copy's `.env.example`; `PGHOST`/`PGPORT` for `createdb`, and `PORT` for the API (set in the
 *   environment, which wins over `.env`). Nothing else of the user's environment is passed on
 *   (no DATABASE_URL, no secrets): only PATH, HOME, locale and temp-dir variables.
 * - `npm start` and `npm run worker` (or `npx mnemo serve|worker`) are started in the background
 *   and awaited (`/readyz` answers 200; the worker logs "worker started"), and stopped at the end
 *   (SIGTERM, then the whole process group), or where a page stops them (the reader's Ctrl-C,
 *   `<!-- test:readme stops the api -->`). `npm install` is skipped when `node_modules` exists,
 *   and the test suites the pages list (`npm test`, `npm run test:*`, `npm run bench`) are not run.
 *
 * Each block and command is printed as it runs, with what the API answered; a summary closes.
 * Needs what `npm run test:faults` needs: the PostgreSQL server binaries with pgvector, and
 * `redis-server`. It runs as its own vitest project (test/readme/vitest.config.ts), not in `npm test`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type PostgresCluster, startPostgresCluster } from '../../support/postgres-cluster.ts';
import { type PrivateRedis, startPrivateRedis } from '../faults/helpers/redis-server.ts';
import { freePort } from '../../support/ports.ts';
import { projectRoot } from '../../support/processes.ts';
import { bashScript, pagesInOrder, readmeBlocks } from './readme-script.ts';

const HOME_PORTS = { api: 3000, postgres: 5432, redis: 6379 };

let cluster: PostgresCluster | undefined;
let redis: PrivateRedis | undefined;
let scratch: string;

/** The files of the working tree git knows (tracked, or untracked and not ignored), copied into `to`. */
function copyRepository(to: string): number {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: projectRoot, encoding: 'utf8' });
  let copied = 0;
  for (const path of new Set(listed.split('\0').filter(Boolean))) {
    // A node_modules that is a symlink is not matched by .gitignore's `node_modules/`: linked below.
    if (path === 'node_modules') continue;
    const from = join(projectRoot, path);
    // Listed but deleted or moved in the working tree.
    if (!existsSync(from)) continue;
    mkdirSync(dirname(join(to, path)), { recursive: true });
    cpSync(from, join(to, path));
    copied++;
  }
  symlinkSync(join(projectRoot, 'node_modules'), join(to, 'node_modules'));
  return copied;
}

/** Every host:port the pages name for the API, PostgreSQL and Redis, pointed at the private ones. */
function rewritePorts(text: string, ports: { api: number; postgres: number; redis: number }): string {
  return text
    .replace(/\b(localhost|127\.0\.0\.1):3000\b/g, `$1:${ports.api}`)
    .replace(/\b(localhost|127\.0\.0\.1):5432\b/g, `$1:${ports.postgres}`)
    .replace(/\b(localhost|127\.0\.0\.1):6379\b/g, `$1:${ports.redis}`);
}

/** A host:port of the user's own servers left after rewriting would reach them: refuse to run. */
function assertNoHomePorts(name: string, text: string): void {
  const left = new RegExp(`\\b(localhost|127\\.0\\.0\\.1):(${Object.values(HOME_PORTS).join('|')})\\b`).exec(text);
  if (left) throw new Error(`${name} still names ${left[0]} after rewriting; the README test will not run against your own servers`);
}

beforeAll(async () => {
  [cluster, redis] = await Promise.all([startPostgresCluster(), startPrivateRedis()]);
  scratch = mkdtempSync(join(tmpdir(), 'mnemo-readme-'));
});

afterAll(async () => {
  await Promise.all([cluster?.remove(), redis?.close()]);
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

it('the README and the guide pages run as written, in order, on a fresh database', async () => {
  const started = performance.now();
  const ports = { api: await freePort(), postgres: cluster!.port, redis: redis!.port };
  const repo = join(scratch, 'mnemo');
  const logs = join(scratch, 'logs');
  mkdirSync(logs, { recursive: true });
  const files = copyRepository(repo);

  const envExample = rewritePorts(readFileSync(join(repo, '.env.example'), 'utf8'), ports);
  assertNoHomePorts('.env.example', envExample);
  writeFileSync(join(repo, '.env.example'), envExample);

  const guide = readdirSync(join(projectRoot, 'docs/guide'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/guide/${name}`);
  const pages = pagesInOrder(readFileSync(join(projectRoot, 'docs/README.md'), 'utf8'), guide);
  const hasNodeModules = existsSync(join(projectRoot, 'node_modules'));
  const blocks = pages.flatMap((file) => readmeBlocks(rewritePorts(readFileSync(join(projectRoot, file), 'utf8'), ports), { hasNodeModules, file }));
  const commands = blocks.flatMap((block) => block.commands);
  const script = bashScript(blocks, readFileSync(join(projectRoot, 'test/readme/prelude.sh'), 'utf8'));
  assertNoHomePorts('the pages', script);
  writeFileSync(join(scratch, 'readme.sh'), script);

  const perPage = pages.map((file) => `${file} ${blocks.filter((block) => block.file === file).length}`).join(', ');
  process.stdout.write(
    `README test: ${blocks.length} shell blocks (${perPage}), ${commands.length} commands; ${files} files copied to ${repo}\n` +
      `private PostgreSQL on ${ports.postgres}, Redis on ${ports.redis}, the API on ${ports.api}\n`,
  );

  // A new user's shell: none of this machine's Mnemo or database settings.
  const env: Record<string, string> = {
    PGHOST: '127.0.0.1',
    PGPORT: String(ports.postgres),
    PORT: String(ports.api),
    README_LOGS: logs,
  };
  for (const name of ['PATH', 'HOME', 'USER', 'LANG', 'LC_ALL', 'TERM', 'TMPDIR']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  // Its own process group (detached), so everything it started can be stopped together.
  const bash = spawn('bash', [join(scratch, 'readme.sh')], { cwd: repo, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const show = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    process.stdout.write(chunk);
  };
  bash.stdout!.on('data', show);
  bash.stderr!.on('data', show);
  const code = await new Promise<number | null>((resolve) => bash.on('exit', (exitCode) => resolve(exitCode)));
  try {
    process.kill(-bash.pid!, 'SIGKILL');
  } catch {
    // Every process of the group has exited already.
  }

  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const ran = commands.filter((command) => command.action.kind === 'run').length;
  const background = commands.filter((command) => command.action.kind === 'background').length;
  const skipped = blocks.flatMap((block) => block.commands.filter((command) => command.action.kind === 'skip').map((command) => `${block.file}:${command.line} ${command.text}`));
  const failuresExpected = commands.filter((command) => command.expect.status !== undefined || command.expect.exit !== undefined).length;
  process.stdout.write(
    `\nREADME test ${code === 0 ? 'passed' : 'FAILED'} in ${seconds} s: ${blocks.length} blocks, ${ran} commands run ` +
      `(${failuresExpected} with an expected status or exit code), ${background} in the background, ` +
      `${skipped.length} skipped (${skipped.join('; ')})\n`,
  );
  expect(code, `the pages' commands failed; the end of their output:\n${output.slice(-6000)}`).toBe(0);
  // The script says it finished: no command was left out by an early exit that still returned 0.
  expect(output).toContain(`=== README and guide: all ${ran + background} commands passed`);
});
