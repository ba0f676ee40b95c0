/**
 * Finds the PostgreSQL and Redis the tests run against, migrates a template database once, and
 * tells each test file how to make its own copy (test/helpers/database.ts). A bare clone needs
 * nothing: `npm install && npm test` runs on what the product itself ships.
 *
 * PostgreSQL:
 * 1. DATABASE_URL set: that server. It must be able to create databases and roles (the tests
 *    provision the app role, as `mnemo migrate` does).
 * 2. MNEMO_TEST_CONTAINERS=1 with a Docker engine: pgvector/pgvector:pg17 and redis:7 via testcontainers.
 * 3. Otherwise: the embedded PostgreSQL `npm start` uses (PGlite with pgvector), migrated once into
 *    a dump that each test file loads into a PGlite of its own (test/setup/embedded-template.ts).
 * Redis: REDIS_URL when set; else one on its usual address (127.0.0.1:6379) when it answers; else
 * none, and the product's in-process job path runs what BullMQ workers would.
 * Tests that cannot mean anything without a server or Redis say so (test/helpers/needs.ts), and
 * the run's last line names them (test/setup/needs-reporter.ts).
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { Redis } from 'ioredis';
import { projectRoot } from '../../support/processes.ts';
import { buildEntryBundles } from './entry-bundles.ts';
import { createEmbeddedTemplate } from './embedded-template.ts';
import { createMigratedDatabase } from '../../support/database.ts';
import { TEST_APP_PASSWORD, testAppRole } from '../../support/urls.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** What the tests' databases are: copies on a PostgreSQL server, or embedded PGlites. */
    postgres: 'server' | 'embedded';
    /** The server's owner URL ('' when embedded). */
    adminUrl: string;
    /** '' when no Redis answers: jobs then run in-process. */
    redisUrl: string;
    /** The migrated template: a database on the server, or the embedded dump's file. */
    templateDatabase: string;
    runId: string;
    /** Where the run's bundled entries are (test/setup/entry-bundles.ts); unset: processes run through tsx. */
    entryBundles: string | undefined;
  }
}

/** Where Redis usually listens on a developer's machine, tried when REDIS_URL is not set. */
const LOCAL_REDIS = 'redis://127.0.0.1:6379';

interface Services {
  adminUrl: string;
  redisUrl: string;
  stop: () => Promise<void>;
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

/** Whether a Redis answers PING at `url` within a second. */
async function redisAnswers(url: string): Promise<boolean> {
  const redis = new Redis(url, { connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

async function resolveRedis(): Promise<string> {
  if (process.env.REDIS_URL) return process.env.REDIS_URL;
  return (await redisAnswers(LOCAL_REDIS)) ? LOCAL_REDIS : '';
}

export default async function setup(project: TestProject) {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  project.provide('runId', runId);
  const { DATABASE_URL, MNEMO_TEST_CONTAINERS } = process.env;
  const teardown =
    DATABASE_URL
      ? await onServer(project, { adminUrl: DATABASE_URL, redisUrl: await resolveRedis(), stop: async () => {} }, runId)
      : MNEMO_TEST_CONTAINERS === '1'
        ? await onServer(project, await startContainers(), runId)
        : await onEmbedded(project, await resolveRedis(), runId);
  const bundles = await buildEntryBundles(projectRoot, runId);
  project.provide('entryBundles', bundles.dir);
  return async () => {
    bundles.remove();
    await teardown();
  };
}

/** Each test file a PGlite of its own, loaded from one migrated dump. */
async function onEmbedded(project: TestProject, redisUrl: string, runId: string): Promise<() => Promise<void>> {
  const template = await createEmbeddedTemplate(runId);
  project.provide('postgres', 'embedded');
  project.provide('adminUrl', '');
  project.provide('redisUrl', redisUrl);
  project.provide('templateDatabase', template.file);
  return async () => template.remove();
}

async function onServer(project: TestProject, services: Services, runId: string): Promise<() => Promise<void>> {
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
    await createMigratedDatabase(services.adminUrl, templateDatabase, { user: testAppRole(runId), password: TEST_APP_PASSWORD });
  } catch (error) {
    await cleanUp().catch(() => {});
    await admin.end();
    await services.stop();
    throw error;
  }

  project.provide('postgres', 'server');
  project.provide('adminUrl', services.adminUrl);
  project.provide('redisUrl', services.redisUrl);
  project.provide('templateDatabase', templateDatabase);

  return async () => {
    try {
      await cleanUp();
    } finally {
      await admin.end();
    }
    await services.stop();
  };
}
