/**
 * The MCP server at POST /mcp (DESIGN §6, §7), driven by the SDK's own client over HTTP against
 * the real app: the tool list, KiwiFS's own MCP report cases, the report's prefix and paging,
 * who sees what, and the HTTP edges (token, method, body size, JWKS down).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { generateKeyPair, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { createApp } from '../../src/app.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { AppError } from '../../src/foundation/app-error.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { runTool, type ToolContext } from '../../src/mcp/tool.ts';
import { tokenFor } from '../helpers/api.ts';
import { mcpTestApi } from '../helpers/mcp.ts';
import { kiwifsCases } from '../helpers/fixtures.ts';

const TOOL = 'kiwi_memory_report';

interface KiwiCase {
  name: string;
  files: Record<string, string>;
  expect: { unmerged_count?: number };
  asserts_verbatim: string[];
}

const kiwiCases = kiwifsCases<KiwiCase[]>('kiwifs-report-cases.json');
const kiwiCase = (name: string) => {
  const found = kiwiCases.find((c) => c.name === name);
  if (!found) throw new Error(`no KiwiFS case ${name}`);
  return found;
};

/** A markdown file with YAML frontmatter, as the facts API takes it (KiwiFS's fields by their Mnemo names). */
function factOfFile(path: string, markdown: string) {
  const match = /^---\n([\s\S]*?)\n---\n([\s\S]*)$/.exec(markdown);
  const front = (match ? parseYaml(match[1]!) : {}) as Record<string, unknown>;
  return {
    type: 'kiwi.page',
    path,
    content: { text: match ? match[2]! : markdown },
    ...(front.memory_kind !== undefined ? { memoryKind: front.memory_kind } : {}),
    ...(front.episode_id !== undefined ? { episodeId: front.episode_id } : {}),
    ...(front['merged-from'] !== undefined ? { mergedFrom: front['merged-from'] } : {}),
  };
}

interface Report {
  episodic_count: number;
  merged_from_refs: number;
  unmerged_count: number;
  episodic_files: { path: string; episode_id?: string; memory_kind?: string; fact_id?: string }[];
  unmerged: { path: string; episode_id?: string; memory_kind?: string; fact_id?: string }[];
}

const texts = (result: CallToolResult) => result.content.flatMap((item) => (item.type === 'text' ? [item.text] : []));

