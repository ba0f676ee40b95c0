/**
 * The login role the tests' app connections use; `migrate` provisions it like a real one. A run's
 * own is mnemo_test_app_<runId> (testAppRole), so the global teardown drops exactly its roles and
 * leaves those of a run going on at the same time; private servers (support/postgres-cluster.ts) use it as is.
 */
export const TEST_APP_ROLE = 'mnemo_test_app';
export const TEST_APP_PASSWORD = 'mnemo-test-app';

/** The app login role of the test run `runId`; other login roles of the run extend it. */
export function testAppRole(runId: string): string {
  return `${TEST_APP_ROLE}_${runId}`;
}

/** The same server as `url`, another database and optionally another user. */
export { withDatabase as databaseUrl } from '../src/db/url.ts';
