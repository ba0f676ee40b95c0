/**
 * Mnemo as production runs it, on loopback: a private PostgreSQL cluster with pgvector (migrated),
 * PgBouncer in transaction mode in front of it, a private Redis, a fake OpenAI-compatible
 * embeddings endpoint, several API processes (`src/server.ts`) and worker processes
 * (`workers/index.ts`) connecting through PgBouncer, and HAProxy in front of whichever API nodes a
 * run asks for. Any API node or worker can be SIGKILLed and started again (an API node on its
 * own port, so the balancer finds it again).
 *
 * `cpu()` says how many CPU seconds each part has used so far (processes killed along the way
 * included), so a run can say where the machine's cores went.
 */
import postgres, { type Sql } from 'postgres';
import { TEST_APP_PASSWORD, TEST_APP_ROLE } from '../../../support/urls.ts';
import { type Deployment, startDeployment } from '../../helpers/deployment.ts';
import { freePort } from '../../../support/ports.ts';
import type { RunningProcess } from '../../../support/processes.ts';
import { startProcess } from '../../helpers/process.ts';
import { type FakeEmbeddings, startFakeEmbeddings } from '../../../support/fake-embeddings.ts';
import { type ClusterDatabase, type PostgresCluster, startPostgresCluster } from '../../../support/postgres-cluster.ts';
import { type PrivateRedis, startPrivateRedis } from '../../faults/helpers/redis-server.ts';
import { cpuSeconds, machineBusySeconds, postgresCpuSeconds } from './cpu.ts';
import { type Haproxy, startHaproxy } from './haproxy.ts';
import { type PgBouncer, startPgBouncer } from './pgbouncer.ts';

export interface ApiNode {
  /** Its server name in HAProxy (X-Served-By). */
  name: string;
  port: number;
  process: RunningProcess;
}

/** CPU seconds per part of the deployment; `machine` is every core's busy time, whoever used it. */
export const cpuParts = ['api', 'postgres', 'workers', 'pgbouncer', 'redis', 'haproxy', 'load', 'machine'] as const;
export type CpuPart = (typeof cpuParts)[number];
export type CpuSample = Record<CpuPart, number>;

export interface ScaleStack {
  cluster: PostgresCluster;
  database: ClusterDatabase;
  bouncer: PgBouncer;
  redis: PrivateRedis;
  fake: FakeEmbeddings;
  deployment: Deployment;
  nodes: ApiNode[];
  workers: RunningProcess[];
  /** The tables' owner, straight to PostgreSQL (not through PgBouncer), for what the test checks. */
  admin: Sql;
  /** HAProxy in front of the named API nodes; stopped by `close()` unless stopped before. */
  balance(names: readonly string[]): Promise<Haproxy>;
  node(name: string): ApiNode;
  /** SIGKILL, as a crash. */
  killApi(name: string): Promise<void>;
  /** Starts a killed node again on its port; resolves once it listens. */
  restartApi(name: string): Promise<void>;
  killWorker(index: number): Promise<void>;
  restartWorker(index: number): Promise<void>;
  cpu(): CpuSample;
  /** The warnings and errors every API node and worker logged, killed ones included: what a failure report shows. */
  complaints(): string;
  close(): Promise<void>;
}

export interface ScaleStackOptions {
  apiNodes: number;
  workers: number;
  /** Added to the API's and workers' environment. */
  env?: Record<string, string>;
}

const apiReady = '"api listening"';

/** PgBouncer's server connections for the app role: fewer than the nodes' and workers' pools hold together. */
export const BOUNCER_POOL_SIZE = 20;

