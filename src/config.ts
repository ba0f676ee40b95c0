import { resolveDataDir } from './embedded/data-dir.ts';
import { localSecret, SECRET_FILES } from './embedded/secrets.ts';
import type { Config, Jobs, MigrateConfig, Storage } from './foundation/config.ts';
import { type Environment, environmentSchema } from './foundation/environment.ts';
import { LOCAL_MODEL } from './foundation/local-model.ts';
import { redactUrl } from './foundation/redact.ts';

/**
 * The one place that reads the environment (DESIGN §2). Everything else receives a `Config`.
 * A bad value stops startup with one line naming the variable, never with a stack trace.
 *
 * The schema, its defaults and docs are src/foundation/environment.ts, the shapes made from it
 * src/foundation/config.ts; here is what needs more than the schema: which variables each
 * process requires, the data directory and its secrets. Part of the composition root: only the
 * entry points import it.
 */

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`Invalid configuration: ${variable} ${detail}`);
    this.name = 'ConfigError';
  }
}

function parseEnvironment(env: NodeJS.ProcessEnv): Environment {
  const parsed = environmentSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'environment');
    throw new ConfigError(variable, issue.message);
  }
  return parsed.data;
}

function required<K extends keyof Environment>(e: Environment, name: K): NonNullable<Environment[K]> {
  const value = e[name];
  if (value === undefined) throw new ConfigError(name, 'is required');
  return value as NonNullable<Environment[K]>;
}

/**
 * Where jobs run (DESIGN §1): BullMQ workers on REDIS_URL, or, with REDIS_URL unset, the API
 * process itself (src/jobs/in-process.ts). The worker process asks first: in-process mode has no
 * use for it.
 */
export function jobsTransport(env: NodeJS.ProcessEnv): { kind: 'bullmq'; redisUrl: string } | { kind: 'in-process' } {
  const redisUrl = parseEnvironment(env).REDIS_URL;
  return redisUrl ? { kind: 'bullmq', redisUrl } : { kind: 'in-process' };
}

/**
 * Configuration of the long-running processes: the API (`api`) and the workers (`worker`). The
 * API runs with neither DATABASE_URL nor REDIS_URL (embedded storage, in-process jobs); the
 * worker, and the CLI commands that drive it, need both.
 */
