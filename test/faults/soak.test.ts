/**
 * Soak (issue 24): the API over real HTTP on loopback (the Node adapter, keep-alive), in this
 * process so the heap can be collected before each reading, driven for thousands of requests of
 * each surface, REST routes and MCP tools, then in rounds of every surface in turn. Every
 * `SAMPLE_EVERY` requests it prints RSS and the heap after a full GC; what must hold is that
 * once warm the heap does not grow with requests, and no zod schema outlives its request. Each
 * row prints one `[faults]` line with its figures; the fast version is test/e2e/heap.test.ts.
 *
 * Before the fix (tool schemas built per MCP request), 4.1 to 4.6 KB of heap and one string
 * schema stayed behind each MCP request: over these 21,600 requests the heap after GC went
 * 38.9 → 82.9 MB and RSS 130 → 225 MB; after it, 38.9 → 40.1 MB and 133 → 138 MB (~5 minutes).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { appOver, drive, inTurn, KB, liveStringSchemas, MB, memoryAfterGc, requestSurfaces, type Surface } from '../helpers/heap.ts';

const PER_SURFACE = 1500;
/** The first readings include the pool's connections, prepared statements and the JIT's work. */
const WARM_UP = 500;
const SAMPLE_EVERY = 500;
const ROUNDS = 3;
/** Once warm, what a request may add to the heap after GC, on average (the leak: 4.1 to 4.6 KB an MCP request). */
const BOUND_BYTES_PER_REQUEST = 1 * KB;

const mb = (bytes: number) => (bytes / MB).toFixed(1);

describe('faults: soak, memory over thousands of requests', () => {
  let db: TestDatabase;
  let server: Server;
  let surfaces: Surface[];

  beforeAll(async () => {
    db = await createTestDatabase();
    server = serve({ fetch: appOver(db).fetch, port: 0, hostname: '127.0.0.1' }) as Server;
    // Client and server share this process, whose event loop a reading blocks for seconds (the
    // heap walked, collected): the server must not time out a connection the client reuses then.
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.once('listening', resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    surfaces = await requestSurfaces((path, init) => fetch(`${baseUrl}${path}`, init));
  });
  afterAll(async () => {
    if ('closeAllConnections' in server) server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await db.drop();
  });

  /**
   * Drives `total` requests of `surface`, a reading after every `every`: prints them, and
   * answers the heap's growth a request from the first reading after `warmUp` to the last.
   */
  async function soak(surface: Surface, total: number, every: number, warmUp: number) {
    const started = Date.now();
    const readings: string[] = [];
    let warm: { data: number; schemas: number } | undefined;
    let last = { data: 0, schemas: 0 };
    for (let sent = 0; sent < total; sent += every) {
      await drive(surface, every, { from: sent });
      const schemas = liveStringSchemas();
      const memory = await memoryAfterGc();
      last = { data: memory.data, schemas };
      if (sent + every === warmUp) warm = last;
      readings.push(`${sent + every}: rss ${mb(memory.rss)} heap ${mb(memory.data)}`);
    }
    const base = warm ?? last;
    const measured = total - warmUp;
    const bytesPerRequest = (last.data - base.data) / measured;
    console.log(
      `[faults] soak ${surface.name}: ${total} requests in ${((Date.now() - started) / 1000).toFixed(0)} s, MB after GC (rss, heap) at ${readings.join(', ')}; ` +
        `after the warm-up ${bytesPerRequest >= 0 ? '+' : ''}${Math.round(bytesPerRequest)} B a request, string schemas ${last.schemas - base.schemas >= 0 ? '+' : ''}${last.schemas - base.schemas}`,
    );
    return { bytesPerRequest, schemas: last.schemas - base.schemas };
  }

  it(`${PER_SURFACE} requests of each REST route and MCP tool`, { timeout: 900_000 }, async () => {
    const grown: Record<string, { bytesPerRequest: number; schemas: number }> = {};
    for (const surface of surfaces) grown[surface.name] = await soak(surface, PER_SURFACE, SAMPLE_EVERY, WARM_UP);
    expect(Object.entries(grown).filter(([, left]) => left.schemas !== 0 || left.bytesPerRequest > BOUND_BYTES_PER_REQUEST)).toEqual([]);
  });

  it(`${ROUNDS} rounds of every surface in turn`, { timeout: 900_000 }, async () => {
    const round = 300 * surfaces.length;
    // Numbered after the requests above: every write is a new fact.
    const left = await soak(inTurn(surfaces, PER_SURFACE), ROUNDS * round, round, round);
    expect(left.schemas).toBe(0);
    expect(left.bytesPerRequest).toBeLessThan(BOUND_BYTES_PER_REQUEST);
  });
});
