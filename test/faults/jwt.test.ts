/**
 * Fault row "JWT attacks" (issue 10), against real API processes and a real JWKS endpoint on
 * loopback that counts its fetches:
 *
 * - API A verifies RS256 through the JWKS only, with MNEMO_JWT_ISSUER and MNEMO_JWT_AUDIENCE;
 *   API B has the HS256 secret as well, and a JWKS that starts out failing.
 * - Forged and confused tokens (`alg: none` in any case, HS256 signed with the RSA public key's
 *   PEM or JWK as the secret, an embedded `jwk` header, a foreign key under our `kid`, hostile
 *   kids), wrong or missing `iss`/`aud`, expired or not yet valid: 401 `unauthenticated` in the
 *   envelope, nothing stored.
 * - A 20 KB token: Node refuses the header block (431, in the envelope) before the app; a 10 KB one is the app's
 *   own 401 ("Token too large", the 8 KiB bound).
 * - A flood of tokens with unknown kids: the JWKS is fetched at most once per cooldown (30 s),
 *   while valid tokens keep working; a key published meanwhile is picked up after the cooldown.
 * - The JWKS failing (500): 503 `unavailable` (the token may be fine), at most one fetch per
 *   retry interval however many requests come, and recovery once it answers again.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWKS_COOLDOWN_MS, JWKS_RETRY_AFTER_FAILURE_MS } from '../../src/auth/verify.ts';
import { TEST_SECRET } from '../helpers/api.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { sleep } from '../../support/wait.ts';
import { type ApiProcess, startApiProcess } from './helpers/api-process.ts';

const ISSUER = 'https://idp.test';
const AUDIENCE = 'mnemo';
const FACTS = '/v1/memory/facts';
const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

interface KeySetEndpoint {
  keys: JWK[];
  failing: boolean;
  /** When each fetch arrived (ms since epoch), answered or not. */
  fetches: { at: number; answered: boolean }[];
}

interface Answer {
  status: number;
  body: { error?: { code?: string; message?: string; requestId?: string } } & Record<string, unknown>;
  headers: Headers;
}

