/**
 * Finds (or starts) a real PostgreSQL with pgvector and a real Redis, migrates a template
 * database once, and tells each test file how to make its own copy (test/helpers/database.ts).
 *
 * 1. DATABASE_URL and REDIS_URL set: used as they are. DATABASE_URL must be able to create
 *    databases and roles (the tests provision the app role, as `mnemo migrate` does).
 * 2. Otherwise, with a Docker engine: pgvector/pgvector:pg17 and redis:7 via testcontainers.
 * 3. Otherwise: stop with one line saying what to set.
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../src/db/migrate.ts';
import { projectRoot } from '../helpers/process.ts';
import { buildEntryBundles } from './entry-bundles.ts';
import { databaseUrl, TEST_APP_PASSWORD, testAppRole } from '../helpers/urls.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string;
    redisUrl: string;
    templateDatabase: string;
    runId: string;
    /** Where the run's bundled entries are (test/setup/entry-bundles.ts); unset: processes run through tsx. */
    entryBundles: string | undefined;
  }
}

interface Services {
  adminUrl: string;
  redisUrl: string;
  stop: () => Promise<void>;
}

async function dockerAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

async function startContainers(): Promise<Services> {
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const { RedisContainer } = await import('@testcontainers/redis');
  const [pg, redis] = await Promise.all([
    new PostgreSqlContainer('pgvector/pgvector:pg17').start(),
    new RedisContainer('redis:7').start(),
  ]);
  return {
    adminUrl: pg.getConnectionUri(),
    redisUrl: redis.getConnectionUrl(),
    stop: async () => {
      await Promise.all([pg.stop(), redis.stop()]);
    },
  };
}

async function resolveServices(): Promise<Services> {
  const { DATABASE_URL, REDIS_URL } = process.env;
  if (DATABASE_URL && REDIS_URL) return { adminUrl: DATABASE_URL, redisUrl: REDIS_URL, stop: async () => {} };
  if (await dockerAnswers()) return startContainers();
  throw new Error(
    'Tests need PostgreSQL with pgvector and Redis: set DATABASE_URL (a role that may create databases and roles) and REDIS_URL, or start a Docker engine for testcontainers',
  );
}

export default async function setup(project: TestProject) {
  const services = await resolveServices();
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const templateDatabase = `mnemo_t_${runId}_template`;

  const admin = postgres(services.adminUrl, { max: 1, onnotice: () => {} });
  const dropRunDatabases = async () => {
    const rows = await admin<{ datname: string }[]>`
      select datname from pg_database where datname like ${`mnemo_t_${runId}_%`}`;
    for (const { datname } of rows) await admin.unsafe(`drop database if exists "${datname}" with (force)`);
  };
  // Roles are cluster-wide and outlive the databases: the app groups of the run's databases
  // (mnemo_app_mnemo_t_<runId>_…), its login roles, and mnemo_app if the run's migrations created it.
  const [legacyGroup] = await admin<{ existed: boolean }[]>`
    select exists (select from pg_roles where rolname = 'mnemo_app') as existed`;
  const dropRunRoles = async () => {
    const roles = await admin<{ rolname: string }[]>`
      select rolname from pg_roles
      where starts_with(rolname, ${`mnemo_app_mnemo_t_${runId}_`}) or starts_with(rolname, ${testAppRole(runId)})
      order by rolcanlogin, rolname`;
    if (!legacyGroup?.existed) roles.push({ rolname: 'mnemo_app' });
    for (const { rolname } of roles) {
      await admin.unsafe(`drop role if exists "${rolname}"`).catch((error: unknown) => {
        // Another run on the same server may be using mnemo_app right now: it keeps it.
        if (rolname !== 'mnemo_app') throw error;
      });
    }
  };
  const cleanUp = async () => {
    await dropRunDatabases();
    await dropRunRoles();
  };
  try {
    await admin.unsafe(`create database "${templateDatabase}"`);
    await migrate({
      adminUrl: databaseUrl(services.adminUrl, templateDatabase),
      appUrl: databaseUrl(services.adminUrl, templateDatabase, { user: testAppRole(runId), password: TEST_APP_PASSWORD }),
    });
  } catch (error) {
    await cleanUp().catch(() => {});
    await admin.end();
    await services.stop();
    throw error;
  }

  project.provide('adminUrl', services.adminUrl);
  project.provide('redisUrl', services.redisUrl);
  project.provide('templateDatabase', templateDatabase);
  project.provide('runId', runId);
  const bundles = await buildEntryBundles(projectRoot, runId);
  project.provide('entryBundles', bundles.dir);

  return async () => {
    bundles.remove();
    try {
      await cleanUp();
    } finally {
      await admin.end();
    }
    await services.stop();
  };
}
