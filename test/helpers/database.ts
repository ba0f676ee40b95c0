import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import postgres, { type Sql } from 'postgres';
import { inject } from 'vitest';
import { connect, type Database } from '../../src/db/client.ts';
import type { CitusNodes } from '../citus/helpers/cluster.ts';
import { databaseUrl, TEST_APP_PASSWORD, testAppRole } from './urls.ts';
import { sleep } from '../../support/wait.ts';

export interface TestDatabase {
  name: string;
  /** The app role's URL (in the database's app group: no owner, no superuser, no BYPASSRLS). */
  appUrl: string;
  /** The owner's URL, for what a test must do behind the app's back. */
  adminUrl: string;
  /** Connected as the app role, as the API and workers are. */
  app: Database;
  /** Connected as the owner. */
  admin: Sql;
  drop(): Promise<void>;
}

const server = () => inject('adminUrl');

/** The run's app login role, as migrate provisioned it for the template. */
export const appLogin = () => ({ user: testAppRole(inject('runId')), password: TEST_APP_PASSWORD });

/** An empty database (no migrations), for tests of the migrations themselves. */
export async function createEmptyDatabase(): Promise<{ name: string; adminUrl: string; appUrl: string; drop(): Promise<void> }> {
  if (inject('postgres') === 'embedded') return startEmbeddedDatabase();
  const name = `mnemo_t_${inject('runId')}_${randomBytes(4).toString('hex')}`;
  const maintenance = postgres(server(), { max: 1, onnotice: () => {} });
  await maintenance.unsafe(`create database "${name}"`);
  await maintenance.end();
  return {
    name,
    adminUrl: databaseUrl(server(), name),
    appUrl: databaseUrl(server(), name, appLogin()),
    drop: () => dropDatabase(name),
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
  const maintenance = postgres(server(), { max: 1, onnotice: () => {} });
  try {
    // Copying a template fails while another session is briefly connected to it; retry.
    for (let attempt = 1; ; attempt++) {
      try {
        await maintenance.unsafe(`create database "${name}" template "${inject('templateDatabase')}"`);
        break;
      } catch (error) {
        if (attempt >= 20 || !String((error as Error).message).includes('being accessed by other users')) throw error;
        await sleep(100 * attempt);
      }
    }
  } finally {
    await maintenance.end();
  }
  const appUrl = databaseUrl(server(), name, appLogin());
  const adminUrl = databaseUrl(server(), name);
  const app = connect(appUrl, { max: 5, applicationName: 'mnemo-test' });
  const admin = postgres(adminUrl, { max: 2, onnotice: () => {} });
  return {
    name,
    appUrl,
    adminUrl,
    app,
    admin,
    drop: async () => {
      await app.close();
      await admin.end();
      await dropDatabase(name);
    },
  };
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
export function openTestDatabase(database: { name: string; adminUrl: string; appUrl: string; drop(): Promise<void> }, { max = 5 } = {}): TestDatabase {
  const app = connect(database.appUrl, { max, applicationName: 'mnemo-test' });
  const admin = postgres(database.adminUrl, { max: 2, onnotice: () => {} });
  return {
    name: database.name,
    appUrl: database.appUrl,
    adminUrl: database.adminUrl,
    app,
    admin,
    drop: async () => {
      await app.close();
      await admin.end();
      await database.drop();
    },
  };
}

async function dropDatabase(name: string): Promise<void> {
  const maintenance = postgres(server(), { max: 1, onnotice: () => {} });
  try {
    await maintenance.unsafe(`drop database if exists "${name}" with (force)`);
  } finally {
    await maintenance.end();
  }
}
