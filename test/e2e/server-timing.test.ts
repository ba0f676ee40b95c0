/**
 * MNEMO_SERVER_TIMING (issue 30): where a request's milliseconds went, in a `Server-Timing` header
 * (src/foundation/request-timing.ts), what `npm run bench` prints as a search's breakdown.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseServerTiming, serverTimingHeader } from '../../src/foundation/request-timing.ts';
import { createLogger } from '../../src/foundation/log.ts';
import { createRateLimiter } from '../../src/http/rate-limit.ts';
import { startTestApi, type TestApi } from '../helpers/api.ts';

const UNREACHED = { perCaller: 1_000_000, perTenant: 1_000_000 };

describe('Server-Timing', () => {
  let timed: TestApi;
  let plain: TestApi;
  let admin: string;

  beforeAll(async () => {
    timed = await startTestApi({
      embeddings: true,
      serverTiming: true,
      rateLimiter: createRateLimiter({
        limits: { writes: UNREACHED, searches: UNREACHED, reports: UNREACHED, reads: UNREACHED },
        keyPrefix: 'server-timing-test',
        logger: createLogger('error', {}),
      }),
    });
    plain = await startTestApi();
    ({ admin } = await timed.newTenant('server-timing'));
    for (const text of ['the harbour crane lifts containers', 'a crane nests by the harbour', 'tide tables for the harbour']) {
      const written = await timed.request('POST', '/v1/memory/facts', { token: admin, body: { type: 'acme.note', content: { text } } });
      expect(written.status).toBe(201);
    }
  });

  afterAll(async () => {
    await timed?.close();
    await plain?.close();
  });

  const phasesOf = (response: { headers: Headers }) => parseServerTiming(response.headers.get('server-timing'));

  it('names each phase of a keyword search, which add up to no more than the total', async () => {
    const answer = await timed.request('POST', '/v1/memory/retrieve', { token: admin, body: { mode: 'keyword', query: 'harbour crane' } });
    expect(answer.status).toBe(200);
    expect(answer.body.results).toHaveLength(3);
    const phases = phasesOf(answer);
    expect([...phases.keys()]).toEqual(['auth', 'rate-limit', 'read-routing', 'db-begin', 'keyword-statistics', 'keyword-score', 'load-facts', 'expand', 'db-commit', 'serialise', 'total']);
    const { total, ...named } = Object.fromEntries(phases);
    for (const ms of Object.values(named)) expect(ms).toBeGreaterThanOrEqual(0);
    const sum = Object.values(named).reduce((a, b) => a + b, 0);
    // Rounded to 0.01 ms each.
    expect(sum).toBeLessThanOrEqual(total! + 0.01 * phases.size);
    expect(total).toBeGreaterThan(0);
  });

  it('names the query embedding and the vector search of a semantic search', async () => {
    const answer = await timed.request('POST', '/v1/memory/retrieve', { token: admin, body: { mode: 'semantic', query: 'harbour crane' } });
    expect(answer.status).toBe(200);
    const phases = phasesOf(answer);
    expect(phases.has('embed-query')).toBe(true);
    expect(phases.has('semantic-search')).toBe(true);
    expect(phases.has('keyword-score')).toBe(false);
  });

  it('times a refused request too, without the phases it never reached', async () => {
    const answer = await timed.request('POST', '/v1/memory/retrieve', { token: 'not-a-token', body: { mode: 'keyword', query: 'harbour' } });
    expect(answer.status).toBe(401);
    const phases = phasesOf(answer);
    expect(phases.has('total')).toBe(true);
    expect(phases.has('db-begin')).toBe(false);
  });

  it('is not sent unless MNEMO_SERVER_TIMING is on', async () => {
    const { admin: other } = await plain.newTenant('no-timing');
    const answer = await plain.request('POST', '/v1/memory/retrieve', { token: other, body: { mode: 'keyword', query: 'harbour' } });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('server-timing')).toBeNull();
  });
});

describe('the Server-Timing header', () => {
  it('reads back what it wrote, and skips entries without a duration', () => {
    const header = serverTimingHeader(new Map([['auth', 0.123], ['db-begin', 1.5]]), 3.14159);
    expect(header).toBe('auth;dur=0.12, db-begin;dur=1.50, total;dur=3.14');
    expect(parseServerTiming(`${header}, cache;desc="hit"`)).toEqual(new Map([['auth', 0.12], ['db-begin', 1.5], ['total', 3.14]]));
    expect(parseServerTiming(null)).toEqual(new Map());
  });
});