describe('MCP server (POST /mcp)', () => {
  const app = mcpTestApi();
  /** The SDK's client, connected to the app with this bearer token. */
  const connect = (token: string): Promise<Client> => app.connect(token);

  async function report(client: Client, args: Record<string, unknown> = {}) {
    const result = (await client.callTool({ name: TOOL, arguments: args })) as CallToolResult;
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    const [summary, json] = texts(result);
    // The JSON text is the structured report, word for word.
    expect(JSON.parse(json!)).toEqual(result.structuredContent);
    return { report: result.structuredContent as unknown as Report, summary: summary! };
  }

  async function write(token: string, body: Record<string, unknown>): Promise<string> {
    const response = await app.api().request('POST', '/v1/memory/facts', { token, body });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return response.body.id;
  }

  it('lists kiwi_memory_report with its input schema, every field described', async () => {
    const { admin } = await app.api().newTenant('mcp-list');
    const client = await connect(admin);
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === TOOL);
    expect(tool).toBeDefined();
    expect(tool!.description).toMatch(/episode/i);
    expect(tool!.annotations).toMatchObject({ readOnlyHint: true });
    const schema = tool!.inputSchema as { type: string; properties: Record<string, Record<string, unknown>>; required?: string[] };
    expect(schema.type).toBe('object');
    expect(Object.keys(schema.properties).sort()).toEqual(['episodes_prefix', 'limit', 'offset']);
    expect(schema.required ?? []).toEqual([]);
    expect(schema.properties.episodes_prefix).toMatchObject({ type: 'string' });
    expect(schema.properties.limit).toMatchObject({ type: 'integer', minimum: 0 });
    expect(schema.properties.offset).toMatchObject({ type: 'integer', minimum: 0 });
    for (const [field, property] of Object.entries(schema.properties)) {
      expect(typeof property.description, field).toBe('string');
      expect((property.description as string).length, field).toBeGreaterThan(20);
    }
    expect(tool!.outputSchema).toMatchObject({ type: 'object', properties: { unmerged_count: { type: 'integer' } } });
  });

  it('passes KiwiFS TestMCP_KiwiMemoryReport/before-merge, then /after-merge', async () => {
    const { admin } = await app.api().newTenant('mcp-kiwi');
    const client = await connect(admin);
    const written = new Set<string>();

    for (const name of ['TestMCP_KiwiMemoryReport/before-merge', 'TestMCP_KiwiMemoryReport/after-merge']) {
      const testCase = kiwiCase(name);
      for (const [path, markdown] of Object.entries(testCase.files)) {
        if (written.has(path)) continue;
        await write(admin, factOfFile(path, markdown));
        written.add(path);
      }
      const { report: rep, summary } = await report(client);
      expect(rep.unmerged_count, name).toBe(testCase.expect.unmerged_count);
      expect(rep.unmerged, name).toHaveLength(testCase.expect.unmerged_count!);
      for (const assertion of testCase.asserts_verbatim) {
        const wanted = /^tool text contains "(.*)"$/.exec(assertion)?.[1];
        expect(wanted, assertion).toBeDefined();
        expect(summary, name).toContain(wanted);
      }
      expect(rep.episodic_count, name).toBe(1);
      expect(rep.episodic_files.map((f) => [f.path, f.episode_id]), name).toEqual([['episodes/run.md', 'mcp-ep-1']]);
    }
  });

  it('honours episodes_prefix, with or without its trailing slash', async () => {
    const { admin } = await app.api().newTenant('mcp-prefix');
    await write(admin, { type: 'kiwi.page', path: 'episodes/x.md', content: { text: 'x' } });
    await write(admin, { type: 'kiwi.page', path: 'raw/z.md', content: { text: 'z' } });
    await write(admin, { type: 'kiwi.page', path: 'elsewhere/e.md', memoryKind: 'episodic', episodeId: 'ep-anywhere', content: { text: 'e' } });
    const client = await connect(admin);

    const byDefault = (await report(client)).report;
    expect(byDefault.episodic_files.map((f) => f.path)).toEqual(['elsewhere/e.md', 'episodes/x.md']);
    for (const prefix of ['raw', 'raw/']) {
      const raw = (await report(client, { episodes_prefix: prefix })).report;
      expect(raw.episodic_files.map((f) => f.path), prefix).toEqual(['elsewhere/e.md', 'raw/z.md']);
      expect(raw.episodic_count, prefix).toBe(2);
    }
  });

  it('cuts the lists with limit and offset, never the counts', async () => {
    const { admin } = await app.api().newTenant('mcp-page');
    for (const name of ['a', 'b', 'c', 'd']) {
      await write(admin, { type: 'kiwi.page', path: `episodes/${name}.md`, memoryKind: 'episodic', episodeId: `ep-${name}`, content: { text: name } });
    }
    await write(admin, {
      type: 'kiwi.page',
      path: 'concepts/sum.md',
      memoryKind: 'semantic',
      mergedFrom: [{ type: 'episode', id: 'ep-a' }],
      content: { text: 'summary of a' },
    });
    const client = await connect(admin);

    const whole = (await report(client)).report;
    expect(whole).toMatchObject({ episodic_count: 4, unmerged_count: 3, merged_from_refs: 1 });
    expect(whole.unmerged.map((f) => f.episode_id)).toEqual(['ep-b', 'ep-c', 'ep-d']);

    const { report: page, summary } = await report(client, { limit: 1, offset: 1 });
    expect(page).toMatchObject({ episodic_count: 4, unmerged_count: 3, merged_from_refs: 1 });
    expect(page.episodic_files.map((f) => f.episode_id)).toEqual(['ep-b']);
    expect(page.unmerged.map((f) => f.episode_id)).toEqual(['ep-c']);
    expect(summary).toContain('Unmerged (no merged-from): 3');
    expect(summary).toContain('Showing unmerged:          1 (offset 1)');
    expect(summary).toContain('  - episodes/c.md  episode_id=ep-c');
    expect(summary).not.toContain('ep-b');

    const countsOnly = (await report(client, { limit: 0 })).report;
    expect(countsOnly).toMatchObject({ episodic_count: 4, unmerged_count: 3, episodic_files: [], unmerged: [] });

    const pastTheEnd = (await report(client, { offset: 10 })).report;
    expect(pastTheEnd).toMatchObject({ episodic_count: 4, unmerged_count: 3, episodic_files: [], unmerged: [] });
  });

  it('counts only what the caller may read: a p1 reader never sees an episode or a merge in p2', async () => {
    const { tenantId, admin } = await app.api().newTenant('mcp-vis');
    await write(admin, { type: 'kiwi.page', path: 'episodes/p1.md', memoryKind: 'episodic', episodeId: 'ep-p1', scope: { projectId: 'p1' }, content: { text: 'p1' } });
    await write(admin, { type: 'kiwi.page', path: 'episodes/p2.md', memoryKind: 'episodic', episodeId: 'ep-p2', scope: { projectId: 'p2' }, content: { text: 'p2' } });
    // A consolidation in p2 that covers p1's episode: the p1 reader must not see it cover anything.
    await write(admin, {
      type: 'kiwi.page',
      path: 'concepts/p2.md',
      memoryKind: 'semantic',
      mergedFrom: [{ type: 'episode', id: 'ep-p1' }],
      scope: { projectId: 'p2' },
      content: { text: 'p2 summary' },
    });

    const asAdmin = (await report(await connect(admin))).report;
    expect(asAdmin).toMatchObject({ episodic_count: 2, merged_from_refs: 1, unmerged_count: 1 });
    expect(asAdmin.unmerged.map((f) => f.episode_id)).toEqual(['ep-p2']);

    const member = await tokenFor({ tid: tenantId, sub: 'm-1', role: 'member', projects: { read: ['p1'] } });
    const asMember = await report(await connect(member));
    expect(asMember.report).toMatchObject({ episodic_count: 1, merged_from_refs: 0, unmerged_count: 1 });
    expect(asMember.report.episodic_files.map((f) => f.episode_id)).toEqual(['ep-p1']);
    expect(asMember.report.unmerged.map((f) => f.episode_id)).toEqual(['ep-p1']);
    expect(JSON.stringify(asMember.report)).not.toContain('p2');
    expect(asMember.summary).not.toContain('p2');

    const stranger = await app.api().newTenant('mcp-vis-other');
    const asStranger = (await report(await connect(stranger.admin))).report;
    expect(asStranger).toMatchObject({ episodic_count: 0, merged_from_refs: 0, unmerged_count: 0, episodic_files: [], unmerged: [] });
  });

  it.each([
    ['a negative limit', { limit: -1 }, 'limit'],
    ['a negative offset', { offset: -3 }, 'offset'],
    ['a fractional limit', { limit: 1.5 }, 'limit'],
    ['a string offset', { offset: 'ten' }, 'offset'],
    ['a numeric prefix', { episodes_prefix: 7 }, 'episodes_prefix'],
    // PostgreSQL cannot compare text holding U+0000: refused as input, never an internal error.
    ['a NUL in the prefix', { episodes_prefix: 'episodes/\u0000' }, 'episodes_prefix'],
  ])('answers %s with a tool error result, and the server keeps serving', async (_label, args, field) => {
    const { admin } = await app.api().newTenant('mcp-bad');
    const client = await connect(admin);
    const result = (await client.callTool({ name: TOOL, arguments: args })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toBeUndefined();
    expect(texts(result).join('\n')).toMatch(/Input validation error/);
    expect(texts(result).join('\n')).toContain(field);
    // The same client, the next call: nothing crashed.
    expect((await report(client)).report).toMatchObject({ episodic_count: 0 });
  });

  it('answers an unknown tool with an error, not a 500', async () => {
    const { admin } = await app.api().newTenant('mcp-unknown');
    const client = await connect(admin);
    const result = (await client.callTool({ name: 'no_such_tool', arguments: {} })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(texts(result).join('\n')).toContain('no_such_tool');
  });

  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
  };
  const mcpHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

  it('refuses a request without a token: 401 envelope with WWW-Authenticate: Bearer', async () => {
    const response = await app.api().request('POST', '/mcp', { body: initialize, headers: mcpHeaders });
    expect(response.status).toBe(401);
    expect(response.body).toEqual({
      error: { code: 'unauthenticated', message: 'Missing Authorization: Bearer token', requestId: response.headers.get('x-request-id') },
    });
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="mnemo"');

    // The SDK's client fails to connect, with the status.
    const client = new Client({ name: 'mnemo-test', version: '0.0.0' });
    await expect(client.connect(new StreamableHTTPClientTransport(new URL('/mcp', app.api().baseUrl)))).rejects.toMatchObject({ code: 401 });
  });

  it('refuses a bad or foreign-signed token with 401 invalid_token', async () => {
    const { tenantId } = await app.api().newTenant('mcp-bad-token');
    const foreign = await tokenFor({ tid: tenantId }, { secret: 'another-secret-that-is-also-32-bytes-or-more!' });
    for (const token of ['garbage', foreign]) {
      const response = await app.api().request('POST', '/mcp', { token, body: initialize, headers: mcpHeaders });
      expect(response.status).toBe(401);
      expect(response.body.error.code).toBe('unauthenticated');
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="mnemo", error="invalid_token"');
    }
  });

  it('answers GET and DELETE with 405 and the envelope: no SSE stream, no sessions', async () => {
    const { admin } = await app.api().newTenant('mcp-405');
    for (const method of ['GET', 'DELETE']) {
      for (const token of [admin, undefined]) {
        const response = await app.api().request(method, '/mcp', { token, headers: { accept: 'text/event-stream' } });
        expect(response.status, method).toBe(405);
        expect(response.headers.get('allow'), method).toBe('POST');
        expect(response.body.error, method).toMatchObject({ code: 'bad-input', requestId: response.headers.get('x-request-id') });
        expect(response.body.error.message, method).toContain('stateless');
      }
    }
  });

  it('issues no session id, and answers a bare tools/call with no initialize (stateless)', async () => {
    const { admin } = await app.api().newTenant('mcp-stateless');
    const init = await app.api().request('POST', '/mcp', { token: admin, body: initialize, headers: mcpHeaders });
    expect(init.status).toBe(200);
    expect(init.headers.get('mcp-session-id')).toBeNull();
    expect(init.headers.get('x-request-id')).toBeTruthy();
    expect(init.body.result.serverInfo).toMatchObject({ name: 'mnemo' });

    const call = await app.api().request('POST', '/mcp', {
      token: admin,
      headers: { ...mcpHeaders, 'mcp-protocol-version': '2025-06-18' },
      body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: TOOL, arguments: {} } },
    });
    expect(call.status).toBe(200);
    expect(call.body.result.structuredContent).toMatchObject({ episodic_count: 0, unmerged_count: 0 });
  });

  it('refuses a body over 1 MiB with 413 payload-too-large', async () => {
    const { admin } = await app.api().newTenant('mcp-413');
    const big = { ...initialize, params: { ...initialize.params, padding: 'x'.repeat(1024 * 1024) } };
    const response = await app.api().request('POST', '/mcp', { token: admin, body: big, headers: mcpHeaders });
    expect(response.status).toBe(413);
    expect(response.body.error.code).toBe('payload-too-large');
  });

  describe('a tool that throws', () => {
    const logged: string[] = [];
    const context = (): ToolContext => ({
      db: app.api().db.app.db,
      read: (run) => run(app.api().db.app.db),
      principal: { tenantId: 't', sub: 'u', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } },
      logger: createLogger('info', {}, (line) => logged.push(line)),
      requestId: 'req-42',
      afterWrite: async () => {},
    });

    it('answers a domain error as a tool error carrying the envelope', async () => {
      const result = await runTool(context(), 'some_tool', async () => {
        throw new AppError('permission-denied', 'You may not write to project p9');
      });
      expect(result.isError).toBe(true);
      expect(JSON.parse(texts(result)[0]!)).toEqual({
        error: { code: 'permission-denied', message: 'You may not write to project p9', requestId: 'req-42' },
      });
    });

    it('answers an unknown error as internal, logged, without its message', async () => {
      const result = await runTool(context(), 'some_tool', async () => {
        throw new Error('connection to 10.0.0.7 refused: password authentication failed');
      });
      expect(result.isError).toBe(true);
      expect(JSON.parse(texts(result)[0]!)).toEqual({
        error: { code: 'internal', message: 'Internal error; quote request id req-42', requestId: 'req-42' },
      });
      expect(texts(result).join('')).not.toContain('10.0.0.7');
      const entry = logged.map((line) => JSON.parse(line)).find((line) => line.requestId === 'req-42' && line.level === 'error');
      expect(entry).toMatchObject({ tool: 'some_tool' });
      expect(JSON.stringify(entry)).toContain('password authentication failed');
    });
  });

  it("answers 503 unavailable when the issuer's keys cannot be fetched", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const keysDown = createApp({
      logger: createLogger('error', {}, () => {}),
      readiness: { accepting: () => true, checks: {} },
      db: app.api().db.app.db,
      verifyToken: createTokenVerifier({ jwtSecret: undefined, jwksUrl: `http://127.0.0.1:${port}/jwks`, issuer: undefined, audience: undefined }),
    });
    const { privateKey } = await generateKeyPair('ES256');
    const token = await new SignJWT({ sub: 'u', tid: 't', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } })
      .setProtectedHeader({ alg: 'ES256' })
      .setExpirationTime('5m')
      .sign(privateKey);
    const response = await keysDown.request('/mcp', {
      method: 'POST',
      headers: { ...mcpHeaders, authorization: `Bearer ${token}` },
      body: JSON.stringify(initialize),
    });
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('unavailable');
    expect(response.headers.get('www-authenticate')).toBeNull();
  });
});
