import { SignJWT } from 'jose';
import type { z } from 'zod';
import { type Claims, claimsSchema } from './claims.ts';

export interface DevTokenOptions {
  secret: string;
  claims: z.input<typeof claimsSchema>;
  /** Lifetime in seconds. */
  ttlSeconds: number;
  issuer?: string | undefined;
  audience?: string | undefined;
  now?: Date;
}

/**
 * Mints an HS256 token the API accepts when it runs with the same MNEMO_JWT_SECRET. For
 * development, tests and simple deployments; production tokens come from the tenant's IdP.
 */
export async function mintDevToken(options: DevTokenOptions): Promise<{ token: string; claims: Claims }> {
  const claims = claimsSchema.parse(options.claims);
  const issuedAt = Math.floor((options.now ?? new Date()).getTime() / 1000);
  let jwt = new SignJWT({ tid: claims.tid, role: claims.role, projects: claims.projects, orgs: claims.orgs, ...(claims.mcp && { mcp: claims.mcp }) })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(claims.sub)
    .setIssuedAt(issuedAt)
    .setExpirationTime(issuedAt + options.ttlSeconds);
  if (options.issuer) jwt = jwt.setIssuer(options.issuer);
  if (options.audience) jwt = jwt.setAudience(options.audience);
  const token = await jwt.sign(new TextEncoder().encode(options.secret));
  return { token, claims };
}
