/** The login role the tests' app connections use; `migrate` provisions it like a real one. */
export const TEST_APP_ROLE = 'mnemo_test_app';
export const TEST_APP_PASSWORD = 'mnemo-test-app';

/** The same server as `url`, another database and optionally another user. */
export { withDatabase as databaseUrl } from '../../src/db/url.ts';
