import type { Principal } from '../auth/permissions.ts';

/** What a request carries through the middleware chain: kept small on purpose. */
export interface AppEnv {
  Variables: {
    requestId: string;
    /** Set by `authenticate` on /v1 routes. */
    principal?: Principal;
    /** The principal's tenant, for the request log. */
    tenantId?: string;
  };
}
