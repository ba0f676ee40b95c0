import { createHash } from 'node:crypto';
import {
  createRemoteJWKSet,
  customFetch,
  decodeProtectedHeader,
  errors as joseErrors,
  type FetchImplementation,
  type JWTVerifyGetKey,
  jwtVerify,
} from 'jose';
import type { Config } from '../foundation/config.ts';
import { AppError } from '../foundation/app-error.ts';
import { claimsSchema } from './claims.ts';
import type { Principal } from './permissions.ts';

/** Tokens longer than this are refused before any parsing (DESIGN §3: a cheap bound on work). */
export const MAX_TOKEN_BYTES = 8 * 1024;
const CLOCK_TOLERANCE_SECONDS = 30;
/**
 * The IdP's key set (jose's defaults, made explicit): used for 10 minutes, then fetched again; a
 * token with a `kid` not in it refetches it at most once per cooldown, so a flood of made-up kids
 * costs the IdP one fetch per 30 s, not one per request.
 */
export const JWKS_MAX_AGE_MS = 10 * 60_000;
export const JWKS_COOLDOWN_MS = 30_000;
export const JWKS_TIMEOUT_MS = 5_000;
/**
 * After a failed fetch (no answer, not 200, not a key set), requests that need the keys answer
 * 503 at once for this long instead of asking again: jose itself retries on every request, so
 * during an IdP outage each request (an attacker's too) would cost the IdP a fetch.
 */
export const JWKS_RETRY_AFTER_FAILURE_MS = 5_000;
/** Algorithms accepted from the IdP's JWKS; HS256 only with our own secret. Pinned, never `none`. */
const ASYMMETRIC_ALGORITHMS = ['RS256', 'ES256', 'EdDSA'];

export type TokenVerifier = (authorization: string | undefined) => Promise<Principal>;

/**
 * Tokens verified lately, by the SHA-256 of their text: an agent sends the same token with every
 * request, and verifying it again (HS256 through WebCrypto, the key imported each time) cost
 * ~1.1 ms of a ~4 ms write at 8 clients (docs/decisions/0040-single-write-round-trips.md). An entry is used
 * only while the token's own `exp` has not passed (jose's 30 s tolerance is not extended to the
 * cache), so nothing is accepted that a fresh check would refuse — tokens are not revocable in
 * Mnemo either way. Bounded: the oldest entries go first.
 */
export const VERIFIED_TOKENS_MAX = 10_000;

class VerifiedTokens {
  private readonly entries = new Map<string, { principal: Readonly<Principal>; expiresAtMs: number }>();

  get(token: string): Principal | undefined {
    const key = digest(token);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (Date.now() >= entry.expiresAtMs) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.principal;
  }

  set(token: string, principal: Principal, expSeconds: number): void {
    if (this.entries.size >= VERIFIED_TOKENS_MAX) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(digest(token), { principal: deepFreeze(principal), expiresAtMs: expSeconds * 1000 });
  }
}

const digest = (token: string) => createHash('sha256').update(token).digest('base64');

/** A principal handed to many requests must not be changed by one of them. */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

const unauthenticated = (message: string) => new AppError('unauthenticated', message);

/** The IdP's keys could not be had: the token may be fine, so 503 with `Retry-After`, not 401. */
export class TokenKeysUnavailable extends AppError {
  readonly retryAfterSeconds = Math.ceil(JWKS_RETRY_AFTER_FAILURE_MS / 1000);
  constructor() {
    super('unavailable', "The token issuer's keys could not be fetched; try again");
    this.name = 'TokenKeysUnavailable';
  }
}

/** Why the key set's fetch failed; never shown to a client. */
class KeySetFetchFailed extends Error {}

/**
 * The key set's fetch, for jose: anything but a 200 with a key set is a failure (jose would
 * answer a 500 from the IdP as a bad token, 401), and for JWKS_RETRY_AFTER_FAILURE_MS after a
 * failure it fails at once without asking.
 */
