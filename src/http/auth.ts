import type { Context, MiddlewareHandler } from 'hono';
import type { Principal } from '../auth/permissions.ts';
import type { TokenVerifier } from '../auth/verify.ts';
import type { AppEnv } from './context.ts';

/** Verifies the bearer token and puts the principal in the context; 401 otherwise. */
export const authenticate =
  (verify: TokenVerifier): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const principal = await verify(c.req.header('authorization'));
    c.set('principal', principal);
    c.set('tenantId', principal.tenantId);
    await next();
  };

/** The authenticated principal of a /v1 request (authenticate ran before any route). */
export function principalOf(c: Context<AppEnv>): Principal {
  const principal = c.get('principal');
  if (!principal) throw new Error('route reached without authentication');
  return principal;
}
