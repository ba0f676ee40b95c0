/**
 * Databases the tests and the benchmarks make on a PostgreSQL server: created (empty, a copy of a
 * template, or migrated as `mnemo migrate` migrates one), connected as the app role and as the
 * owner, and dropped. A bench's scratch database is all three: created and migrated with a login
 * role of its own joining the database's app group, so the measured code runs under row-level
 * security as the API's does, then dropped with its roles, whatever happened.
 */
import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { connect, type Database } from '../src/db/client.ts';
import { migrate } from '../src/db/migrate.ts';
import { withDatabase } from '../src/db/url.ts';
import { sleep } from './wait.ts';

export interface DatabaseUrls {
  name: string;
  /** The owner's URL, for what a test or a bench does behind the app's back (bulk loads, ANALYZE). */
  adminUrl: string;
  /** The app role's URL (in the database's app group: no owner, no superuser, no BYPASSRLS). */
  appUrl: string;
}

export interface ConnectedDatabase extends DatabaseUrls {
  /** Connected as the app role, as the API and workers are: row-level security applies. */
  app: Database;
  /** Connected as the owner. */
  admin: Sql;
  /** Closes both, then drops the database and what its maker made for it; safe to call twice. */
  drop(): Promise<void>;
}

export interface Connections {
  /** Connections of the app role's pool. */
  app: number;
  /** Connections of the owner's pool. */
  admin: number;
  applicationName: string;
}

async function onServer<T>(serverUrl: string, run: (server: Sql) => Promise<T>): Promise<T> {
  const server = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    return await run(server);
  } finally {
    await server.end({ timeout: 5 });
  }
}

/** Creates database `name` on the server at `serverUrl`: empty, or a copy of `template`. */
export async function createDatabase(serverUrl: string, name: string, { template }: { template?: string } = {}): Promise<void> {
  await onServer(serverUrl, async (server) => {
    if (template === undefined) {
      await server.unsafe(`create database "${name}"`);
      return;
    }
    // Copying a template fails while another session is briefly connected to it; retry.
    for (let attempt = 1; ; attempt++) {
      try {
        await server.unsafe(`create database "${name}" template "${template}"`);
        return;
      } catch (error) {
        if (attempt >= 20 || !String((error as Error).message).includes('being accessed by other users')) throw error;
        await sleep(100 * attempt);
      }
    }
  });
}

/** Drops database `name`, its sessions ended, then each of `roles` (an undefined one is skipped). */
export async function dropDatabase(serverUrl: string, name: string, roles: readonly (string | undefined)[] = []): Promise<void> {
  await onServer(serverUrl, async (server) => {
    await server.unsafe(`drop database if exists "${name}" with (force)`);
    for (const role of roles) if (role) await server.unsafe(`drop role if exists "${role}"`);
  });
}

/**
 * Creates `name` and migrates it as `mnemo migrate` does: the owner (the user of `serverUrl`)
 * applies the migrations and provisions `login` as a member of the database's app group.
 */
export async function createMigratedDatabase(
  serverUrl: string,
  name: string,
  login: { user: string; password: string },
): Promise<DatabaseUrls & { appGroup: string }> {
  await createDatabase(serverUrl, name);
  const urls = { name, adminUrl: withDatabase(serverUrl, name), appUrl: withDatabase(serverUrl, name, login) };
  const { appGroup } = await migrate({ adminUrl: urls.adminUrl, appUrl: urls.appUrl });
  return { ...urls, appGroup };
}

/** Pools on a database made elsewhere; `drop()` closes them, then runs the database's own drop. */
export function connectDatabase(database: DatabaseUrls & { drop(): Promise<void> }, connections: Connections): ConnectedDatabase {
  const app = connect(database.appUrl, { max: connections.app, applicationName: connections.applicationName });
  const admin = postgres(database.adminUrl, { max: connections.admin, onnotice: () => {} });
  let dropped: Promise<void> | undefined;
  return {
    name: database.name,
    appUrl: database.appUrl,
    adminUrl: database.adminUrl,
    app,
    admin,
    drop: () =>
      (dropped ??= (async () => {
        await app.close();
        await admin.end({ timeout: 5 });
        await database.drop();
      })()),
  };
}

/**
 * A scratch database, `mnemo_bench_<run>_<label>`: created and migrated with a login role of the
 * run's own, then connected. `whenCreated` is given its name and drop before anything is made (a Ctrl-C
 * during the migrations can still remove it); `drop()` closes the pools, then removes the
 * database, its app group and the login role.
 */
export async function createScratchDatabase(
  serverUrl: string,
  label: string,
  connections: Connections,
  whenCreated: (name: string, drop: () => Promise<void>) => void = () => {},
): Promise<ConnectedDatabase> {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const name = `mnemo_bench_${runId}_${label}`.toLowerCase();
  const login = { user: `mnemo_bench_${runId}`, password: randomBytes(12).toString('hex') };
  // migrate names the app group after the database (drizzle/0007), and says which once it has run.
  let appGroup = `mnemo_app_${name}`;
  let removed: Promise<void> | undefined;
  const remove = () => (removed ??= dropDatabase(serverUrl, name, [appGroup, login.user]));
  let database: ConnectedDatabase | undefined;
  whenCreated(name, () => (database ? database.drop() : remove()));
  let migrated: DatabaseUrls & { appGroup: string };
  try {
    migrated = await createMigratedDatabase(serverUrl, name, login);
  } catch (error) {
    await remove().catch(() => {});
    throw error;
  }
  appGroup = migrated.appGroup;
  database = connectDatabase({ ...migrated, drop: remove }, connections);
  return database;
}
