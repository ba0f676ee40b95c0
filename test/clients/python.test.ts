/**
 * The Python client (clients/python): its unittest suite, run by python3 against the real API
 * (src/server.ts as a process, over this file's own database and the run's Redis). The suite reads
 * the server and its tokens from the environment (clients/python/tests/support.py says which);
 * here every variable is set, so no test may skip.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenFor } from '../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type Deployment, startDeployment } from '../helpers/deployment.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { projectRoot } from '../../support/processes.ts';

const SUITE = 'clients/python/tests';
const MODULES = ['test_client', 'test_errors', 'test_retries', 'test_units'];

function runPython(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    // Only what the suite needs: no developer's MNEMO_* leaks in, and no __pycache__ is left in the tree.
    const child = spawn('python3', args, { cwd: projectRoot, env: { PATH: process.env.PATH, PYTHONDONTWRITEBYTECODE: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('Python client', () => {
  let db: TestDatabase;
  let deployment: Deployment;

  beforeAll(async () => {
    db = await createTestDatabase();
    // No worker: an erasure the suite requests stays pending, so the writes naming its person
    // answer 409 erasure-in-progress for as long as the suite runs.
    deployment = await startDeployment({
      db,
      // The rate-limit test's caller (a tenant of its own) meets the reports limit within a few
      // calls; every other caller makes fewer than 5 reports.
      env: { MNEMO_RATE_LIMIT_REPORTS: '5/1000' },
    });
  });
  afterAll(async () => {
    await deployment?.close();
    await db?.drop();
  });

  it('python3 is 3.9 or newer', async () => {
    const { code, output } = await runPython(['-c', 'import sys; print(sys.version); sys.exit(sys.version_info < (3, 9))'], {});
    expect(code, `python3 ${output}`).toBe(0);
  });

  it('passes its unittest suite against the real server', async () => {
    const tenant = uniqueTenant('py-client');
    const env = {
      MNEMO_URL: deployment.apiUrl,
      MNEMO_TOKEN_ADMIN: await tokenFor({ tid: tenant, sub: 'admin-1', role: 'admin' }),
      MNEMO_TOKEN_MEMBER: await tokenFor({ tid: tenant, sub: 'member-1', role: 'member' }),
      MNEMO_TOKEN_OTHER_TENANT: await tokenFor({ tid: uniqueTenant('py-other'), sub: 'admin-1', role: 'admin' }),
      MNEMO_TOKEN_RATE_LIMITED: await tokenFor({ tid: uniqueTenant('py-limited'), sub: 'limited-1', role: 'admin' }),
    };
    const { code, output } = await runPython(['-m', 'unittest', 'discover', '-s', SUITE, '-v'], env);
    if (code !== 0) console.log(output);
    expect(code, output).toBe(0);
    const ran = Number(/^Ran (\d+) tests? in /m.exec(output)?.[1] ?? 0);
    expect(ran, output).toBeGreaterThan(0);
    for (const module of MODULES) expect(output, `no tests of ${module} ran`).toContain(`(${module}.`);
    // Every variable is set and the server is this repository's: a skip means a test did not run.
    expect(output, output).not.toMatch(/skipped/);
  });
});
