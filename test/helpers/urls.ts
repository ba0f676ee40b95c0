/** The login role the tests' app connections use; `migrate` provisions it like a real one. */
export const TEST_APP_ROLE = 'mnemo_test_app';
export const TEST_APP_PASSWORD = 'mnemo-test-app';

/** The same server as `url`, another database and optionally another user. */
export function databaseUrl(url: string, database: string, as?: { user: string; password: string }): string {
  const next = new URL(url);
  next.pathname = `/${database}`;
  if (as) {
    next.username = encodeURIComponent(as.user);
    next.password = encodeURIComponent(as.password);
  }
  return next.toString();
}
