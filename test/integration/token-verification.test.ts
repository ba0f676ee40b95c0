import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTokenVerifier, JWKS_RETRY_AFTER_FAILURE_MS, MAX_TOKEN_BYTES, TokenKeysUnavailable } from '../../src/auth/verify.ts';
import { AppError } from '../../src/foundation/app-error.ts';

const secret = 'verifier-secret-of-at-least-32-bytes';
const claims = { tid: 'acme', role: 'member', projects: { read: ['p1'], write: [] } };
type Algorithm = 'RS256' | 'ES256' | 'EdDSA';

/** A real JWKS endpoint on this machine, as a tenant's IdP would serve one. */
describe('token verification', () => {
  let jwksServer: Server;
  let jwksUrl: string;
  const keys = new Map<Algorithm, CryptoKey>();
  let outsiderKey: CryptoKey;

  beforeAll(async () => {
    const published: JWK[] = [];
    for (const alg of ['RS256', 'ES256', 'EdDSA'] as const) {
      const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
      keys.set(alg, privateKey);
      published.push({ ...(await exportJWK(publicKey)), kid: `key-${alg}`, alg, use: 'sig' });
    }
    outsiderKey = (await generateKeyPair('RS256')).privateKey;
    jwksServer = createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: published }));
    });
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
    jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/.well-known/jwks.json`;
  });
  afterAll(() => new Promise<void>((resolve) => jwksServer.close(() => resolve())));

  const hs256 = (payload: Record<string, unknown> = claims, key = secret, exp: number | string = '5m') =>
    new SignJWT(payload).setProtectedHeader({ alg: 'HS256' }).setSubject('user-1').setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(key));

  const signed = (alg: Algorithm, options: { issuer?: string; audience?: string; key?: CryptoKey; kid?: string } = {}) => {
    let jwt = new SignJWT(claims).setProtectedHeader({ alg, kid: options.kid ?? `key-${alg}` }).setSubject('user-1').setIssuedAt().setExpirationTime('5m');
    if (options.issuer) jwt = jwt.setIssuer(options.issuer);
    if (options.audience) jwt = jwt.setAudience(options.audience);
    return jwt.sign(options.key ?? keys.get(alg)!);
  };

  const failure = async (promise: Promise<unknown>) => {
    const error = await promise.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  };

  it('accepts HS256 with the secret and returns the principal', async () => {
    const verify = createTokenVerifier({ jwtSecret: secret, jwksUrl: undefined, issuer: undefined, audience: undefined });
    expect(await verify(`Bearer ${await hs256()}`)).toEqual({
      tenantId: 'acme',
      sub: 'user-1',
      role: 'member',
      projects: { read: ['p1'], write: [] },
      orgs: { read: [], write: [] },
    });
  });

  it.each(['RS256', 'ES256', 'EdDSA'] as const)('accepts %s tokens through the JWKS', async (alg) => {
    const verify = createTokenVerifier({ jwtSecret: undefined, jwksUrl, issuer: undefined, audience: undefined });
    expect((await verify(`Bearer ${await signed(alg)}`)).tenantId).toBe('acme');
  });

  it('checks issuer and audience when configured', async () => {
    const verify = createTokenVerifier({ jwtSecret: undefined, jwksUrl, issuer: 'https://idp.example', audience: 'mnemo' });
    expect((await verify(`Bearer ${await signed('ES256', { issuer: 'https://idp.example', audience: 'mnemo' })}`)).sub).toBe('user-1');
    const wrongIssuer = await failure(verify(`Bearer ${await signed('ES256', { issuer: 'https://evil.example', audience: 'mnemo' })}`));
    expect(wrongIssuer).toMatchObject({ code: 'unauthenticated', message: 'Token claim iss is invalid' });
    const noAudience = await failure(verify(`Bearer ${await signed('ES256', { issuer: 'https://idp.example' })}`));
    expect(noAudience.code).toBe('unauthenticated');
  });

  it('refuses a key the issuer does not publish, and HS256 when only a JWKS is configured', async () => {
    const verify = createTokenVerifier({ jwtSecret: undefined, jwksUrl, issuer: undefined, audience: undefined });
    expect(await failure(verify(`Bearer ${await signed('RS256', { key: outsiderKey })}`))).toMatchObject({ code: 'unauthenticated' });
    expect(await failure(verify(`Bearer ${await hs256()}`))).toMatchObject({ message: 'Token algorithm "HS256" is not accepted' });
  });

  it('refuses an asymmetric token when only a secret is configured', async () => {
    const verify = createTokenVerifier({ jwtSecret: secret, jwksUrl: undefined, issuer: undefined, audience: undefined });
    expect(await failure(verify(`Bearer ${await signed('RS256')}`))).toMatchObject({ message: 'Token algorithm "RS256" is not accepted' });
  });

  it('answers 503 unavailable, not 401, when the JWKS cannot be fetched', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const verify = createTokenVerifier({ jwtSecret: undefined, jwksUrl: `http://127.0.0.1:${port}/jwks`, issuer: undefined, audience: undefined });
    expect(await failure(verify(`Bearer ${await signed('ES256')}`))).toMatchObject({ code: 'unavailable' });
  });

  it('answers 503 when the JWKS answers 500, and asks again only after the retry interval', async () => {
    let fetches = 0;
    const failing = createServer((_req, res) => {
      fetches++;
      res.statusCode = 500;
      res.end('upstream trouble');
    });
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(failing.address() as AddressInfo).port}/jwks`;
      const verify = createTokenVerifier({ jwtSecret: undefined, jwksUrl: url, issuer: undefined, audience: undefined });
      for (let i = 0; i < 5; i++) {
        const error = await failure(verify(`Bearer ${await signed('ES256')}`));
        expect(error).toBeInstanceOf(TokenKeysUnavailable);
        expect(error).toMatchObject({ code: 'unavailable', retryAfterSeconds: JWKS_RETRY_AFTER_FAILURE_MS / 1000 });
      }
      // jose alone would have fetched once per request.
      expect(fetches).toBe(1);
    } finally {
      await new Promise<void>((resolve) => failing.close(() => resolve()));
    }
  });

  it('allows 30 s of clock skew on exp, and no more', async () => {
    const verify = createTokenVerifier({ jwtSecret: secret, jwksUrl: undefined, issuer: undefined, audience: undefined });
    const now = Math.floor(Date.now() / 1000);
    expect((await verify(`Bearer ${await hs256(claims, secret, now - 10)}`)).tenantId).toBe('acme');
    expect(await failure(verify(`Bearer ${await hs256(claims, secret, now - 60)}`))).toMatchObject({ message: 'Token expired' });
  });

  it.each([
    ['no header', undefined, 'Missing Authorization: Bearer token'],
    ['another scheme', 'Basic dXNlcjpwYXNz', 'Authorization must be "Bearer <token>"'],
    ['garbage', 'Bearer not.a.jwt', 'Malformed token'],
    ['too large', `Bearer ${'a'.repeat(MAX_TOKEN_BYTES + 1)}`, 'Token too large'],
  ])('refuses %s', async (_label, header, message) => {
    const verify = createTokenVerifier({ jwtSecret: secret, jwksUrl: undefined, issuer: undefined, audience: undefined });
    expect(await failure(verify(header))).toMatchObject({ code: 'unauthenticated', message });
  });

  it('a token verified once is taken again from the cache only until its exp, and its principal cannot be changed', async () => {
    const verify = createTokenVerifier({ jwtSecret: secret, jwksUrl: undefined, issuer: undefined, audience: undefined });
    const now = Math.floor(Date.now() / 1000);
    const header = `Bearer ${await hs256(claims, secret, now + 60)}`;
    const first = await verify(header);
    expect(await verify(header)).toEqual(first);
    expect(() => {
      (first.projects.write as string[]).push('p-other');
    }).toThrow(TypeError);
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      // Past exp and jose's 30 s tolerance: a fresh check refuses it, so the cache must too.
      vi.setSystemTime((now + 120) * 1000);
      expect(await failure(verify(header))).toMatchObject({ message: 'Token expired' });
    } finally {
      vi.useRealTimers();
    }
  });

  it('refuses tokens without exp, with bad claims, or unsecured', async () => {
    const verify = createTokenVerifier({ jwtSecret: secret, jwksUrl: undefined, issuer: undefined, audience: undefined });
    const noExp = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setSubject('u').sign(new TextEncoder().encode(secret));
    expect(await failure(verify(`Bearer ${noExp}`))).toMatchObject({ code: 'unauthenticated', message: 'Token claim exp is invalid' });
    expect(await failure(verify(`Bearer ${await hs256({ ...claims, role: 'root' })}`))).toMatchObject({ message: expect.stringMatching(/^Token claim role is invalid/) });
    expect(await failure(verify(`Bearer ${await hs256({ role: 'admin' })}`))).toMatchObject({ message: expect.stringMatching(/^Token claim tid is invalid/) });
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsecured = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ ...claims, sub: 'u', exp: Math.floor(Date.now() / 1000) + 300 })}.`;
    expect(await failure(verify(`Bearer ${unsecured}`))).toMatchObject({ message: 'Token algorithm "none" is not accepted' });
    expect(await failure(verify(`Bearer ${await hs256(claims, 'another-secret-of-at-least-32-bytes!!')}`))).toMatchObject({ message: 'Token signature is invalid' });
  });

  // PostgreSQL cannot hold U+0000 in text, and would store an unpaired surrogate as U+FFFD
  // (so `a\ud800` and `a\udbff` would be one tenant): such ids are refused, signature or not.
  it.each([
    ['a NUL in tid', { ...claims, tid: 'acme\u0000' }, 'tid'],
    ['a NUL in sub', { ...claims, sub: 'user\u00001' }, 'sub'],
    ['a NUL in a project grant', { ...claims, projects: { read: ['p\u0000'], write: [] } }, 'projects.read.0'],
    ['a NUL in an org grant', { ...claims, orgs: { read: [], write: ['o\u0000'] } }, 'orgs.write.0'],
    ['an unpaired surrogate in tid', { ...claims, tid: 'acme\ud800' }, 'tid'],
  ])('refuses a validly signed token with %s', async (_label, payload, claim) => {
    const verify = createTokenVerifier({ jwtSecret: secret, jwksUrl: undefined, issuer: undefined, audience: undefined });
    const token = await new SignJWT(payload)
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('sub' in payload ? String(payload.sub) : 'user-1')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(secret));
    const error = await failure(verify(`Bearer ${token}`));
    expect(error.code).toBe('unauthenticated');
    expect(error.message).toMatch(new RegExp(`^Token claim ${claim.replace(/\./g, '\\.')} is invalid`));
    expect(error.message).not.toContain('\u0000');
  });
});
