/**
 * The API's own description, `/openapi.json`, held to what a client generator and a reader need:
 * - every operation has a camelCase `operationId`, unique, and stable: the table below is the
 *   contract, since renaming one renames a method of every generated client;
 * - every route behind the bearer token documents the errors any such route can give (400, 401,
 *   429, 500, 503), 413 only when it takes a body, 404 when it takes an id; the health probes and
 *   `/mcp` are described with their own answers;
 * - a standard generator (openapi-typescript) turns the document into types that a typed call
 *   compiles against, and that a wrong call does not;
 * - `/docs` is Swagger UI's page over `/openapi.json`, its script and stylesheet served by this
 *   server (no CDN) and allowed by the page's Content-Security-Policy, which allows nothing else.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApi, startTestApi } from '../helpers/api.ts';

interface Operation {
  operationId?: string;
  security?: unknown[];
  requestBody?: unknown;
  parameters?: { in: string; name: string }[];
  responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, { schema?: { $ref?: string } }> }>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
}

const OPERATION_IDS: Record<string, string> = {
  'GET /healthz': 'getHealth',
  'GET /readyz': 'getReadiness',
  'POST /v1/memory/facts': 'writeFact',
  'GET /v1/memory/facts': 'listFacts',
  'POST /v1/memory/facts:batch': 'writeFacts',
  'GET /v1/memory/facts/{id}': 'readFact',
  'DELETE /v1/memory/facts/{id}': 'deleteFact',
  'POST /v1/memory/facts/{id}/supersede': 'supersedeFact',
  'POST /v1/memory/facts/{id}/verify': 'verifyFact',
  'GET /v1/memory/facts/{id}/revisions': 'listFactRevisions',
  'POST /v1/memory/retrieve': 'retrieve',
  'POST /v1/memory/context': 'buildContext',
  'GET /v1/memory/embeddings': 'getEmbeddingStatus',
  'GET /v1/memory/report': 'getMemoryReport',
  'GET /api/kiwi/memory/report': 'getKiwiMemoryReport',
  'POST /v1/memory/reports': 'startReport',
  'GET /v1/memory/reports': 'listReports',
  'GET /v1/memory/reports/{id}': 'getReport',
  'GET /v1/memory/reports/schedule': 'getReportSchedule',
  'PUT /v1/memory/reports/schedule': 'putReportSchedule',
  'DELETE /v1/memory/reports/schedule': 'deleteReportSchedule',
  'POST /v1/memory/erasures': 'startErasure',
  'GET /v1/memory/erasures': 'listErasures',
  'GET /v1/memory/erasures/{id}': 'getErasure',
  'POST /v1/memory/erasures/{id}/resume': 'resumeErasure',
  'POST /mcp': 'callMcp',
  'GET /mcp': 'openMcpStream',
  'DELETE /mcp': 'endMcpSession',
};

const operationsOf = (doc: Document) =>
  Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, path, op })));

/**
 * Type-checks `files` (name → source) with the TypeScript compiler, strict, as a client project
 * would: the diagnostics, each as `file:line: message`.
 */
