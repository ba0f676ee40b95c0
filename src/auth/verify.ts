import { createRemoteJWKSet, decodeProtectedHeader, errors as joseErrors, type JWTVerifyGetKey, jwtVerify } from 'jose';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { claimsSchema } from './claims.ts';
import type { Principal } from './permissions.ts';

/** Tokens longer than this are refused before any parsing (DESIGN §3: a cheap bound on work). */
export const MAX_TOKEN_BYTES = 8 * 1024;
const CLOCK_TOLERANCE_SECONDS = 30;
/** Algorithms accepted from the IdP's JWKS; HS256 only with our own secret. Pinned, never `none`. */
const ASYMMETRIC_ALGORITHMS = ['RS256', 'ES256', 'EdDSA'];

export type TokenVerifier = (authorization: string | undefined) => Promise<Principal>;

const unauthenticated = (message: string) => new AppError('unauthenticated', message);

/**
 * Verifies `Authorization: Bearer <JWT>` and returns the principal it names. Every failure is
 * a 401 `unauthenticated` whose message says what kind of problem it was, never the token.
 */
export function createTokenVerifier(auth: Config['auth']): TokenVerifier {
  const secret = auth.jwtSecret ? new TextEncoder().encode(auth.jwtSecret) : undefined;
  const jwks: JWTVerifyGetKey | undefined = auth.jwksUrl ? createRemoteJWKSet(new URL(auth.jwksUrl)) : undefined;
  const options = {
    issuer: auth.issuer,
    audience: auth.audience,
    clockTolerance: CLOCK_TOLERANCE_SECONDS,
    requiredClaims: ['exp'],
  };

  return async (authorization) => {
    if (!authorization) throw unauthenticated('Missing Authorization: Bearer token');
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
    if (!match) throw unauthenticated('Authorization must be "Bearer <token>"');
    const token = match[1]!;
    if (Buffer.byteLength(token, 'utf8') > MAX_TOKEN_BYTES) throw unauthenticated('Token too large');

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
        throw new AppError('unavailable', "The token issuer's keys could not be fetched; try again");
      }
      throw unauthenticated(error instanceof joseErrors.JOSEError ? describeJoseError(error) : 'Token could not be verified');
    }

    const claims = claimsSchema.safeParse(payload);
    if (!claims.success) {
      const issue = claims.error.issues[0]!;
      throw unauthenticated(`Token claim ${issue.path.join('.') || 'payload'} is invalid: ${issue.message}`);
    }
    const { sub, tid, role, projects, orgs } = claims.data;
    return { tenantId: tid, sub, role, projects, orgs };
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