describe('fault: JWT attacks', () => {
  let jwksServer: Server;
  let jwksBase: string;
  const endpoints = new Map<string, KeySetEndpoint>();
  let a: ApiProcess;
  let b: ApiProcess;
  let tenantId: string;
  let ourKey: CryptoKey;
  let ourPublicJwk: JWK;
  let ourPem: string;
  let foreignKey: CryptoKey;
  let foreignPublicJwk: JWK;
  const statuses = new Map<number, number>();
  let requests = 0;
  const figures: string[] = [];

  const claims = () => ({ tid: tenantId, role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } });

  /** An RS256 token; `options` bend it into an attack. */
  function rs256(options: { kid?: string | undefined; key?: CryptoKey; issuer?: string | null; audience?: string | null; exp?: number | string; nbf?: number; header?: Record<string, unknown> } = {}) {
    let jwt = new SignJWT(claims())
      .setProtectedHeader({ alg: 'RS256', ...('kid' in options ? (options.kid === undefined ? {} : { kid: options.kid }) : { kid: 'k1' }), ...options.header })
      .setSubject('attacker-or-not')
      .setIssuedAt()
      .setExpirationTime(options.exp ?? '5m');
    if (options.issuer !== null) jwt = jwt.setIssuer(options.issuer ?? ISSUER);
    if (options.audience !== null) jwt = jwt.setAudience(options.audience ?? AUDIENCE);
    if (options.nbf !== undefined) jwt = jwt.setNotBefore(options.nbf);
    return jwt.sign(options.key ?? ourKey);
  }

  const hs256 = (secret: Uint8Array | string, header: Record<string, unknown> = {}) =>
    new SignJWT(claims())
      .setProtectedHeader({ alg: 'HS256', ...header })
      .setSubject('attacker')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(typeof secret === 'string' ? new TextEncoder().encode(secret) : secret);

  /** `alg: none` spelled as given: header, payload, empty signature. */
  const unsecured = (alg: string) =>
    `${b64({ alg, typ: 'JWT' })}.${b64({ ...claims(), sub: 'attacker', iss: ISSUER, aud: AUDIENCE, exp: Math.floor(Date.now() / 1000) + 300 })}.`;

  async function post(api: ApiProcess, token: string): Promise<Answer> {
    const response = await fetch(`${api.url}${FACTS}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'acme.note', content: { text: 'from a token' } }),
    });
    const text = await response.text();
    requests++;
    statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    let body: Answer['body'] = {};
    try {
      body = JSON.parse(text);
    } catch {
      // an answer that is not JSON is left for the assertions to report
    }
    return { status: response.status, body, headers: response.headers };
  }

  const factCount = async (api: ApiProcess) => (await api.db.admin<{ n: number }[]>`select count(*)::int as n from facts`)[0]!.n;

  function expectRefused(answer: Answer, label: string, code = 'unauthenticated', status = 401) {
    expect(answer.status, `${label}: ${JSON.stringify(answer.body)}`).toBe(status);
    expect(answer.body.error?.code, label).toBe(code);
    expect(answer.body.error?.requestId, label).toBe(answer.headers.get('x-request-id'));
  }

  /** Sends `tokens` to `api`, `concurrency` at a time, and returns the answers in order. */
  async function flood(api: ApiProcess, tokens: string[], concurrency = 16): Promise<Answer[]> {
    const answers: Answer[] = new Array(tokens.length);
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < tokens.length) {
          const i = next++;
          answers[i] = await post(api, tokens[i]!);
        }
      }),
    );
    return answers;
  }

  beforeAll(async () => {
    tenantId = uniqueTenant('jwt');
    const ours = await generateKeyPair('RS256', { extractable: true });
    ourKey = ours.privateKey;
    ourPublicJwk = { ...(await exportJWK(ours.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    ourPem = await exportSPKI(ours.publicKey);
    const foreign = await generateKeyPair('RS256', { extractable: true });
    foreignKey = foreign.privateKey;
    foreignPublicJwk = await exportJWK(foreign.publicKey);

    endpoints.set('/a/jwks.json', { keys: [ourPublicJwk], failing: false, fetches: [] });
    endpoints.set('/b/jwks.json', { keys: [ourPublicJwk], failing: true, fetches: [] });
    jwksServer = createServer((req, res) => {
      const endpoint = endpoints.get(req.url ?? '');
      if (!endpoint) {
        res.statusCode = 404;
        res.end();
        return;
      }
      endpoint.fetches.push({ at: Date.now(), answered: !endpoint.failing });
      if (endpoint.failing) {
        res.statusCode = 500;
        res.end('upstream trouble');
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: endpoint.keys }));
    });
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
    jwksBase = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}`;

    [a, b] = await Promise.all([
      startApiProcess({
        MNEMO_JWT_SECRET: undefined,
        MNEMO_JWKS_URL: `${jwksBase}/a/jwks.json`,
        MNEMO_JWT_ISSUER: ISSUER,
        MNEMO_JWT_AUDIENCE: AUDIENCE,
      }),
      startApiProcess({
        MNEMO_JWT_SECRET: TEST_SECRET,
        MNEMO_JWKS_URL: `${jwksBase}/b/jwks.json`,
        MNEMO_JWT_ISSUER: ISSUER,
        MNEMO_JWT_AUDIENCE: AUDIENCE,
      }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await new Promise<void>((resolve) => (jwksServer ? jwksServer.close(() => resolve()) : resolve()));
    console.log(
      `[faults] jwt: requests=${requests}, by status ${JSON.stringify(Object.fromEntries([...statuses].sort(([x], [y]) => x - y)))}; ${figures.join('; ')}`,
    );
  });

  it('refuses forged, confused, misaddressed and expired tokens with 401, storing nothing', async () => {
    // The control: a proper token is accepted (and the JWKS fetched once, for the first time).
    const accepted = await post(a, await rs256());
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(201);
    const stored = await factCount(a);
    const storedB = await factCount(b);
    const now = Math.floor(Date.now() / 1000);
    // A valid token whose payload is replaced by another tenant's: the signature no longer matches.
    const [header, , signature] = (await rs256()).split('.');
    const swapped = `${header}.${b64({ ...claims(), tid: 'someone-else', sub: 'x', iss: ISSUER, aud: AUDIENCE, exp: now + 300 })}.${signature}`;

    // Tokens that need no key set: refused by both APIs.
    const keyless: [string, string][] = [
      ...['none', 'None', 'NONE', 'nOnE'].map((alg) => [`alg ${alg}`, unsecured(alg)] as [string, string]),
      ['alg none with a signature', `${unsecured('none')}${b64('sig')}`],
      ['HS256 signed with the RSA public key as PEM', await hs256(ourPem, { kid: 'k1' })],
      ['HS256 signed with the PEM, no trailing newline', await hs256(ourPem.trim(), { kid: 'k1' })],
      ['HS256 signed with the public JWK as JSON', await hs256(JSON.stringify(ourPublicJwk))],
      ['HS256 signed with the modulus', await hs256(Buffer.from(ourPublicJwk.n!, 'base64url'))],
      ['garbage', 'a.b.c'],
    ];
    // Tokens checked against the key set: A (B's key set is kept failing for the last test).
    const keyed: [string, string][] = [
      ['RS256 from a foreign key under our kid', await rs256({ key: foreignKey })],
      ['RS256 from a foreign key, no kid', await rs256({ key: foreignKey, kid: undefined })],
      ["an embedded jwk header (the signer's own key)", await rs256({ key: foreignKey, kid: undefined, header: { jwk: foreignPublicJwk } })],
      ['a jku header pointing elsewhere', await rs256({ key: foreignKey, header: { jku: `${jwksBase}/b/jwks.json` } })],
      ['a kid with path traversal', await rs256({ key: foreignKey, kid: '../../../../etc/passwd' })],
      ['a kid with a NUL', await rs256({ key: foreignKey, kid: 'k1\u0000' })],
      ['a kid of 4 KB', await rs256({ key: foreignKey, kid: 'k'.repeat(4096) })],
      ['the wrong issuer', await rs256({ issuer: 'https://evil.test' })],
      ['no issuer', await rs256({ issuer: null })],
      ['the wrong audience', await rs256({ audience: 'someone-else' })],
      ['no audience', await rs256({ audience: null })],
      ['expired a minute ago (past the 30 s tolerance)', await rs256({ exp: now - 60 })],
      ['expired in 1970', await rs256({ exp: 1 })],
      ['not valid for another hour', await rs256({ nbf: now + 3600 })],
      ['a signature cut short', (await rs256()).slice(0, -10)],
      ['the payload swapped under a valid signature', swapped],
    ];
    // HS256 with B's own secret, but misaddressed or out of time: B checks iss, aud, exp for it too.
    const secretSigned = (edit: (jwt: SignJWT) => SignJWT) =>
      edit(new SignJWT(claims()).setProtectedHeader({ alg: 'HS256' }).setSubject('u').setIssuedAt()).sign(new TextEncoder().encode(TEST_SECRET));
    const misaddressed: [string, string][] = [
      ['HS256: the wrong issuer', await secretSigned((j) => j.setIssuer('https://evil.test').setAudience(AUDIENCE).setExpirationTime('5m'))],
      ['HS256: the wrong audience', await secretSigned((j) => j.setIssuer(ISSUER).setAudience('someone-else').setExpirationTime('5m'))],
      ['HS256: expired', await secretSigned((j) => j.setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime(now - 60))],
      ['HS256: no exp', await secretSigned((j) => j.setIssuer(ISSUER).setAudience(AUDIENCE))],
    ];

    let refused = 0;
    const attempts: [string, string, ApiProcess][] = [
      ...keyless.flatMap(([label, token]) => [[`${label} (A)`, token, a], [`${label} (B)`, token, b]] as [string, string, ApiProcess][]),
      ...keyed.map(([label, token]) => [`${label} (A)`, token, a] as [string, string, ApiProcess]),
      ...misaddressed.map(([label, token]) => [`${label} (B)`, token, b] as [string, string, ApiProcess]),
    ];
    for (const [label, token, api] of attempts) {
      expectRefused(await post(api, token), label);
      refused++;
    }
    // B has the HS256 secret: the PEM-signed token is tried against the secret and fails there.
    expect((await post(b, await hs256(ourPem, { kid: 'k1' }))).body.error?.message).toBe('Token signature is invalid');
    // A has no secret: HS256 is not an algorithm it accepts at all.
    expect((await post(a, await hs256(ourPem, { kid: 'k1' }))).body.error?.message).toBe('Token algorithm "HS256" is not accepted');
    expect(await factCount(a)).toBe(stored);
    expect(await factCount(b)).toBe(storedB);
    // None of that needed B's key set.
    expect(endpoints.get('/b/jwks.json')!.fetches).toHaveLength(0);
    figures.push(`${attempts.length} forged, confused, misaddressed or expired tokens → ${refused} × 401`);
  });

  it('answers 431 to a 20 KB token (Node refuses the header), 401 to a 10 KB one, and keeps serving', async () => {
    const padded = (bytes: number) => `${b64({ alg: 'RS256', kid: 'k1' })}.${'A'.repeat(bytes)}.sig`;
    // Node's default limit on the header block is 16 KiB (--max-http-header-size): its parser
    // refuses it before any of the app runs, and answerMalformedRequests says so in the envelope.
    const huge = await post(a, padded(20 * 1024));
    expect(huge.status).toBe(431);
    expect(huge.body.error?.code).toBe('bad-input');
    expect(huge.headers.get('x-request-id')).toBe(huge.body.error?.requestId);
    const large = await post(a, padded(10 * 1024));
    expectRefused(large, '10 KB token');
    expect(large.body.error?.message).toBe('Token too large');
    expect((await post(a, await rs256())).status).toBe(201);
    figures.push('20 KB token → 431 in the envelope (16 KiB header limit), 10 KB → 401 Token too large');
  });

  it(
    'fetches the JWKS at most once per cooldown under a flood of unknown kids, and picks up a new key after it',
    async () => {
      const endpoint = endpoints.get('/a/jwks.json')!;
      const unknownKids = (n: number, tag: string) =>
        Promise.all(Array.from({ length: n }, (_, i) => rs256({ key: foreignKey, kid: `${tag}-${i}-${Math.random().toString(36).slice(2)}` })));
      const valid = await Promise.all(Array.from({ length: 20 }, () => rs256()));

      // Phase 1: right after the last fetch (the earlier tests), 300 unknown kids and 20 valid tokens.
      let tokens = await unknownKids(300, 'p1');
      let before = endpoint.fetches.length;
      let startedAt = Date.now();
      let answers = await flood(a, [...tokens, ...valid]);
      const phase1Ms = Date.now() - startedAt;
      answers.slice(0, tokens.length).forEach((answer, i) => expectRefused(answer, `unknown kid ${i}`));
      answers.slice(tokens.length).forEach((answer) => expect(answer.status).toBe(201));
      const phase1Fetches = endpoint.fetches.length - before;
      expect(phase1Fetches).toBeLessThanOrEqual(1);

      // The IdP publishes a new key: not known yet, and asking for it does not fetch (cooling down).
      const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
      endpoint.keys = [ourPublicJwk, { ...(await exportJWK(publicKey)), kid: 'k2', alg: 'RS256', use: 'sig' }];
      const rotated = await rs256({ key: privateKey, kid: 'k2' });
      const lastFetch = endpoint.fetches.at(-1)!.at;
      if (Date.now() < lastFetch + JWKS_COOLDOWN_MS - 2000) {
        before = endpoint.fetches.length;
        expectRefused(await post(a, rotated), 'a new kid within the cooldown');
        expect(endpoint.fetches.length).toBe(before);
      }

      // Phase 2: once the cooldown has passed, the same flood costs exactly one fetch, and the new key works.
      await sleep(Math.max(0, lastFetch + JWKS_COOLDOWN_MS + 500 - Date.now()));
      tokens = await unknownKids(300, 'p2');
      before = endpoint.fetches.length;
      startedAt = Date.now();
      answers = await flood(a, tokens);
      const phase2Ms = Date.now() - startedAt;
      answers.forEach((answer, i) => expectRefused(answer, `unknown kid ${i} after the cooldown`));
      const phase2Fetches = endpoint.fetches.length - before;
      expect(phase2Fetches).toBe(1);
      expect((await post(a, rotated)).status).toBe(201);

      // Over the whole file: no two fetches of A's JWKS closer together than the cooldown.
      const gaps = endpoint.fetches.slice(1).map((fetch, i) => fetch.at - endpoint.fetches[i]!.at);
      for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(JWKS_COOLDOWN_MS - 50);
      figures.push(
        `unknown-kid flood: 300 in ${phase1Ms} ms within the cooldown → ${phase1Fetches} JWKS fetches, 300 in ${phase2Ms} ms after it → ${phase2Fetches}; ` +
          `${endpoint.fetches.length} fetches in all, gaps ${gaps.map((g) => `${(g / 1000).toFixed(1)} s`).join(', ') || 'none'} (cooldown ${JWKS_COOLDOWN_MS / 1000} s)`,
      );
    },
    120_000,
  );

  it('answers 503 unavailable while the JWKS fails, fetches it at most once per retry interval, and recovers', async () => {
    const endpoint = endpoints.get('/b/jwks.json')!;
    expect(endpoint.failing).toBe(true);
    const stored = await factCount(b);
    const tokens = await Promise.all(Array.from({ length: 200 }, (_, i) => rs256({ kid: i % 2 === 0 ? 'k1' : `unknown-${i}` })));
    const startedAt = Date.now();
    const before = endpoint.fetches.length;
    const answers = await flood(b, tokens, 8);
    const elapsedMs = Date.now() - startedAt;
    const fetches = endpoint.fetches.length - before;
    for (const answer of answers) {
      expectRefused(answer, 'a token while the JWKS fails', 'unavailable', 503);
      expect(answer.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
    }
    // One fetch, then none until the retry interval has passed, however many requests came.
    expect(fetches).toBeLessThanOrEqual(1 + Math.floor(elapsedMs / JWKS_RETRY_AFTER_FAILURE_MS));
    // The HS256 secret does not depend on the JWKS.
    const hs = await new SignJWT(claims()).setProtectedHeader({ alg: 'HS256' }).setSubject('u').setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('5m').sign(new TextEncoder().encode(TEST_SECRET));
    expect((await post(b, hs)).status).toBe(201);
    expect(await factCount(b)).toBe(stored + 1);

    // The IdP is back: within one retry interval a JWKS token is accepted again, with no restart.
    endpoint.failing = false;
    const recoveredAt = Date.now();
    let status = 0;
    while (Date.now() - recoveredAt < JWKS_RETRY_AFTER_FAILURE_MS + 3000) {
      status = (await post(b, await rs256())).status;
      if (status === 201) break;
      await sleep(250);
    }
    expect(status).toBe(201);
    figures.push(
      `JWKS failing: 200 tokens in ${elapsedMs} ms → 200 × 503, ${fetches} JWKS fetches (retry every ${JWKS_RETRY_AFTER_FAILURE_MS / 1000} s); ` +
        `accepted again ${((Date.now() - recoveredAt) / 1000).toFixed(1)} s after it recovered`,
    );
  });
});
