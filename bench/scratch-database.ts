/**
 * A scratch database for one bench module: created and migrated as the test setup does (the
 * owner from DATABASE_ADMIN_URL or DATABASE_URL runs the migrations, and a login role of this run
 * joins the database's app group, so the measured code runs under row-level security as the API's
 * does), then dropped with its roles, whatever happened.
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import postgres, { type Sql } from 'postgres';
import { connect, type Database } from '../src/db/client.ts';
import { migrate } from '../src/db/migrate.ts';
import { withDatabase } from '../src/db/url.ts';

export interface ScratchDatabase {
  name: string;
  appUrl: string;
  /** As the app role (row-level security applies). */
  app: Database;
  /** As the owner: bulk loads, ANALYZE, EXPLAIN. */
  owner: Sql;
}

export async function withScratchDatabase<T>(label: string, use: (database: ScratchDatabase) => Promise<T>): Promise<T> {
  const serverUrl = process.env.DATABASE_ADMIN_URL ?? process.env.DATABASE_URL;
  if (!serverUrl) throw new Error('the bench needs DATABASE_ADMIN_URL or DATABASE_URL: a role that may create databases and roles');
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const name = `mnemo_bench_${runId}_${label}`.toLowerCase();
  const appRole = { user: `mnemo_bench_${runId}`, password: randomBytes(12).toString('hex') };
  const server = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await server.unsafe(`create database "${name}"`);
  let app: Database | undefined;
  let owner: Sql | undefined;
  let appGroup: string | undefined;
  try {
    const appUrl = withDatabase(serverUrl, name, appRole);
    ({ appGroup } = await migrate({ adminUrl: withDatabase(serverUrl, name), appUrl }));
    app = connect(appUrl, { max: 10, applicationName: `mnemo-bench-${label}` });
    owner = postgres(withDatabase(serverUrl, name), { max: 2, onnotice: () => {} });
    return await use({ name, appUrl, app, owner });
  } finally {
    await app?.close().catch(() => {});
    await owner?.end({ timeout: 5 }).catch(() => {});
    await server.unsafe(`drop database if exists "${name}" with (force)`);
    // The app group migrate created for this database, then the login role.
    for (const role of [appGroup, appRole.user]) if (role) await server.unsafe(`drop role if exists "${role}"`);
    await server.end({ timeout: 5 });
  }
}

/** The machine's 1-minute load average, reported beside every timing. */
export const loadAverage = (): number => Math.round(loadavg()[0]! * 100) / 100;