export function loadConfig(env: NodeJS.ProcessEnv, purpose: 'api' | 'worker'): Config {
  const e = parseEnvironment(env);
  if (purpose === 'api' && !e.MNEMO_JWT_SECRET && !e.MNEMO_JWKS_URL) {
    throw new ConfigError('MNEMO_JWT_SECRET', 'or MNEMO_JWKS_URL is required: the API needs a way to verify tokens');
  }
  if (purpose === 'worker' && e.KINDGI_MEMORY_EMBEDDINGS === 'local') {
    throw new ConfigError('KINDGI_MEMORY_EMBEDDINGS', '"local" runs the model inside the API process, which then runs the jobs too (leave REDIS_URL unset); with workers, serve it with `mnemo embeddings-server` and use "openai-compat"');
  }
  if (purpose === 'api' && !e.DATABASE_URL && e.REDIS_URL) {
    throw new ConfigError('REDIS_URL', 'is set without DATABASE_URL: workers could not reach the embedded database; unset REDIS_URL (jobs then run in the API process) or set DATABASE_URL');
  }
  if (purpose === 'api' && !e.DATABASE_URL && e.DATABASE_READ_URL) {
    throw new ConfigError('DATABASE_READ_URL', 'is set without DATABASE_URL: the embedded database has no replicas; unset DATABASE_READ_URL or set DATABASE_URL');
  }
  const storage: Storage = e.DATABASE_URL
    ? { kind: 'server', databaseUrl: e.DATABASE_URL, ...(purpose === 'api' && e.DATABASE_READ_URL ? { readUrl: e.DATABASE_READ_URL } : {}) }
    : purpose === 'api'
      ? { kind: 'embedded', dataDir: resolveDataDir(env) }
      : { kind: 'server', databaseUrl: required(e, 'DATABASE_URL') };
  const jobs: Jobs = e.REDIS_URL
    ? { kind: 'bullmq', redisUrl: e.REDIS_URL }
    : purpose === 'api'
      ? { kind: 'in-process' }
      : { kind: 'bullmq', redisUrl: required(e, 'REDIS_URL') };
  return {
    storage,
    jobs,
    database: {
      connectTimeoutMs: e.MNEMO_DB_CONNECT_TIMEOUT_MS,
      statementTimeoutMs: purpose === 'api' ? e.MNEMO_STATEMENT_TIMEOUT_MS : e.MNEMO_WORKER_STATEMENT_TIMEOUT_MS,
      preparedStatements: e.MNEMO_DB_PREPARED_STATEMENTS,
    },
    jobStatementTimeoutMs: e.MNEMO_WORKER_STATEMENT_TIMEOUT_MS,
    port: e.PORT,
    metricsPort: e.MNEMO_METRICS_PORT,
    auth: {
      jwtSecret: e.MNEMO_JWT_SECRET,
      jwksUrl: e.MNEMO_JWKS_URL,
      issuer: e.MNEMO_JWT_ISSUER,
      audience: e.MNEMO_JWT_AUDIENCE,
    },
    embeddings:
      e.KINDGI_MEMORY_EMBEDDINGS === 'openai-compat'
        ? {
            kind: 'openai-compat',
            url: e.KINDGI_MEMORY_EMBEDDINGS_URL!,
            model: e.KINDGI_MEMORY_EMBEDDINGS_MODEL!,
            apiKey: e.KINDGI_MEMORY_EMBEDDINGS_API_KEY,
            batchSize: e.KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE,
            semanticWeight: e.MNEMO_SEMANTIC_WEIGHT,
          }
        : e.KINDGI_MEMORY_EMBEDDINGS === 'local'
          ? { kind: 'local', batchSize: e.KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE, semanticWeight: e.MNEMO_SEMANTIC_WEIGHT }
          : { kind: 'none' },
    logLevel: e.LOG_LEVEL,
    serverTiming: e.MNEMO_SERVER_TIMING,
    queuePrefix: e.MNEMO_QUEUE_PREFIX,
    reconcileEveryMs: e.MNEMO_RECONCILE_EVERY_MS,
    erasureKey: e.MNEMO_ERASURE_KEY,
    retentionEveryMs: e.MNEMO_RETENTION_EVERY_MS,
    purgeGraceMs: e.MNEMO_PURGE_GRACE_DAYS * 24 * 3600 * 1000,
    jobLockMs: e.MNEMO_JOB_LOCK_MS,
    shutdownTimeoutMs: e.MNEMO_SHUTDOWN_TIMEOUT_MS,
    rateLimits: {
      writes: e.MNEMO_RATE_LIMIT_WRITES,
      searches: e.MNEMO_RATE_LIMIT_SEARCHES,
      reports: e.MNEMO_RATE_LIMIT_REPORTS,
      reads: e.MNEMO_RATE_LIMIT_READS,
    },
    mcp: { types: e.MNEMO_MCP_REMEMBER_TYPES, keepDays: e.MNEMO_MCP_REMEMBER_KEEP_DAYS, scope: e.MNEMO_MCP_SCOPE, review: e.MNEMO_MCP_REVIEW, reviewThreshold: e.MNEMO_MCP_REVIEW_THRESHOLD },
  };
}

export function loadMigrateConfig(env: NodeJS.ProcessEnv): MigrateConfig {
  const e = parseEnvironment(env);
  const adminUrl = e.DATABASE_ADMIN_URL ?? e.DATABASE_URL;
  if (!adminUrl) throw new ConfigError('DATABASE_ADMIN_URL', 'or DATABASE_URL is required to migrate');
  return { adminUrl, appUrl: e.DATABASE_ADMIN_URL ? e.DATABASE_URL : undefined, distribution: e.MNEMO_DISTRIBUTED };
}

/**
 * The HS256 secret `mnemo token` signs with: MNEMO_JWT_SECRET, or, with embedded storage (no
 * DATABASE_URL), the one the embedded API uses from its data directory (made there if this runs
 * before the API's first start).
 */
export function loadTokenSecret(env: NodeJS.ProcessEnv): string {
  const e = parseEnvironment(env);
  if (e.MNEMO_JWT_SECRET || e.DATABASE_URL) return required(e, 'MNEMO_JWT_SECRET');
  return localSecret(resolveDataDir(env), SECRET_FILES.jwtSecret);
}

/** The worker's own connections: it runs only beside a PostgreSQL server and Redis. */
export function serverConnections(config: Config): { databaseUrl: string; redisUrl: string } {
  if (config.storage.kind !== 'server') throw new ConfigError('DATABASE_URL', 'is required');
  if (config.jobs.kind !== 'bullmq') throw new ConfigError('REDIS_URL', 'is required');
  return { databaseUrl: config.storage.databaseUrl, redisUrl: config.jobs.redisUrl };
}

/** The startup line of DESIGN §2 saying which search this runtime has. */
export function describeSearch(config: Config): string {
  if (config.embeddings.kind === 'local') {
    return `Memory search: keyword and by meaning (built-in ${LOCAL_MODEL}, in this process)`;
  }
  if (config.embeddings.kind === 'openai-compat') {
    const { model, url } = config.embeddings;
    return `Memory search: keyword and by meaning (openai-compat ${model} at ${redactUrl(url)})`;
  }
  return 'Memory search: keyword (KINDGI_MEMORY_EMBEDDINGS turns on search by meaning)';
}