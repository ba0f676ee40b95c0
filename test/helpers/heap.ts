import { getHeapSpaceStatistics, queryObjects, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { z } from 'zod';
import { createApp } from '../../src/app.ts';
import { createTokenVerifier } from '../../src/auth/verify.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { TEST_SECRET, tokenFor } from './api.ts';
import type { TestDatabase } from './database.ts';
import { uniqueTenant } from './factories.ts';

/**
 * A full garbage collection, in a process not started with --expose-gc: the flag set at run time
 * puts `gc` on contexts created afterwards, such as a fresh vm context.
 */
const collect = (() => {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

export const KB = 1024;
export const MB = 1024 * 1024;

export interface Memory {
  /** The heap's objects once everything unreachable is collected, without compiled code: what a leak grows. */
  data: number;
  /** All of the heap after that collection, the JIT's code included (it grows as functions get optimised). */
  heapUsed: number;
  rss: number;
}

/** What this process keeps, after a full collection. */
export async function memoryAfterGc(): Promise<Memory> {
  // A WeakRef's target is kept until the event loop's turn ends (every request's AbortSignal
  // has one), and requests answered without I/O never end it: 2 KB a request would look kept.
  await new Promise((resolve) => setImmediate(resolve));
  // Weak callbacks and finalizers of one collection free more in the next.
  for (let i = 0; i < 3; i++) collect();
  const data = getHeapSpaceStatistics()
    .filter((space) => !space.space_name.startsWith('code_'))
    .reduce((sum, space) => sum + space.space_used_size, 0);
  const { heapUsed, rss } = process.memoryUsage();
  return { data, heapUsed, rss };
}

/**
 * Zod string schemas alive right now (call after `memoryAfterGc`): each tool has a few, and a
 * schema built per request leaves more. One class only: counting walks the whole heap (~1 s).
 */
export const liveStringSchemas = () => queryObjects(z.ZodString, { format: 'count' }) as number;

/** The app as the API serves it, over `db`, without embeddings or rate limits. */
export const appOver = (db: TestDatabase) =>
  createApp({
    logger: createLogger('error', {}),
    db: db.app.db,
    verifyToken: createTokenVerifier({ jwtSecret: TEST_SECRET, jwksUrl: undefined, issuer: undefined, audience: undefined }),
    readiness: { accepting: () => true, checks: {}, degradable: [] },
  });

/** One request of a surface, answering its parsed body: `n` numbers it (texts differ per request). */
type Send = (n: number) => Promise<unknown>;

export interface Surface {
  name: string;
  send: Send;
}

/**
 * Every request surface a client reaches, the REST routes and the MCP tools, for a fresh tenant
 * with a few facts: each a function that sends one request through `fetch` (the app's own
 * `request`, or a real HTTP client) and fails on any answer but the one expected.
 */
export async function requestSurfaces(fetch: (path: string, init: RequestInit) => Response | Promise<Response>): Promise<Surface[]> {
  // Valid for as long as the soak runs.
  const token = await tokenFor({ tid: uniqueTenant('heap'), sub: 'agent' }, { ttlSeconds: 3 * 3600 });
  const call = async (method: string, path: string, expected: number, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }), ...headers },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (response.status !== expected) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return JSON.parse(text) as unknown;
  };
  const mcp = async (id: number, method: string, params?: unknown) => {
    const message = { jsonrpc: '2.0', id, method, ...(params !== undefined && { params }) };
    const answer = (await call('POST', '/mcp', 200, message, { accept: 'application/json, text/event-stream' })) as { result?: { isError?: boolean } };
    if (!answer.result || answer.result.isError) throw new Error(`MCP ${method}: ${JSON.stringify(answer)}`);
    return answer;
  };
  const tool = (id: number, name: string, args: Record<string, unknown>) => mcp(id, 'tools/call', { name, arguments: args });

  // What the searches find: these 20 facts, however many the writes below add.
  const ids: string[] = [];
  for (let n = 0; n < 20; n++) {
    const fact = { type: 'acme.note', content: { text: `boiler service note ${n}` } };
    ids.push(((await call('POST', '/v1/memory/facts', 201, fact)) as { id: string }).id);
  }
  const search = { query: 'boiler', mode: 'keyword', limit: 5 };
  const note = (n: number) => ({ type: 'acme.note', content: { text: `garden note ${n}` } });

  return [
    { name: 'REST write', send: (n) => call('POST', '/v1/memory/facts', 201, note(n)) },
    { name: 'REST read', send: (n) => call('GET', `/v1/memory/facts/${ids[n % ids.length]}`, 200) },
    { name: 'REST list', send: () => call('GET', '/v1/memory/facts?limit=5', 200) },
    { name: 'REST retrieve', send: () => call('POST', '/v1/memory/retrieve', 200, search) },
    { name: 'REST context', send: () => call('POST', '/v1/memory/context', 200, search) },
    { name: 'MCP tools/list', send: (n) => mcp(n, 'tools/list') },
    { name: 'MCP kindgi_remember', send: (n) => tool(n, 'kindgi_remember', { type: 'note', text: `Prefers the garden watered in week ${n}` }) },
    { name: 'MCP memory_retrieve', send: (n) => tool(n, 'memory_retrieve', search) },
    { name: 'MCP kiwi_memory_report', send: (n) => tool(n, 'kiwi_memory_report', { limit: 5 }) },
  ];
}

/** Every surface in turn, as one: its request `n` is request `from + n / count` of surface `n mod count`. */
export const inTurn = (surfaces: Surface[], from = 0): Surface => ({
  name: 'every REST route and MCP tool in turn',
  send: (n) => surfaces[n % surfaces.length]!.send(from + Math.floor(n / surfaces.length)),
});

/** Sends `count` requests of `surface`, `concurrency` at a time, numbered from `from`. */
export async function drive(surface: Surface, count: number, { from = 0, concurrency = 8 } = {}): Promise<void> {
  let next = from;
  const end = from + count;
  const worker = async () => {
    while (next < end) await surface.send(next++);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}
