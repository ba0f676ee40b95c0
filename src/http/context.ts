/** What a request carries through the middleware chain: kept small on purpose. */
export interface AppEnv {
  Variables: {
    requestId: string;
  };
}
