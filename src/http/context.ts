/** What a request carries through the middleware chain: kept small on purpose. */
export interface AppEnv {
  Variables: {
    requestId: string;
    /** Set once the caller is authenticated; the request log names it. */
    tenantId?: string;
  };
}
