/**
 * "Use it from another project": @mnemo-memory/client as a user gets it. npm packs
 * clients/typescript (its prepack builds dist/ from src/client/), the tarball is installed into a
 * fresh project that has nothing else (offline: the package has no dependency), and there a
 * plain ES module imports it by its name, writes and reads a fact against the real API, and a
 * TypeScript file using it type-checks against the installed declarations alone (no @types/node,
 * no zod, no skipLibCheck), while a wrong call does not.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSUMER_COMPILER_OPTIONS } from '../../clients/typescript/build.ts';
import { startTestApi, type TestApi } from '../helpers/api.ts';
import { projectRoot } from '../../support/processes.ts';

const run = promisify(execFile);
const packageDir = join(projectRoot, 'clients/typescript');

const useIt = `
import { createClient, FactNotFoundError, isMnemoError } from '@mnemo-memory/client';

const client = createClient({ baseUrl: process.env.MNEMO_URL, token: process.env.MNEMO_TOKEN, timeoutMs: 5000 });
const written = await client.memory.facts.write({ type: 'acme.preference', content: { text: 'prefers email' }, scope: { projectId: 'p1' } });
const read = await client.memory.facts.read(written.id);
const missing = await client.memory.facts.read('01890000-0000-7000-8000-000000000000').catch((error) => error);
console.log(JSON.stringify({
  written,
  read,
  missing: { isFactNotFound: missing instanceof FactNotFoundError, narrowed: isMnemoError(missing, 'fact-not-found'), status: missing.status },
}));
`;

const typedUse = `
import { createClient, FactChangedError, isMnemoError, type Fact, type MnemoClient, type WriteFactInput } from '@mnemo-memory/client';

const client: MnemoClient = createClient({ baseUrl: 'http://localhost:8080', token: async () => 'jwt', maxRetries: 2, timeoutMs: 10_000 });
const input: WriteFactInput = { type: 'acme.note', content: { text: 'hi' }, subjects: [{ kind: 'user', id: 'u1' }] };

export async function use(signal: AbortSignal): Promise<number> {
  const fact: Fact = await client.memory.facts.write(input, { idempotencyKey: 'k-1', provenance: { type: 'session', id: 's-1' } });
  const page = await client.memory.facts.list({ types: ['acme.note'], limit: 10 }, { signal });
  const scope: string = fact.scope.tenantId;
  try {
    await client.memory.facts.supersede(fact.id, { content: 'x', expectVersion: 1 });
  } catch (error) {
    if (error instanceof FactChangedError) return error.currentVersion ?? 0;
    if (isMnemoError(error, 'rate-limited')) return error.retryAfter ?? 0;
  }
  return page.data.length + scope.length;
}
`;

const wrongUse = `
import { createClient } from '@mnemo-memory/client';

const client = createClient({ baseUrl: 'http://localhost:8080', token: 'jwt' });
export const refused = client.memory.facts.write({ type: 1, content: 'x' });
`;

describe('@mnemo-memory/client from another project', () => {
  let api: TestApi;
  let consumer: string;

  beforeAll(async () => {
    api = await startTestApi();
    consumer = await mkdtemp(join(tmpdir(), 'mnemo-client-user-'));
  });
  afterAll(async () => {
    await rm(consumer, { recursive: true, force: true });
    await api.close();
  });

  it('packs, installs offline into a fresh project, talks to the real API, and type-checks there', async () => {
    const started = Date.now();
    const { stdout: packed } = await run('npm', ['pack', '--json', '--pack-destination', consumer], { cwd: packageDir });
    const [tarball] = JSON.parse(packed.slice(packed.indexOf('['))) as { name: string; filename: string; size: number; files: { path: string }[] }[];
    expect(tarball!.name).toBe('@mnemo-memory/client');
    expect(tarball!.files.map((f) => f.path).sort()).toEqual(['README.md', 'dist/errors.d.ts', 'dist/index.d.ts', 'dist/index.js', 'package.json']);
    const packedMs = Date.now() - started;

    await writeFile(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(consumer, tarball!.filename)], { cwd: consumer });
    // Nothing else came with it: the package has no dependency.
    expect(await readdir(join(consumer, 'node_modules'))).toEqual(expect.arrayContaining(['@mnemo-memory']));
    expect((await readdir(join(consumer, 'node_modules'))).filter((name) => !name.startsWith('.'))).toEqual(['@mnemo-memory']);

    const { tenantId, admin } = await api.newTenant('client-package');
    await writeFile(join(consumer, 'use.mjs'), useIt);
    const { stdout } = await run(process.execPath, ['use.mjs'], { cwd: consumer, env: { ...process.env, MNEMO_URL: api.baseUrl, MNEMO_TOKEN: admin } });
    const result = JSON.parse(stdout);
    expect(result.written).toMatchObject({ version: 1, content: { text: 'prefers email' }, scope: { tenantId, projectId: 'p1' } });
    expect(result.read).toEqual(result.written);
    expect(result.missing).toEqual({ isFactNotFound: true, narrowed: true, status: 404 });

    await writeFile(join(consumer, 'use.ts'), typedUse);
    await writeFile(join(consumer, 'wrong.ts'), wrongUse);
    const program = ts.createProgram([join(consumer, 'use.ts'), join(consumer, 'wrong.ts')], CONSUMER_COMPILER_OPTIONS);
    const problems = ts.getPreEmitDiagnostics(program).map((d) => ({
      file: d.file?.fileName.slice(consumer.length + 1),
      message: ts.flattenDiagnosticMessageText(d.messageText, '\n'),
    }));
    // Only the wrong call: the installed declarations stand alone, and they are precise enough to refuse it.
    expect(problems).toEqual([{ file: 'wrong.ts', message: expect.stringContaining("Type 'number' is not assignable to type 'string'") }]);
    console.log(`packed in ${packedMs} ms (${tarball!.size} bytes); whole proof ${Date.now() - started} ms`);
  });
});