function typeCheck(dir: string, files: string[]): string[] {
  const program = ts.createProgram(
    files.map((file) => join(dir, file)),
    {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      allowImportingTsExtensions: true,
      lib: ['lib.es2022.d.ts'],
      types: [],
    },
  );
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? `${d.file.fileName.slice(dir.length + 1)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '(program)';
    return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

describe('the API description: /openapi.json and /docs', () => {
  let api: TestApi;
  let doc: Document;

  beforeAll(async () => {
    api = await startTestApi();
    const response = await api.request('GET', '/openapi.json');
    expect(response.status).toBe(200);
    doc = response.body as Document;
  });
  afterAll(() => api?.close());

  it('names every operation with a unique, camelCase operationId: the ones clients were generated with', () => {
    const ids = operationsOf(doc).map(({ key, op }) => [key, op.operationId]);
    expect(Object.fromEntries(ids)).toEqual(OPERATION_IDS);
    const names = ids.map(([, id]) => id);
    expect(names.filter((id) => !/^[a-z][a-zA-Z0-9]*$/.test(id ?? ''))).toEqual([]);
    expect(new Set(names).size).toBe(names.length);
  });

  it('documents on every route behind the token the errors any such route can give, and 413 and 404 where they apply', () => {
    const problems: string[] = [];
    for (const { key, path, op } of operationsOf(doc)) {
      if (!op.security) continue;
      expect(op.security, key).toEqual([{ bearer: [] }]);
      const statuses = Object.keys(op.responses);
      for (const status of ['400', '401', '429', '500', '503']) if (!statuses.includes(status)) problems.push(`${key}: no ${status}`);
      if (statuses.includes('413') !== (op.requestBody !== undefined)) problems.push(`${key}: 413 ${statuses.includes('413') ? 'without' : 'missing with'} a body`);
      if (path.includes('{') && !statuses.includes('404')) problems.push(`${key}: takes an id, no 404`);
      for (const status of ['429', '503']) if (!op.responses[status]?.headers?.['Retry-After']) problems.push(`${key}: ${status} without Retry-After`);
      // The error envelope, except the JSON-RPC errors of the MCP transport.
      for (const [status, response] of Object.entries(op.responses)) {
        const schema = response.content?.['application/json']?.schema?.$ref;
        if (Number(status) >= 400 && schema !== '#/components/schemas/Error' && !(path === '/mcp' && schema === '#/components/schemas/JsonRpcResponse')) {
          problems.push(`${key}: ${status} is ${schema}`);
        }
      }
    }
    expect(problems).toEqual([]);
    // Every /v1 route is behind the token: the loop above saw them.
    expect(operationsOf(doc).filter(({ path, op }) => path.startsWith('/v1/') && !op.security)).toEqual([]);
  });

  it('describes the health probes, without a token, and POST /mcp with its bearer challenge', () => {
    const healthz = doc.paths['/healthz']!.get!;
    const readyz = doc.paths['/readyz']!.get!;
    expect([healthz.security, readyz.security]).toEqual([undefined, undefined]);
    expect(Object.keys(healthz.responses)).toEqual(['200']);
    expect(Object.keys(readyz.responses)).toEqual(['200', '503']);
    const schemas = (doc as unknown as { components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> } }).components.schemas;
    expect(schemas.Readiness!.required).toEqual(['status', 'checks']);
    expect(JSON.stringify(schemas.NotReady)).toContain('checks');

    const mcp = doc.paths['/mcp']!;
    expect(mcp.post!.security).toEqual([{ bearer: [] }]);
    expect(mcp.post!.responses['401']!.headers).toHaveProperty('WWW-Authenticate');
    expect(Object.keys(mcp.post!.responses)).toEqual(expect.arrayContaining(['200', '401', '413', '429']));
    for (const tool of ['kindgi_remember', 'memory_retrieve', 'kiwi_memory_report']) expect(JSON.stringify(mcp.post), tool).toContain(tool);
    expect([Object.keys(mcp.get!.responses), Object.keys(mcp.delete!.responses)]).toEqual([['405'], ['405']]);
    // /metrics stays out: Prometheus' text, for scrapers, not for API clients.
    expect(doc.paths).not.toHaveProperty('/metrics');
  });

  it('generates a client with openapi-typescript that a typed call compiles against, and a wrong call does not', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mnemo-openapi-'));
    try {
      // The document as a client fetches it, not the object the server built.
      await writeFile(join(dir, 'api.ts'), astToString(await openapiTS(JSON.stringify(doc), { silent: true })));
      const call = `
        import type { components, operations, paths } from './api.ts';
        type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : never;
        declare function send(method: string, path: string, body?: unknown): Promise<unknown>;

        type Write = paths['/v1/memory/facts']['post'];
        export async function writeFact(body: JsonOf<Write['requestBody']>): Promise<JsonOf<Write['responses'][201]>> {
          return (await send('POST', '/v1/memory/facts', body)) as JsonOf<Write['responses'][201]>;
        }
        export type ReadParams = operations['readFact']['parameters']['path'];
        export type Conflict = JsonOf<operations['supersedeFact']['responses'][409]>;
        export type Ready = JsonOf<operations['getReadiness']['responses'][200]>;
      `;
      await writeFile(join(dir, 'client.ts'), call);
      await writeFile(
        join(dir, 'good.ts'),
        `
        import { writeFact, type Conflict, type ReadParams, type Ready } from './client.ts';
        import type { components } from './api.ts';
        export async function use(conflict: Conflict, ready: Ready) {
          const fact = await writeFact({ type: 'acme.note', content: { text: 'Prefers email.' }, scope: { projectId: 'p1' }, trust: 'asserted' });
          const version: number = fact.version;
          const id: ReadParams = { id: fact.id };
          const code: components['schemas']['Error']['error']['code'] = conflict.error.code;
          const postgres: 'ok' | 'degraded' | 'down' | undefined = ready.checks.postgres;
          return [version, id, code, postgres];
        }
        `,
      );
      // Each line is wrong in its own way; each must be refused on its own line.
      await writeFile(
        join(dir, 'bad.ts'),
        [
          "import { writeFact } from './client.ts';",
          'export async function use() {',
          "  await writeFact({ type: 42, content: 'x' });",
          "  await writeFact({ type: 'acme.note', content: 'x', trust: 'certain' });",
          "  await writeFact({ type: 'acme.note', content: 'x', scope: { colour: 'blue' } });",
          "  const version: string = (await writeFact({ type: 'acme.note', content: 'x' })).version;",
          '  return version;',
          '}',
        ].join('\n'),
      );
      // One program for both: the compiler's start-up is most of the time.
      const diagnostics = typeCheck(dir, ['good.ts', 'bad.ts']);
      expect(diagnostics.filter((d) => !d.startsWith('bad.ts:'))).toEqual([]);
      expect(diagnostics.map((d) => d.split(':').slice(0, 2).join(':'))).toEqual(['bad.ts:3', 'bad.ts:4', 'bad.ts:5', 'bad.ts:6']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('serves Swagger UI over /openapi.json without a token, its files from this server, allowed by its CSP and nothing else', async () => {
    const page = await fetch(`${api.baseUrl}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('SwaggerUIBundle(');
    expect(html).toMatch(/"url":\s*"\/openapi\.json"/);
    // The validator badge would send the document's URL to validator.swagger.io.
    expect(html).toMatch(/"validatorUrl":\s*null/);
    // Nothing from elsewhere: no CDN, no fonts.
    expect(html).not.toMatch(/https?:\/\/|\/\/[a-z]/i);

    const script = html.match(/<script src="([^"]+)"/)?.[1];
    const style = html.match(/<link rel="stylesheet" href="([^"]+)"/)?.[1];
    expect(script).toMatch(/^\/docs\/swagger-ui-bundle\.js\?v=[\w-]{16}$/);
    expect(style).toMatch(/^\/docs\/swagger-ui\.css\?v=[\w-]{16}$/);
    for (const [src, contentType, content] of [
      [script, /^text\/javascript/, 'SwaggerUIBundle'],
      [style, /^text\/css/, '.swagger-ui'],
    ] as const) {
      const asset = await fetch(`${api.baseUrl}${src}`);
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-type')).toMatch(contentType);
      expect(asset.headers.get('content-encoding')).toBe('gzip');
      expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(await asset.text()).toContain(content);
    }

    const csp = page.headers.get('content-security-policy') ?? '';
    const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...sources]) => [name!, sources.join(' ')]));
    const inline = [...html.matchAll(/<script(?![^>]*\ssrc=)[^>]*>([\s\S]*?)<\/script>/g)].map(([, body]) => body!);
    expect(inline).toHaveLength(1);
    expect(directives.get('default-src')).toBe("'none'");
    expect(directives.get('script-src')).toBe(`'self' 'sha256-${createHash('sha256').update(inline[0]!).digest('base64')}'`);
    expect(directives.get('style-src')).toBe("'self'");
    expect(directives.get('connect-src')).toBe("'self'");
    expect(csp).not.toMatch(/https?:|\*/);
  });
});
