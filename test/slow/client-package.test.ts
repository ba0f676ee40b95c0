/**
 * "Use it from another project": @mnemo-memory/client as a user gets it. npm packs
 * clients/typescript (its prepack builds dist/ from src/client/), the tarball is installed into a
 * fresh project that has nothing else (offline: the package has no dependency), and there a
 * plain ES module imports it by its name, writes and reads a fact against the real API, and a
 * TypeScript file using it type-checks against the installed declarations alone (no @types/node,
 * no zod, no skipLibCheck), while a wrong call does not.
 *
 * Its adapters (`/langgraph`, `/ai-sdk`, `/openai-agents`) are subpaths whose frameworks are
 * optional peer dependencies: in that project, without the frameworks, importing one says in one
 * line what to install; a second project installs the tarball with the frameworks, and there each
 * adapter works against the real API and type-checks against its installed declarations.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTERS, CONSUMER_COMPILER_OPTIONS } from '../../clients/typescript/build.ts';
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

/** Each adapter's framework, as its one line names it, and the versions the repository tests with. */
const FRAMEWORK_OF: Record<(typeof ADAPTERS)[number], string> = { langgraph: '@langchain/langgraph-checkpoint', 'ai-sdk': 'ai', 'openai-agents': '@openai/agents' };
const devVersion = (name: string) => (JSON.parse(readFileSync(join(projectRoot, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
const FRAMEWORKS = ['@langchain/langgraph-checkpoint', '@langchain/core', 'ai', 'zod', '@openai/agents'];

const useAdapters = `
import { createClient } from '@mnemo-memory/client';
import { MnemoStore } from '@mnemo-memory/client/langgraph';
import { mnemoTools } from '@mnemo-memory/client/ai-sdk';
import { mnemoAgentTools } from '@mnemo-memory/client/openai-agents';

const client = createClient({ baseUrl: process.env.MNEMO_URL, token: process.env.MNEMO_TOKEN, timeoutMs: 5000 });
const store = new MnemoStore({ client });
await store.put(['users', 'u1'], 'diet', { text: 'vegetarian' });
const item = await store.get(['users', 'u1'], 'diet');
const tools = mnemoTools({ baseUrl: process.env.MNEMO_URL, token: process.env.MNEMO_TOKEN });
const agentTools = mnemoAgentTools({ baseUrl: process.env.MNEMO_URL, token: process.env.MNEMO_TOKEN });
console.log(JSON.stringify({
  item: item && { namespace: item.namespace, key: item.key, value: item.value },
  aiSdkTools: Object.keys(tools).sort(),
  agentTools: agentTools.map((t) => t.name).sort(),
}));
`;

const typedAdapters = `
import { createClient } from '@mnemo-memory/client';
import { MnemoStore } from '@mnemo-memory/client/langgraph';
import type { BaseStore, Item } from '@langchain/langgraph-checkpoint';

const store: BaseStore = new MnemoStore({ client: createClient({ baseUrl: 'http://localhost:8080', token: 'jwt' }) });
export const read = (): Promise<Item | null> => store.get(['users', 'u1'], 'diet');
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
    const adapterFiles = ADAPTERS.flatMap((adapter) => [`dist/${adapter}.d.ts`, `dist/${adapter}.js`]);
    expect(tarball!.files.map((f) => f.path).sort()).toEqual(['README.md', 'dist/errors.d.ts', 'dist/index.d.ts', 'dist/index.js', ...adapterFiles, 'package.json'].sort());
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

  it('each adapter without its framework: one line saying what to install', async () => {
    for (const adapter of ADAPTERS) {
      const failure = await run(process.execPath, ['--input-type=module', '-e', `await import('@mnemo-memory/client/${adapter}')`], { cwd: consumer }).then(
        () => undefined,
        (error: { code: number; stderr: string }) => error,
      );
      expect(failure?.code, adapter).toBe(1);
      const line = `@mnemo-memory/client/${adapter} needs ${FRAMEWORK_OF[adapter]}, which is not installed: npm install ${FRAMEWORK_OF[adapter]}`;
      expect(failure!.stderr, adapter).toContain(`Error: ${line}`);
    }
  });

  it('each adapter with its framework installed: works against the real API and type-checks', async () => {
    const withFrameworks = await mkdtemp(join(tmpdir(), 'mnemo-adapters-user-'));
    try {
      const [tarball] = (await readdir(consumer)).filter((name) => name.endsWith('.tgz'));
      await writeFile(join(withFrameworks, 'package.json'), JSON.stringify({ name: 'consumer-with-frameworks', private: true, type: 'module' }));
      // The frameworks come from npm's cache where the repository's install put them (the
      // registry for what they only optionally need): a user installs them from the registry.
      const frameworks = FRAMEWORKS.map((name) => `${name}@${devVersion(name)}`);
      await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(consumer, tarball!), ...frameworks], { cwd: withFrameworks });

      const { tenantId, admin } = await api.newTenant('client-adapters');
      await writeFile(join(withFrameworks, 'use.mjs'), useAdapters);
      const { stdout } = await run(process.execPath, ['use.mjs'], { cwd: withFrameworks, env: { ...process.env, MNEMO_URL: api.baseUrl, MNEMO_TOKEN: admin } });
      expect(JSON.parse(stdout)).toEqual({
        item: { namespace: ['users', 'u1'], key: 'diet', value: { text: 'vegetarian' } },
        aiSdkTools: ['recall', 'remember'],
        agentTools: ['recall', 'remember'],
      });
      // What the store wrote is a fact of the tenant, as any client reads it.
      const facts = await api.request('GET', '/v1/memory/facts', { token: admin });
      expect(facts.body.data.map((f: { scope: { tenantId: string } }) => f.scope.tenantId)).toEqual([tenantId]);

      await writeFile(join(withFrameworks, 'typed.ts'), typedAdapters);
      const program = ts.createProgram([join(withFrameworks, 'typed.ts')], CONSUMER_COMPILER_OPTIONS);
      // The user's file and our declarations; a framework's own declarations may want a newer
      // lib than ES2022 (LangGraph's name Symbol.asyncDispose), which is theirs to say.
      const ours = (d: ts.Diagnostic) => !d.file || d.file.fileName.endsWith('/typed.ts') || d.file.fileName.includes('/node_modules/@mnemo-memory/');
      expect(ts.getPreEmitDiagnostics(program).filter(ours).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([]);
    } finally {
      await rm(withFrameworks, { recursive: true, force: true });
    }
  });
});
