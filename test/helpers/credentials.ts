/**
 * Bearer credentials for the security suites: tokens built field by field, and every way a
 * credential can be wrong. All the bad ones carry the claims of one tenant's admin, so a verifier
 * that let any of them through would act as that admin.
 */
import { createHmac } from 'node:crypto';
import { SignJWT } from 'jose';
import { expect } from 'vitest';
import { type ApiResponse, TEST_SECRET, tokenFor } from './api.ts';

export const WRONG_SECRET = 'another-secret-that-is-also-32-bytes-or-more!';

export const nowSeconds = () => Math.floor(Date.now() / 1000);
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
const key = (secret: string) => new TextEncoder().encode(secret);

export interface Claims {
  [claim: string]: unknown;
}

/** The claims of a tenant's admin, as a real token would carry them. */
export const adminClaims = (tenantId: string): Claims => ({
  sub: 'admin-1',
  tid: tenantId,
  role: 'admin',
  projects: { read: [], write: [] },
  orgs: { read: [], write: [] },
});

/** An HS256 token built with jose directly, so every field (or its absence) is ours to choose. */
export async function signed(
  claims: Claims,
  options: { secret?: string; iat?: number; exp?: number | null; alg?: 'HS256' | 'HS384' | 'HS512' } = {},
): Promise<string> {
  const iat = options.iat ?? nowSeconds();
  let jwt = new SignJWT(claims).setProtectedHeader({ alg: options.alg ?? 'HS256', typ: 'JWT' }).setIssuedAt(iat);
  if (options.exp !== null) jwt = jwt.setExpirationTime(options.exp ?? iat + 600);
  return jwt.sign(key(options.secret ?? TEST_SECRET));
}

/** A token with any header, its signature an HMAC-SHA256 of header.payload with the test secret. */
function withHeader(header: Record<string, unknown>, claims: Claims): string {
  const input = `${b64url(header)}.${b64url({ ...claims, iat: nowSeconds(), exp: nowSeconds() + 600 })}`;
  return `${input}.${createHmac('sha256', TEST_SECRET).update(input).digest('base64url')}`;
}

