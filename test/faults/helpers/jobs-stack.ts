/**
 * The job pipeline as operators run it, for the fault rows that break it: the API
 * (`src/server.ts`) and workers (`workers/index.ts`) as child processes, a test database of its
 * own on the machine's PostgreSQL, a private redis-server without persistence (killable), and a
 * fake OpenAI-compatible embeddings endpoint (which can be taken down, slowed, or made to answer
 * the wrong dimension). What is left afterwards is read as the tables' owner.
 */
import { tokenFor } from '../../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { type Deployment, startDeployment } from '../../helpers/deployment.ts';
import { keysUnder } from '../../../support/redis.ts';
import { type FakeEmbeddings, startFakeEmbeddings } from '../../../support/fake-embeddings.ts';
import { type PrivateRedis, startPrivateRedis } from './redis-server.ts';

/** Per live fact of a tenant, its vectors of the model: exactly one at its version is right. */
export interface VectorState {
  live: number;
  /** Live facts with exactly one row of the model, at their current version. */
  once: number;
  /** Live facts with no row of the model. */
  missing: number;
  /** Live facts whose row is at another version. */
  stale: number;
}

/** The deployment (API process, workers, queues) over this stack's own database, Redis and endpoint. */
export interface JobsStack extends Deployment {
  db: TestDatabase;
  redis: PrivateRedis;
  fake: FakeEmbeddings;
  admin(tenantId: string): Promise<string>;
  vectorState(tenantId: string): Promise<VectorState>;
  /** Content left (facts and revisions) and vectors left, over the given fact ids. */
  leftOf(tenantId: string, ids: readonly string[]): Promise<{ content: number; revisionContent: number; vectors: number; notErased: number }>;
  /** Keys of this deployment in Redis whose value (any field, member or entry) contains `text`. */
  redisKeysHolding(text: string): Promise<string[]>;
}

export interface JobsStackOptions {
  /** Extra or overriding environment for the API and workers. */
  env?: Record<string, string>;
}

export async function startJobsStack(options: JobsStackOptions = {}): Promise<JobsStack> {
  const [db, redis, fake] = await Promise.all([createTestDatabase(), startPrivateRedis(), startFakeEmbeddings()]);
  let deployment: Deployment;
  try {
    deployment = await startDeployment({
      db,
      redisUrl: redis.url,
      prefix: 'mnemo-faults-jobs',
      embeddings: { url: fake.url, model: fake.model },
      env: {
        KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE: '16',
        MNEMO_RECONCILE_EVERY_MS: '1000',
        MNEMO_JOB_LOCK_MS: '2000',
        LOG_LEVEL: 'info',
        ...options.env,
      },
    });
  } catch (error) {
    await Promise.all([redis.close(), fake.close()]);
    await db.drop();
    throw error;
  }
  const { connection, prefix } = deployment;

  return {
    ...deployment,
    db,
    redis,
    fake,
    admin: (tenantId) => tokenFor({ tid: tenantId, sub: 'admin-1', role: 'admin' }),
    async vectorState(tenantId) {
      const [row] = await db.admin<VectorState[]>`
        select count(*)::int as live,
               count(*) filter (where v.n = 1 and v.versions[1] = f.version)::int as once,
               count(*) filter (where coalesce(v.n, 0) = 0)::int as missing,
               count(*) filter (where v.n >= 1 and not (f.version = all(v.versions)))::int as stale
        from facts f
        left join lateral (
          select count(*)::int as n, array_agg(e.version) as versions from fact_embeddings e
          where e.tenant_id = f.tenant_id and e.fact_id = f.id and e.model = ${fake.model}
        ) v on true
        where f.tenant_id = ${tenantId} and f.invalidated_at is null`;
      return row!;
    },
    async leftOf(tenantId, ids) {
      const [row] = await db.admin<{ content: number; revisionContent: number; vectors: number; notErased: number }[]>`
        select (select count(*)::int from facts where tenant_id = ${tenantId} and id = any(${ids}::uuid[]) and content is not null) as content,
               (select count(*)::int from fact_revisions where tenant_id = ${tenantId} and fact_id = any(${ids}::uuid[]) and content is not null) as "revisionContent",
               (select count(*)::int from fact_embeddings where tenant_id = ${tenantId} and fact_id = any(${ids}::uuid[])) as vectors,
               (select count(*)::int from facts where tenant_id = ${tenantId} and id = any(${ids}::uuid[]) and invalidation_reason is distinct from 'erased') as "notErased"`;
      return row!;
    },
    async redisKeysHolding(text) {
      const holding: string[] = [];
      for (const key of await keysUnder(connection, prefix)) {
        const type = await connection.type(key);
        let values: string[] = [];
        if (type === 'string') values = [(await connection.get(key)) ?? ''];
        else if (type === 'hash') values = Object.values(await connection.hgetall(key));
        else if (type === 'list') values = await connection.lrange(key, 0, -1);
        else if (type === 'set') values = await connection.smembers(key);
        else if (type === 'zset') values = await connection.zrange(key, 0, -1);
        else if (type === 'stream') values = (await connection.xrange(key, '-', '+')).flatMap(([, fields]) => fields);
        if (values.some((value) => value.includes(text))) holding.push(key);
      }
      return holding;
    },
    async close() {
      await deployment.close();
      await Promise.all([redis.close(), fake.close()]);
      await db.drop();
    },
  };
}
