import type { Context, MiddlewareHandler } from 'hono';
import type { Principal } from '../auth/permissions.ts';
import { TokenKeysUnavailable, type TokenVerifier } from '../auth/verify.ts';
import { phase } from '../foundation/request-timing.ts';
import type { AppEnv } from './app-env.ts';

/** Verifies the bearer token and puts the principal in the context; 401 otherwise. */
export const authenticate =
  (verify: TokenVerifier): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    let principal: Principal;
    try {
      principal = await phase('auth', () => verify(c.req.header('authorization')));
    } catch (error) {
      // The IdP's keys are unavailable: say when to come back (the verifier asks again by then).
      if (error instanceof TokenKeysUnavailable) c.header('Retry-After', String(error.retryAfterSeconds));
      throw error;
    }
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