export async function startScaleStack({ apiNodes, workers: workerCount, env = {} }: ScaleStackOptions): Promise<ScaleStack> {
  const cleanups: Array<() => Promise<unknown>> = [];
  const close = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  };
  try {
    const [cluster, redis, fake] = await Promise.all([startPostgresCluster(), startPrivateRedis(), startFakeEmbeddings({ dims: 16 })]);
    cleanups.push(() => cluster.remove(), () => redis.close(), () => fake.close());
    const database = await cluster.createDatabase();
    const bouncer = await startPgBouncer({
      serverPort: cluster.port,
      users: [{ name: TEST_APP_ROLE, password: TEST_APP_PASSWORD }],
      poolSize: BOUNCER_POOL_SIZE,
    });
    cleanups.push(() => bouncer.stop());
    const admin = postgres(database.adminUrl, { max: 2, onnotice: () => {} });
    cleanups.push(() => admin.end({ timeout: 5 }));

    const deployment = await startDeployment({
      db: { appUrl: bouncer.through(database.appUrl) },
      redisUrl: redis.url,
      prefix: 'mnemo-scale',
      embeddings: { url: fake.url, model: fake.model },
      env: {
        // PgBouncer 1.18 in transaction mode keeps no prepared statement from one transaction to the next.
        MNEMO_DB_PREPARED_STATEMENTS: 'false',
        KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE: '32',
        // A job whose worker was killed runs again after 5 s; what a killed API node committed but
        // had not handed to the queues yet, the reconciler finds within 10 s.
        MNEMO_JOB_LOCK_MS: '5000',
        MNEMO_RECONCILE_EVERY_MS: '10000',
        ...env,
      },
    });
    cleanups.push(() => deployment.close());

    // Whatever was killed is not in the processes any more: its CPU time is kept here.
    const retired: Record<CpuPart, number> = Object.fromEntries(cpuParts.map((part) => [part, 0])) as CpuSample;
    const balancers = new Set<Haproxy>();
    cleanups.push(async () => {
      for (const balancer of balancers) await balancer.stop();
    });

    const nodes: ApiNode[] = [{ name: 'api1', port: Number(new URL(deployment.apiUrl).port), process: deployment.api }];
    // Every API node and worker ever started here, killed ones included (for their logs).
    const started: RunningProcess[] = [deployment.api];
    cleanups.push(async () => {
      for (const p of started) await deployment.kill(p);
    });
    const launch = async (port: number) => {
      const p = startProcess('src/server.ts', [], { ...deployment.env, PORT: String(port) });
      started.push(p);
      await p.waitFor(apiReady, 60_000);
      return p;
    };
    const extra = await Promise.all(
      Array.from({ length: apiNodes - 1 }, async (_, i) => {
        const port = await freePort();
        return { name: `api${i + 2}`, port, process: await launch(port) };
      }),
    );
    nodes.push(...extra);

    const startWorker = async () => {
      const worker = await deployment.startWorker();
      started.push(worker);
      return worker;
    };
    const workers = await Promise.all(Array.from({ length: workerCount }, startWorker));

    const node = (name: string) => {
      const found = nodes.find((n) => n.name === name);
      if (!found) throw new Error(`no API node ${name}`);
      return found;
    };
    const retire = (part: CpuPart, p: RunningProcess) => {
      if (p.child.pid !== undefined) retired[part] += cpuSeconds(p.child.pid);
    };

    return {
      cluster,
      database,
      bouncer,
      redis,
      fake,
      deployment,
      nodes,
      workers,
      admin,
      async balance(names) {
        const balancer = await startHaproxy(names.map((name) => ({ name, port: node(name).port })));
        balancers.add(balancer);
        const stop = balancer.stop;
        balancer.stop = async () => {
          retired.haproxy += cpuSeconds(balancer.pid);
          balancers.delete(balancer);
          await stop();
        };
        return balancer;
      },
      node,
      async killApi(name) {
        const target = node(name);
        retire('api', target.process);
        await deployment.kill(target.process);
      },
      async restartApi(name) {
        const target = node(name);
        target.process = await launch(target.port);
      },
      async killWorker(index) {
        retire('workers', workers[index]!);
        await deployment.kill(workers[index]!);
      },
      async restartWorker(index) {
        workers[index] = await startWorker();
      },
      cpu() {
        const of = (processes: RunningProcess[]) =>
          processes.filter((p) => p.child.exitCode === null && p.child.signalCode === null).reduce((sum, p) => sum + cpuSeconds(p.child.pid!), 0);
        const postmaster = cluster.postmasterPid();
        const redisPid = redis.pid();
        const own = process.cpuUsage();
        return {
          api: retired.api + of(nodes.map((n) => n.process)),
          postgres: postmaster ? postgresCpuSeconds(postmaster) : 0,
          workers: retired.workers + of(workers),
          pgbouncer: cpuSeconds(bouncer.pid),
          redis: redisPid ? cpuSeconds(redisPid) : 0,
          haproxy: retired.haproxy + [...balancers].reduce((sum, b) => sum + cpuSeconds(b.pid), 0),
          // This process: the clients and the fake embeddings endpoint.
          load: (own.user + own.system) / 1e6,
          machine: machineBusySeconds(),
        };
      },
      complaints: () =>
        started
          .flatMap((p) => [...p.stdout().split('\n').filter((line) => /"level":"(warn|error)"/.test(line)), ...p.stderr().split('\n')])
          .filter((line) => line.trim() !== '')
          .slice(-40)
          .join('\n'),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** What each part used between two samples. */
export const cpuBetween = (before: CpuSample, after: CpuSample): CpuSample =>
  Object.fromEntries(cpuParts.map((part) => [part, after[part] - before[part]])) as CpuSample;
