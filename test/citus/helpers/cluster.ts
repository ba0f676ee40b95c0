/**
 * A private Citus cluster on loopback: a coordinator and `workers` worker nodes, each a private
 * PostgreSQL cluster (support/postgres-cluster.ts) loading Citus, trust authentication,
 * the `postgres` OS user. Needs Citus installed for the machine's PostgreSQL
 * (scripts/install-citus.sh builds it from the source tarball CITUS_TARBALL names).
 *
 * A database is made as an operator would make one: created on every node with the `citus`
 * extension, the workers added to the coordinator, then `mnemo migrate` on the coordinator, which
 * distributes the tables (src/db/distribute.ts). The app's login role is then refused any
 * statement that would run on more than one shard (`citus.multi_task_query_log_level = error`):
 * every test that runs against such a database proves that each of its tenant statements is a
 * router query, one tenant on one shard.
 */
import { existsSync } from 'node:fs';
import postgres from 'postgres';
import { migrate, type MigrateResult } from '../../../src/db/migrate.ts';
import { type PostgresCluster, startPostgresCluster } from '../../../support/postgres-cluster.ts';
import { databaseUrl } from '../../../support/urls.ts';

const pgLib = () => `${process.env.PG_LIB ?? '/usr/lib/postgresql/15/lib'}/citus.so`;

export interface CitusDatabase {
  name: string;
  /** The owner (superuser) URL on the coordinator. */
  adminUrl: string;
  /** The app role's URL on the coordinator, as the API and workers connect. */
  appUrl: string;
  /** The owner's URL of the same database on each worker node. */
  workerAdminUrls: string[];
  migration: MigrateResult;
  drop(): Promise<void>;
}

/** Where a cluster's nodes listen (serialisable, so vitest can hand it from its global setup to test files). */
export interface CitusNodes {
  coordinator: { adminUrl: string; port: number };
  workers: { adminUrl: string; port: number }[];
}

export interface CitusCluster {
  coordinator: PostgresCluster;
  workers: PostgresCluster[];
  nodes: CitusNodes;
  /** Creates a distributed database and migrates it; the app login role is provisioned with `login`. */
  createDatabase(name: string, login: { user: string; password: string }): Promise<CitusDatabase>;
  remove(): Promise<void>;
}

/** The nodes' server settings, also those of the single PostgreSQL the load test compares with. */
export const SERVER_SETTINGS = [
  // Each coordinator backend opens connections to the workers; each test file has a few pools.
  'max_connections = 300',
  'shared_buffers = 64MB',
  'fsync = off',
  'synchronous_commit = off',
];

/** Settings every node needs besides: Citus loaded; logical WAL, which Citus's online shard moves need (these tables move with block_writes instead: docs/operations/scaling-and-citus.md, "Citus"). */
const NODE_SETTINGS = [
  ...SERVER_SETTINGS,
  "shared_preload_libraries = 'citus'",
  'wal_level = logical',
  'max_replication_slots = 20',
  'max_wal_senders = 20',
];

export async function startCitusCluster({ workers = 2, shardCount = 8 }: { workers?: number; shardCount?: number } = {}): Promise<CitusCluster> {
  if (!existsSync(pgLib())) {
    throw new Error(`Citus is not installed (no ${pgLib()}): run scripts/install-citus.sh (CITUS_TARBALL names the source tarball)`);
  }
  const started: PostgresCluster[] = [];
  try {
    // Fewer shards than the default 32: the same routing on a test's scale, faster to create and move.
    started.push(await startPostgresCluster({ label: 'citus', settings: [...NODE_SETTINGS, `citus.shard_count = ${shardCount}`] }));
    for (let i = 0; i < workers; i++) started.push(await startPostgresCluster({ label: 'citus', settings: NODE_SETTINGS }));
  } catch (error) {
    await Promise.all(started.map((node) => node.remove().catch(() => {})));
    throw error;
  }
  const [coordinator, ...workerNodes] = started as [PostgresCluster, ...PostgresCluster[]];

  const nodes: CitusNodes = {
    coordinator: { adminUrl: coordinator.adminUrl, port: coordinator.port },
    workers: workerNodes.map((node) => ({ adminUrl: node.adminUrl, port: node.port })),
  };
  return {
    coordinator,
    workers: workerNodes,
    nodes,
    createDatabase: (name, login) => createCitusDatabase(nodes, name, login),
    remove: async () => {
      await Promise.all(started.map((node) => node.remove().catch(() => {})));
    },
  };
}

async function onNode<T>(url: string, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const allNodes = (nodes: CitusNodes) => [nodes.coordinator, ...nodes.workers];

export async function dropCitusDatabase(nodes: CitusNodes, name: string): Promise<void> {
  for (const node of allNodes(nodes)) {
    await onNode(node.adminUrl, (sql) => sql.unsafe(`drop database if exists "${name}" with (force)`));
  }
}

/**
 * A distributed database, made as an operator makes one: created on every node with the `citus`
 * extension, the workers added to the coordinator, then `mnemo migrate` on the coordinator.
 */
export async function createCitusDatabase(nodes: CitusNodes, name: string, login: { user: string; password: string }): Promise<CitusDatabase> {
  const adminUrl = databaseUrl(nodes.coordinator.adminUrl, name);
  const workerAdminUrls = nodes.workers.map((node) => databaseUrl(node.adminUrl, name));
  try {
    for (const node of allNodes(nodes)) {
      await onNode(node.adminUrl, (sql) => sql.unsafe(`create database "${name}"`));
      await onNode(databaseUrl(node.adminUrl, name), (sql) => sql`create extension citus`);
    }
    await onNode(adminUrl, async (sql) => {
      await sql`select citus_set_coordinator_host('127.0.0.1', ${nodes.coordinator.port})`;
      for (const node of nodes.workers) await sql`select citus_add_node('127.0.0.1', ${node.port})`;
    });
    const appUrl = databaseUrl(nodes.coordinator.adminUrl, name, login);
    const migration = await migrate({ adminUrl, appUrl, distribution: 'citus' });
    // Any statement of the app that Citus would run on more than one shard fails the test that made it.
    await onNode(adminUrl, (sql) =>
      sql.unsafe(`alter role "${login.user}" in database "${name}" set citus.multi_task_query_log_level = 'error'`),
    );
    return { name, adminUrl, appUrl, workerAdminUrls, migration, drop: () => dropCitusDatabase(nodes, name) };
  } catch (error) {
    await dropCitusDatabase(nodes, name).catch(() => {});
    throw error;
  }
}

