/**
 * `mnemo erase`, run as operators run it (the real bin, as a child process) against the real API
 * with an in-process worker that runs erasures: a person's facts erased and the rest intact, a
 * legal hold that stops it and a resume once the hold is lifted, --no-wait, a member's token,
 * an unreachable URL, and command lines that cannot run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi, tokenFor } from '../helpers/api.ts';
import { freePort } from '../../support/ports.ts';
import { runProcess } from '../helpers/process.ts';
import { sleep } from '../../support/wait.ts';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

describe('mnemo erase', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi({ worker: true });
  });
  afterAll(() => api?.close());

  const mnemo = (args: string[], env: Record<string, string> = {}) => runProcess('bin/mnemo.js', ['erase', ...args], env);
  const erase = (token: string, ...args: string[]) => mnemo([...args, '--url', api.baseUrl, '--token', token]);
  const write = async (token: string, body: Record<string, unknown>) => {
    const response = await api.request('POST', '/v1/memory/facts', { token, body: { type: 'acme.note', content: { text: 'about end-9' }, ...body } });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return response.body as { id: string; content: unknown };
  };
  const status = async (token: string, id: string) => (await api.request('GET', `/v1/memory/facts/${id}`, { token })).status;

  it("erases a person's facts (by scope and by subjects) and leaves the rest", async () => {
    const { admin } = await api.newTenant('cli-erase');
    const byScope = await write(admin, { scope: { projectId: 'p1', participantId: 'end-9' } });
    const bySubject = await write(admin, { subjects: [{ kind: 'participant', id: 'end-9' }] });
    const other = await write(admin, { scope: { projectId: 'p1', participantId: 'end-8' }, content: { text: 'about end-8' } });

    const result = await erase(admin, '--subject', 'participant:end-9');
    expect(result.code, result.stderr).toBe(0);
    const [, id] = new RegExp(`^mnemo erase: erasure (${UUID}) of participant end-9 queued\\n`).exec(result.stderr) ?? [];
    expect(id, result.stderr).toBeDefined();
    expect(result.stdout).toBe(`erasure ${id} completed: erased 2 facts, 2 revisions, 0 vectors\n`);
    // Not a terminal: progress is plain lines (one per change of the counts), never a redrawn line.
    expect(result.stderr).not.toContain('\r');

    expect(await status(admin, byScope.id)).toBe(404);
    expect(await status(admin, bySubject.id)).toBe(404);
    const kept = await api.request('GET', `/v1/memory/facts/${other.id}`, { token: admin });
    expect(kept.status).toBe(200);
    expect(kept.body.content).toEqual({ text: 'about end-8' });

    // --resume of an erasure that has completed only says so.
    const again = await erase(admin, '--resume', id!);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe(`erasure ${id} had already completed: erased 2 facts, 2 revisions, 0 vectors\n`);
  });

  it('stops at a legal hold (exit 1, the fact ids and the resume command); --resume once the hold is lifted finishes it', async () => {
    const { admin } = await api.newTenant('cli-hold');
    const held = await write(admin, { scope: { projectId: 'p1', participantId: 'end-9' }, retention: { legalHold: true } });
    const free = await write(admin, { subjects: [{ kind: 'participant', id: 'end-9' }] });

    const failed = await erase(admin, '--subject', 'participant:end-9');
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stdout).toBe('');
    const [, id] = new RegExp(`mnemo erase: erasure (${UUID}) failed: legal-hold: 1 fact is under legal hold\\n`).exec(failed.stderr) ?? [];
    expect(id, failed.stderr).toBeDefined();
    expect(failed.stderr).toContain(`\n  ${held.id}\n`);
    expect(failed.stderr).toContain(`  mnemo erase --resume ${id} --url ${api.baseUrl} --token …\n`);
    // Nothing was erased: the hold is checked before the first fact.
    expect(await status(admin, free.id)).toBe(200);

    const lifted = await api.request('POST', `/v1/memory/facts/${held.id}/supersede`, {
      token: admin,
      body: { content: held.content, retention: { legalHold: false } },
    });
    expect(lifted.status, JSON.stringify(lifted.body)).toBe(200);

    // The token from MNEMO_TOKEN this time.
    const resumed = await mnemo(['--resume', id!, '--url', api.baseUrl], { MNEMO_TOKEN: admin });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain(`mnemo erase: erasure ${id} resumed\n`);
    // The held fact has two revisions (the write and the supersede that lifted the hold).
    expect(resumed.stdout).toBe(`erasure ${id} completed: erased 2 facts, 3 revisions, 0 vectors\n`);
    expect(await status(admin, held.id)).toBe(404);
    expect(await status(admin, free.id)).toBe(404);
  });

  it('--no-wait prints the erasure id and exits; the worker erases all the same', async () => {
    const { admin } = await api.newTenant('cli-nowait');
    const fact = await write(admin, { scope: { projectId: 'p1', threadId: 'th-1' } });
    const result = await erase(admin, '--conversation', 'th-1', '--no-wait');
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^${UUID}\\n$`));
    expect(result.stderr).toBe('');
    const id = result.stdout.trim();
    let erasure: { status: string; factsErased: number } | undefined;
    for (let i = 0; i < 200 && erasure?.status !== 'completed'; i++) {
      if (i > 0) await sleep(50);
      erasure = (await api.request('GET', `/v1/memory/erasures/${id}`, { token: admin })).body;
    }
    expect(erasure).toMatchObject({ status: 'completed', factsErased: 1 });
    expect(await status(admin, fact.id)).toBe(404);

    // One fact by id, followed to the end.
    const single = await write(admin, {});
    const one = await erase(admin, '--fact', single.id);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/completed: erased 1 fact, 1 revision, 0 vectors\n$/);
  });

  it('prints the API refusal as code: message and exits 1 (a member, an unknown fact, a bad token)', async () => {
    const { tenantId, admin } = await api.newTenant('cli-refused');
    const member = await tokenFor({ tid: tenantId, sub: 'm-1', role: 'member', projects: { read: ['p1'], write: ['p1'] } });
    const kept = await write(admin, { scope: { projectId: 'p1', participantId: 'end-9' } });

    const refused = await erase(member, '--subject', 'participant:end-9');
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(/^mnemo erase: permission-denied: .+ \[request [^\]]+\]\n$/);
    expect(await status(admin, kept.id)).toBe(200);

    const unknown = await erase(admin, '--fact', '0190a000-0000-7000-8000-000000000000');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^mnemo erase: fact-not-found: /);

    const badToken = await erase('not-a-token', '--subject', 'external:crm-1');
    expect(badToken.code).toBe(1);
    expect(badToken.stderr).toMatch(/^mnemo erase: unauthenticated: /);

    const missing = await erase(admin, '--resume', '0190a000-0000-7000-8000-000000000000');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^mnemo erase: not-found: /);
  });

  it('says in one line when the API cannot be reached, and exits 1', async () => {
    const port = await freePort();
    const result = await mnemo(['--subject', 'participant:end-9', '--url', `http://127.0.0.1:${port}`, '--token', 't']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`mnemo erase: cannot reach http://127.0.0.1:${port}: ECONNREFUSED\n`);
    expect(result.stdout).toBe('');
  });

  it('refuses a command line it cannot run with one line and exit code 2', async () => {
    const url = api.baseUrl;
    const cases: [string[], RegExp][] = [
      [['--url', url, '--token', 't'], /^mnemo erase: name what to erase: /],
      [['--subject', 'participant:a', '--conversation', 'th-1', '--url', url, '--token', 't'], /^mnemo erase: name only one thing to erase: /],
      [['--subject', 'participant:a', '--subject', 'external:b', '--url', url, '--token', 't'], /^mnemo erase: name only one thing to erase: /],
      [['--subject', 'nobody', '--url', url, '--token', 't'], /^mnemo erase: --subject must be kind:id with kind participant or external.*\(got "nobody"\)$/],
      [['--subject', 'user:u-1', '--url', url, '--token', 't'], /^mnemo erase: --subject must be kind:id/],
      [['--subject', 'participant:', '--url', url, '--token', 't'], /^mnemo erase: --subject must be kind:id/],
      [['--fact', 'not-a-uuid', '--url', url, '--token', 't'], /^mnemo erase: --fact must be a fact id/],
      [['--resume', '0190a000-0000-7000-8000-000000000000', '--fact', '0190a000-0000-7000-8000-000000000001', '--url', url, '--token', 't'], /^mnemo erase: --resume takes no target/],
      [['--resume', 'x', '--url', url, '--token', 't'], /^mnemo erase: --resume must be an erasure id/],
      [['--subject', 'participant:a', '--token', 't'], /^mnemo erase: --url is required/],
      [['--subject', 'participant:a', '--url', 'ftp://x', '--token', 't'], /^mnemo erase: --url must be an http\(s\) URL/],
      [['--subject', 'participant:a', '--url', url], /^mnemo erase: --token is required/],
      [['--subject', 'participant:a', '--url', url, '--token', 't', '--force'], /^mnemo erase: Unknown option '--force'/],
    ];
    const results = await Promise.all(cases.map(([args]) => mnemo(args)));
    cases.forEach(([args, message], i) => {
      const result = results[i]!;
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stderr.trimEnd(), args.join(' ')).toMatch(message);
      expect(result.stdout, args.join(' ')).toBe('');
    });
    // Thirteen processes side by side, each starting tsx.
  }, 90_000);

  it('is listed in mnemo help', async () => {
    const help = await runProcess('bin/mnemo.js', ['help'], {});
    expect(help.stdout).toMatch(/\n {2}erase {16}/);
    expect(help.stdout).toContain('--subject KIND:ID');
  });
});
