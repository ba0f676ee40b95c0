import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { inject } from 'vitest';
import { type ConnectedDatabase, connectDatabase, createDatabase, type DatabaseUrls, dropDatabase } from '../../support/database.ts';
import type { CitusNodes } from '../citus/helpers/cluster.ts';
import { databaseUrl, TEST_APP_PASSWORD, testAppRole } from '../../support/urls.ts';

/**
 * A test file's database: its URLs, connections as the app role and as the owner, and `drop()`
 * (support/database.ts).
 */
export type TestDatabase = ConnectedDatabase;

const server = () => inject('adminUrl');

/** The run's app login role, as migrate provisioned it for the template. */
export const appLogin = () => ({ user: testAppRole(inject('runId')), password: TEST_APP_PASSWORD });

/** An empty database (no migrations), for tests of the migrations themselves. */
export async function createEmptyDatabase(): Promise<DatabaseUrls & { drop(): Promise<void> }> {
  if (inject('postgres') === 'embedded') return startEmbeddedDatabase();
  const name = `mnemo_t_${inject('runId')}_${randomBytes(4).toString('hex')}`;
  await createDatabase(server(), name);
  return {
    name,
    adminUrl: databaseUrl(server(), name),
    appUrl: databaseUrl(server(), name, appLogin()),
    drop: () => dropDatabase(server(), name),
  };
}

/**
 * A migrated database of this test file's own, copied from the run's template. Copies are not
 * migrated again, so they share the template's app group (mnemo_app_group() says so in each).
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  if (inject('postgres') === 'embedded') return openTestDatabase(await loadEmbeddedDatabase());
  const name = `mnemo_t_${inject('runId')}_${randomBytes(4).toString('hex')}`;
  const citusNodes = inject('citusNodes');
  if (citusNodes) return createDistributedTestDatabase(citusNodes, name);
  await createDatabase(server(), name, { template: inject('templateDatabase') });
  return openTestDatabase({
    name,
    adminUrl: databaseUrl(server(), name),
    appUrl: databaseUrl(server(), name, appLogin()),
    drop: () => dropDatabase(server(), name),
  });
}

/**
 * Under `npm run test:citus` (test/setup/citus.ts): a database of its own on the private Citus
 * cluster, distributed by `mnemo migrate` (a template copy would not copy the workers' shards).
 */
async function createDistributedTestDatabase(nodes: CitusNodes, name: string): Promise<TestDatabase> {
  // Loaded only here: npm test never needs the Citus helpers.
  const { createCitusDatabase } = await import('../citus/helpers/cluster.ts');
  const database = await createCitusDatabase(nodes, name, appLogin());
  return openTestDatabase(database);
}

/**
 * Under an embedded run (test/setup/global.ts): a PGlite of this file's own, loaded from the run's
 * migrated dump and served on a loopback port by the product's wire server, so the test's owner
 * and app connections, and the processes it starts, reach it by URL as they reach a server.
 */
async function loadEmbeddedDatabase() {
  templateDump ??= readFile(inject('templateDatabase')).then((bytes) => new Blob([bytes]));
  return startEmbeddedDatabase(await templateDump);
}

/** The dump, read once per worker: the files a worker runs share its modules (isolate: false). */
let templateDump: Promise<Blob> | undefined;

/** A PGlite served on a loopback port: from a dump, or empty (no migrations) without one. */
async function startEmbeddedDatabase(dump?: Blob) {
  const [{ createPGlite }, { startWireServer }] = await Promise.all([import('../../src/embedded/pglite.ts'), import('../../src/embedded/wire-server.ts')]);
  const pglite = await createPGlite(dump ? { loadDataDir: dump } : {});
  const server = await startWireServer(pglite);
  const at = `postgres://postgres@127.0.0.1:${server.port}/postgres`;
  return {
    // PGlite's one database: what current_database() says, and what the app group is named after.
    name: 'postgres',
    adminUrl: at,
    appUrl: databaseUrl(at, 'postgres', appLogin()),
    drop: async () => {
      await server.close();
      await pglite.close();
    },
  };
}

/** Connections to a database made and migrated elsewhere, as createTestDatabase gives them. */
export function openTestDatabase(database: DatabaseUrls & { drop(): Promise<void> }, { max = 5 } = {}): TestDatabase {
  return connectDatabase(database, { app: max, admin: 2, applicationName: 'mnemo-test' });
}