function keySetFetch(): FetchImplementation {
  let failedAt = Number.NEGATIVE_INFINITY;
  return async (url, init) => {
    if (Date.now() - failedAt < JWKS_RETRY_AFTER_FAILURE_MS) throw new KeySetFetchFailed('failed recently; not asking again yet');
    try {
      const response = await fetch(url, init);
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new KeySetFetchFailed(`answered ${response.status}`);
      }
      const text = await response.text();
      const keySet = JSON.parse(text) as { keys?: unknown };
      if (!Array.isArray(keySet?.keys)) throw new KeySetFetchFailed('not a JSON Web Key Set');
      return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
    } catch (error) {
      failedAt = Date.now();
      throw error;
    }
  };
}

/**
 * Verifies `Authorization: Bearer <JWT>` and returns the principal it names. Every failure is
 * a 401 `unauthenticated` whose message says what kind of problem it was, never the token.
 */
export function createTokenVerifier(auth: Config['auth']): TokenVerifier {
  const secret = auth.jwtSecret ? new TextEncoder().encode(auth.jwtSecret) : undefined;
  const jwks: JWTVerifyGetKey | undefined = auth.jwksUrl
    ? createRemoteJWKSet(new URL(auth.jwksUrl), {
        cacheMaxAge: JWKS_MAX_AGE_MS,
        cooldownDuration: JWKS_COOLDOWN_MS,
        timeoutDuration: JWKS_TIMEOUT_MS,
        [customFetch]: keySetFetch(),
      })
    : undefined;
  const options = {
    issuer: auth.issuer,
    audience: auth.audience,
    clockTolerance: CLOCK_TOLERANCE_SECONDS,
    requiredClaims: ['exp'],
  };
  const verified = new VerifiedTokens();

  return async (authorization) => {
    if (!authorization) throw unauthenticated('Missing Authorization: Bearer token');
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
    if (!match) throw unauthenticated('Authorization must be "Bearer <token>"');
    const token = match[1]!;
    if (Buffer.byteLength(token, 'utf8') > MAX_TOKEN_BYTES) throw unauthenticated('Token too large');
    const known = verified.get(token);
    if (known) return known;

    let algorithm: string | undefined;
    try {
      algorithm = decodeProtectedHeader(token).alg;
    } catch {
      throw unauthenticated('Malformed token');
    }

    let payload: unknown;
    const usingJwks = algorithm !== 'HS256';
    try {
      if (algorithm === 'HS256' && secret) {
        ({ payload } = await jwtVerify(token, secret, { ...options, algorithms: ['HS256'] }));
      } else if (algorithm && ASYMMETRIC_ALGORITHMS.includes(algorithm) && jwks) {
        ({ payload } = await jwtVerify(token, jwks, { ...options, algorithms: ASYMMETRIC_ALGORITHMS }));
      } else {
        throw unauthenticated(`Token algorithm ${JSON.stringify(algorithm ?? null)} is not accepted`);
      }
    } catch (error) {
      if (error instanceof AppError) throw error;
      // The IdP's key set could not be fetched: the token may be fine, so this is not a 401.
      if (usingJwks && (error instanceof joseErrors.JWKSTimeout || !(error instanceof joseErrors.JOSEError))) {
        throw new TokenKeysUnavailable();
      }
      throw unauthenticated(error instanceof joseErrors.JOSEError ? describeJoseError(error) : 'Token could not be verified');
    }

    const claims = claimsSchema.safeParse(payload);
    if (!claims.success) {
      const issue = claims.error.issues[0]!;
      throw unauthenticated(`Token claim ${issue.path.join('.') || 'payload'} is invalid: ${issue.message}`);
    }
    const { sub, tid, role, projects, orgs, mcp } = claims.data;
    const principal: Principal = { tenantId: tid, sub, role, projects, orgs, ...(mcp?.scope && { mcpScope: mcp.scope }) };
    // requiredClaims makes exp present; jose has checked it is a number.
    verified.set(token, principal, (payload as { exp: number }).exp);
    return principal;
  };
}

function describeJoseError(error: InstanceType<typeof joseErrors.JOSEError>): string {
  if (error instanceof joseErrors.JWTExpired) return 'Token expired';
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `Token claim ${error.claim} is invalid`;
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'Token signature is invalid';
  if (error instanceof joseErrors.JWKSNoMatchingKey) return 'No key of the issuer matches the token';
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'Token algorithm is not accepted';
  return 'Token could not be verified';
}
