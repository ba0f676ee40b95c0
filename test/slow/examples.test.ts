/**
 * The framework examples as their READMEs run them: the embedded default (`npm start` with no
 * settings: PGlite and in-process jobs, its own data directory here), a token minted with the CLI
 * for tenant `demo`, and each example in another process with MNEMO_URL and MNEMO_TOKEN — the
 * LangGraph graph, the AI SDK tools and the OpenAI Agents SDK (each with its scripted stand-in
 * model: no network). Each must exit 0 having recalled what it remembered, and the facts it wrote
 * must be in the service afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../support/ports.ts';
import { type RunningProcess, startNode, stopProcess } from '../../support/processes.ts';
import { eventually } from '../../support/wait.ts';
import { runProcess, startProcess } from '../helpers/process.ts';

const EXAMPLES = ['langgraph', 'ai-sdk', 'openai-agents'] as const;

describe('the framework examples against the embedded default', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mnemo-examples-'));
  const settings = { MNEMO_DATA_DIR: dataDir, HOME: dataDir };
  let api: RunningProcess;
  let url: string;
  let token: string;

  beforeAll(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    api = startProcess('src/server.ts', [], { ...settings, PORT: String(port) });
    await eventually(
      () => fetch(`${url}/readyz`).then((r) => r.ok, () => false),
      150_000,
      () => `not ready: ${api.stdout()} ${api.stderr()}`,
      200,
    );
    const minted = await runProcess('bin/mnemo.js', ['token', '--tenant', 'demo', '--sub', 'you', '--role', 'admin'], settings);
    expect(minted.code, minted.stderr).toBe(0);
    token = minted.stdout.trim();
  }, 180_000);

  afterAll(async () => {
    if (api) await stopProcess(api);
    rmSync(dataDir, { recursive: true, force: true });
  });

  for (const example of EXAMPLES) {
    it(`examples/${example} runs and recalls what it remembered`, async () => {
      const ran = startNode(['--import', 'tsx', `examples/${example}/index.ts`], { MNEMO_URL: url, MNEMO_TOKEN: token, HOME: dataDir });
      const code = await ran.exited;
      expect(code, `${ran.stdout()}\n${ran.stderr()}`).toBe(0);
      // Each checks what it recalled itself (and exits 1 otherwise); its last line says what.
      const lines = ran.stdout().trim().split('\n');
      expect(lines.at(-1), ran.stdout()).toMatch(/^recalled: \S/);
    });
  }

  it('left what the examples wrote in the service, under tenant demo', async () => {
    const response = await fetch(`${url}/v1/memory/facts?limit=100`, { headers: { authorization: `Bearer ${token}` } });
    const { data } = (await response.json()) as { data: { type: string; scope: { tenantId: string } }[] };
    expect(data.length).toBeGreaterThanOrEqual(EXAMPLES.length);
    expect(new Set(data.map((f) => f.scope.tenantId))).toEqual(new Set(['demo']));
  });
});