/** An unsecured JWT (`alg: none`), built by hand: header.payload. with an empty signature. */
function unsecured(claims: Claims): string {
  return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ ...claims, iat: nowSeconds(), exp: nowSeconds() + 600 })}.`;
}

/** The same token with the last 8 characters of its signature each replaced by another. */
function tamperSignature(token: string): string {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const tail = signature
    .slice(-8)
    .split('')
    .map((c) => (c === 'A' ? 'B' : 'A'))
    .join('');
  return `${header}.${payload}.${signature.slice(0, -8)}${tail}`;
}

/** What goes in the Authorization header (or nothing), and the secret part it must not echo. */
export interface Credential {
  authorization: string | undefined;
  /** Strings the 401 body must not contain. */
  secrets: string[];
}

const bearer = (token: string): Credential => ({
  authorization: `Bearer ${token}`,
  // The token, and each of its segments that is long enough to be recognisable.
  secrets: [token, ...token.split('.').filter((s) => s.length >= 16)],
});

/** The request headers that present a credential. */
export const headersOf = (credential: Credential): Record<string, string> =>
  credential.authorization === undefined ? {} : { authorization: credential.authorization };

/** Every bad credential (built by `badCredentials`, in this order). */
export const BAD_CREDENTIALS = [
  'no Authorization header',
  'Authorization: Basic',
  'Basic with a valid JWT',
  'Bearer with nothing after it',
  'Bearer + garbage',
  'Bearer + three garbage segments',
  'a tampered signature',
  'a token without its signature',
  'a token that expired 120 s ago',
  'alg: none (unsecured JWT)',
  'HS256 with the wrong secret',
  'HS512 with the right secret (algorithm not pinned)',
  'a token without exp',
  'a token over 8 KiB',
  'a token without tid',
  'a token without sub',
  'a token with role "root"',
  'a token with an empty tid',
  'a token with a 129-character tid',
  'a token whose projects claim is not an object',
  'a token not valid before an hour from now (nbf)',
  'RS256 in the header, signed with the HS256 secret (algorithm confusion)',
  'two tokens in one header',
] as const;

export type BadCredentialName = (typeof BAD_CREDENTIALS)[number];

/** Every bad credential, each naming the admin of `tenantId`. */
export async function badCredentials(tenantId: string): Promise<Map<BadCredentialName, Credential>> {
  const claims = adminClaims(tenantId);
  const now = nowSeconds();
  const { tid: _tid, ...withoutTid } = claims;
  const { sub: _sub, ...withoutSub } = claims;
  const valid = await tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' });
  const built: [BadCredentialName, Credential][] = [
    ['no Authorization header', { authorization: undefined, secrets: [] }],
    ['Authorization: Basic', { authorization: 'Basic xyz', secrets: [] }],
    ['Basic with a valid JWT', { authorization: `Basic ${valid}`, secrets: bearer(valid).secrets }],
    ['Bearer with nothing after it', { authorization: 'Bearer', secrets: [] }],
    ['Bearer + garbage', { authorization: 'Bearer garbage-that-is-no-jwt-at-all', secrets: ['garbage-that-is-no-jwt-at-all'] }],
    ['Bearer + three garbage segments', bearer('aaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbb.cccccccccccccccccccc')],
    ['a tampered signature', bearer(tamperSignature(valid))],
    ['a token without its signature', bearer(valid.split('.').slice(0, 2).join('.') + '.')],
    ['a token that expired 120 s ago', bearer(await signed(claims, { iat: now - 600, exp: now - 120 }))],
    ['alg: none (unsecured JWT)', bearer(unsecured(claims))],
    ['HS256 with the wrong secret', bearer(await signed(claims, { secret: WRONG_SECRET }))],
    ['HS512 with the right secret (algorithm not pinned)', bearer(await signed(claims, { alg: 'HS512' }))],
    ['a token without exp', bearer(await signed(claims, { exp: null }))],
    ['a token over 8 KiB', bearer(await signed({ ...claims, padding: 'x'.repeat(9 * 1024) }))],
    ['a token without tid', bearer(await signed(withoutTid))],
    ['a token without sub', bearer(await signed(withoutSub))],
    ['a token with role "root"', bearer(await signed({ ...claims, role: 'root' }))],
    ['a token with an empty tid', bearer(await signed({ ...claims, tid: '' }))],
    ['a token with a 129-character tid', bearer(await signed({ ...claims, tid: 't'.repeat(129) }))],
    ['a token whose projects claim is not an object', bearer(await signed({ ...claims, projects: 'p1' }))],
    // An hour, not a minute: the tokens are made once, and with files running in parallel a
    // file's last test may run more than the 30 s clock tolerance after they were.
    ['a token not valid before an hour from now (nbf)', bearer(await signed({ ...claims, nbf: now + 3600 }))],
    ['RS256 in the header, signed with the HS256 secret (algorithm confusion)', bearer(withHeader({ alg: 'RS256', typ: 'JWT' }, claims))],
    ['two tokens in one header', { authorization: `Bearer ${valid} ${valid}`, secrets: bearer(valid).secrets }],
  ];
  expect(built.map(([name]) => name)).toEqual([...BAD_CREDENTIALS]);
  return new Map(built);
}

/** A 401 `unauthenticated` in the error envelope that echoes nothing of the credential; `what` names the request in failures. */
export function expectUnauthenticated(response: ApiResponse, credential: Credential, what = ''): void {
  const shown = `${what} ${response.status} ${JSON.stringify(response.body)}`;
  expect(response.status, shown).toBe(401);
  expect(response.body, shown).toEqual({
    error: { code: 'unauthenticated', message: expect.any(String), requestId: expect.any(String) },
  });
  expect(response.headers.get('x-request-id'), shown).toBe(response.body.error.requestId);
  const text = JSON.stringify(response.body);
  for (const secret of credential.secrets) expect(text, what).not.toContain(secret);
  for (const header of ['x-request-id', 'content-type', 'www-authenticate']) {
    for (const secret of credential.secrets) expect(response.headers.get(header) ?? '', `${what} ${header}`).not.toContain(secret);
  }
}
