import { z } from 'zod';
import type { DistributionSetting } from './db/distribute.ts';
import { resolveDataDir } from './embedded/data-dir.ts';
import { localSecret, SECRET_FILES } from './embedded/secrets.ts';
import { LOCAL_MODEL } from './embeddings/local-model.ts';
import { DEFAULT_REMEMBER_SETTINGS, type RememberSettings } from './memory/remember-settings.ts';
import { redactUrl } from './redact.ts';

/**
 * The one place that reads the environment (DESIGN §2). Everything else receives a `Config`.
 * A bad value stops startup with one line naming the variable, never with a stack trace.
 */

const optionalText = z
  .string()
  .trim()
  .transform((value) => (value === '' ? undefined : value))
  .optional();

const url = (protocols: readonly string[]) =>
  z
    .string()
    .trim()
    .refine((value) => {
      try {
        return protocols.includes(new URL(value).protocol);
      } catch {
        return false;
      }
    }, `must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);

const optionalUrl = (protocols: readonly string[]) =>
  z.preprocess((value) => (value === '' ? undefined : value), url(protocols).optional());

/**
 * The route classes that have rate limits of their own (src/http/rate-limit.ts;
 * docs/decisions/0082-rate-limit-classes.md).
 */
export const rateLimitClasses = ['writes', 'searches', 'reports', 'reads'] as const;
export type RateLimitClass = (typeof rateLimitClasses)[number];

/** Requests a minute per caller (tenant + token `sub`) and per tenant (all its callers together). */
export interface RateLimit {
  perCaller: number;
  perTenant: number;
}

/** Each class's limits; undefined: that class is not limited (`off`). */
export type RateLimits = Record<RateLimitClass, RateLimit | undefined>;

/** Far above what one agent or importer asks for; there to keep one caller or tenant from starving the rest. */
const defaultRateLimits: Record<RateLimitClass, string> = { writes: '1200/6000', searches: '1200/6000', reports: '60/300', reads: '2400/12000' };

const rateLimitFormat = 'must be "<per caller>/<per tenant>" requests a minute (e.g. 600/3000) or "off"';

const rateLimitSetting = (byDefault: string) =>
  z.preprocess(
    (value) => (value === undefined || value === '' ? byDefault : value),
    z
      .string()
      .trim()
      .regex(/^(off|\d{1,9}\/\d{1,9})$/i, rateLimitFormat)
      .transform((value): RateLimit | undefined => {
        if (value.toLowerCase() === 'off') return undefined;
        const [perCaller, perTenant] = value.split('/').map(Number) as [number, number];
        return { perCaller, perTenant };
      })
      .refine((limit) => limit === undefined || (limit.perCaller >= 1 && limit.perTenant >= 1), 'must allow at least 1 request a minute per caller and per tenant, or be "off"')
      .refine((limit) => limit === undefined || limit.perCaller <= limit.perTenant, 'must not allow one caller more than its whole tenant (<per caller> ≤ <per tenant>)'),
  );

const postgresProtocols = ['postgres:', 'postgresql:'] as const;
const httpUrl = ['http:', 'https:'] as const;

const metricsPortRange = 'must be a port number from 1 to 65535, or 0 to serve no metrics';

const environmentSchema = z
  .object({
    DATABASE_URL: optionalUrl(postgresProtocols),
    DATABASE_ADMIN_URL: optionalUrl(postgresProtocols),
    DATABASE_READ_URL: optionalUrl(postgresProtocols),
    REDIS_URL: optionalUrl(['redis:', 'rediss:']),
    PORT: z.preprocess(
      (value) => (value === undefined || value === '' ? 3000 : value),
      z.coerce
        .number({ message: 'must be a port number' })
        .int('must be a whole number')
        .min(1, 'must be between 1 and 65535')
        .max(65535, 'must be between 1 and 65535'),
    ),
    MNEMO_METRICS_PORT: z.preprocess(
      (value) => (value === undefined || value === '' ? 9464 : value),
      z.coerce
        .number({ message: metricsPortRange })
        .int(metricsPortRange)
        .min(0, metricsPortRange)
        .max(65535, metricsPortRange),
    ),
    MNEMO_JWT_SECRET: z.preprocess(
      (value) => (value === '' ? undefined : value),
      z
        .string()
        .refine((secret) => Buffer.byteLength(secret, 'utf8') >= 32, 'must be at least 32 bytes')
        .optional(),
    ),
    MNEMO_ERASURE_KEY: z.preprocess(
      (value) => (value === '' ? undefined : value),
      z
        .string()
        .refine((key) => Buffer.byteLength(key, 'utf8') >= 32, 'must be at least 32 bytes')
        .optional(),
    ),
    MNEMO_JWKS_URL: optionalUrl(httpUrl),
    MNEMO_JWT_ISSUER: optionalText,
    MNEMO_JWT_AUDIENCE: optionalText,
    MNEMO_DATA_DIR: optionalText,
    KINDGI_MEMORY_EMBEDDINGS: z.preprocess(
      (value) => (value === '' ? undefined : value),
      z.enum(['openai-compat', 'local'], { message: 'must be "openai-compat", "local" or unset' }).optional(),
    ),
    KINDGI_MEMORY_EMBEDDINGS_URL: optionalUrl(httpUrl),
    KINDGI_MEMORY_EMBEDDINGS_MODEL: optionalText,
    KINDGI_MEMORY_EMBEDDINGS_API_KEY: optionalText,
    MNEMO_SEMANTIC_WEIGHT: z.preprocess(
      (value) => (value === '' ? undefined : value),
      z.coerce
        .number({ message: 'must be a number from 0 to 100' })
        .min(0, 'must be a number from 0 to 100')
        .max(100, 'must be a number from 0 to 100')
        .optional(),
    ),
    KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE: z.preprocess(
      (value) => (value === undefined || value === '' ? 64 : value),
      z.coerce.number().int('must be a whole number').min(1, 'must be between 1 and 2048').max(2048, 'must be between 1 and 2048'),
    ),
    LOG_LEVEL: z.preprocess(
      (value) => (value === undefined || value === '' ? 'info' : value),
      z.enum(['debug', 'info', 'warn', 'error'], { message: 'must be debug, info, warn or error' }),
    ),
    MNEMO_QUEUE_PREFIX: z.preprocess(
      (value) => (value === undefined || value === '' ? 'mnemo' : value),
      z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 of A-Z a-z 0-9 _ -'),
    ),
    MNEMO_RECONCILE_EVERY_MS: z.preprocess(
      (value) => (value === undefined || value === '' ? 30_000 : value),
      z.coerce.number().int('must be a whole number').min(1000, 'must be at least 1000'),
    ),
    MNEMO_RETENTION_EVERY_MS: z.preprocess(
      (value) => (value === undefined || value === '' ? 3_600_000 : value),
      z.coerce.number().int('must be a whole number').min(1000, 'must be at least 1000'),
    ),
    MNEMO_PURGE_GRACE_DAYS: z.preprocess(
      (value) => (value === undefined || value === '' ? 7 : value),
      z.coerce.number().min(0, 'must be 0 or more').max(3650, 'must be at most 3650'),
    ),
    MNEMO_JOB_LOCK_MS: z.preprocess(
      (value) => (value === undefined || value === '' ? 30_000 : value),
      z.coerce.number().int('must be a whole number').min(1000, 'must be at least 1000'),
    ),
    MNEMO_DISTRIBUTED: z.preprocess(
      (value) => (value === undefined || value === '' ? 'auto' : value),
      z.enum(['auto', 'citus', 'off'], { message: 'must be auto, citus or off' }),
    ),
    MNEMO_DB_PREPARED_STATEMENTS: z.preprocess(
      (value) => (value === undefined || value === '' ? 'true' : value),
      z.enum(['true', 'false'], { message: 'must be true or false' }).transform((value) => value === 'true'),
    ),
    MNEMO_DB_CONNECT_TIMEOUT_MS: z.preprocess(
      (value) => (value === undefined || value === '' ? 3000 : value),
      z.coerce
        .number({ message: 'must be a number of milliseconds' })
        .int('must be a whole number of milliseconds')
        .min(100, 'must be between 100 and 60000')
        .max(60_000, 'must be between 100 and 60000'),
    ),
    MNEMO_STATEMENT_TIMEOUT_MS: z.preprocess(
      (value) => (value === undefined || value === '' ? 5000 : value),
      z.coerce
        .number({ message: 'must be a number of milliseconds (0 turns it off)' })
        .int('must be a whole number of milliseconds')
        .min(0, 'must be 0 (off) or between 100 and 3600000')
        .max(3_600_000, 'must be 0 (off) or between 100 and 3600000')
        .refine((ms) => ms === 0 || ms >= 100, 'must be 0 (off) or between 100 and 3600000'),
    ),
    MNEMO_WORKER_STATEMENT_TIMEOUT_MS: z.preprocess(
      (value) => (value === undefined || value === '' ? 120_000 : value),
      z.coerce
        .number({ message: 'must be a number of milliseconds (0 turns it off)' })
        .int('must be a whole number of milliseconds')
        .min(0, 'must be 0 (off) or between 100 and 86400000')
        .max(86_400_000, 'must be 0 (off) or between 100 and 86400000')
        .refine((ms) => ms === 0 || ms >= 100, 'must be 0 (off) or between 100 and 86400000'),
    ),
    MNEMO_SHUTDOWN_TIMEOUT_MS: z.preprocess(
      (value) => (value === undefined || value === '' ? 10_000 : value),
      z.coerce.number().int('must be a whole number').min(0, 'must be 0 or more'),
    ),
    MNEMO_RATE_LIMIT_WRITES: rateLimitSetting(defaultRateLimits.writes),
    MNEMO_RATE_LIMIT_SEARCHES: rateLimitSetting(defaultRateLimits.searches),
    MNEMO_RATE_LIMIT_REPORTS: rateLimitSetting(defaultRateLimits.reports),
    MNEMO_RATE_LIMIT_READS: rateLimitSetting(defaultRateLimits.reads),
    MNEMO_MCP_REMEMBER_TYPES: z.preprocess(
      (value) => (value === undefined || value === '' ? DEFAULT_REMEMBER_SETTINGS.types.join(',') : value),
      z
        .string()
        .transform((value) => [...new Set(value.split(',').map((type) => type.trim()).filter(Boolean))])
        .pipe(
          z
            .array(z.string().max(128, 'holds a type longer than 128 characters').regex(/^[a-z0-9][a-z0-9._-]*$/, 'must be fact types (^[a-z0-9][a-z0-9._-]*$), comma-separated'))
            .min(1, 'must name at least one fact type'),
        ),
    ),
    MNEMO_MCP_REMEMBER_KEEP_DAYS: z.preprocess(
      (value) => (value === undefined || value === '' ? DEFAULT_REMEMBER_SETTINGS.keepDays : value),
      z.coerce.number({ message: 'must be a number of days' }).int('must be a whole number of days').min(1, 'must be at least 1').max(36_500, 'must be at most 36500'),
    ),
    MNEMO_MCP_REVIEW: z.preprocess(
      (value) => (value === undefined || value === '' ? DEFAULT_REMEMBER_SETTINGS.review : value),
      z.enum(['instruction-like', 'all'], { message: 'must be "instruction-like" (hold what reads like an instruction) or "all" (hold everything agents remember)' }),
    ),
    MNEMO_MCP_SCOPE: z.preprocess(
      (value) => (value === undefined || value === '' ? DEFAULT_REMEMBER_SETTINGS.scope : value),
      z.enum(['user', 'tenant'], { message: 'must be "user" (each caller\'s own facts) or "tenant" (tenant-wide)' }),
    ),
  })
  .superRefine((env, ctx) => {
    if (env.KINDGI_MEMORY_EMBEDDINGS === 'openai-compat') {
      for (const name of ['KINDGI_MEMORY_EMBEDDINGS_URL', 'KINDGI_MEMORY_EMBEDDINGS_MODEL'] as const) {
        if (!env[name]) {
          ctx.addIssue({ code: 'custom', path: [name], message: 'is required when KINDGI_MEMORY_EMBEDDINGS=openai-compat' });
        }
      }
    }
  });

type Environment = z.infer<typeof environmentSchema>;

/** Every variable this file reads (test/unit/compose.test.ts holds docker-compose.yml's services to them). */
export const environmentVariables: readonly string[] = Object.keys(environmentSchema.shape);

/**
 * Where the data lives (DESIGN §1): a PostgreSQL server (DATABASE_URL: the app role's connection,
 * not the tables' owner; see docs/decisions/0006-restricted-app-role.md), or, with DATABASE_URL unset, the embedded
 * PostgreSQL in this process, in `dataDir` (MNEMO_DATA_DIR, default ./.mnemo; src/embedded/).
 * `readUrl` (DATABASE_READ_URL, the API only): a streaming replica that lists, searches and
 * reports read from (docs/operations/scaling-and-citus.md, "Read replicas").
 */
export type Storage =
  | { kind: 'server'; databaseUrl: string; readUrl?: string | undefined }
  | { kind: 'embedded'; dataDir: string };

/** Where jobs run: BullMQ workers on REDIS_URL, or, with REDIS_URL unset, the API process itself. */
export type Jobs = { kind: 'bullmq'; redisUrl: string } | { kind: 'in-process' };

export interface Config {
  storage: Storage;
  /** How this process uses the database; passed to `connect()` as is. */
  database: {
    /** How long opening a connection may take (MNEMO_DB_CONNECT_TIMEOUT_MS). */
    connectTimeoutMs: number;
    /**
     * `statement_timeout` of each tenant transaction, 0 = the server's: MNEMO_STATEMENT_TIMEOUT_MS
     * for the API (requests), MNEMO_WORKER_STATEMENT_TIMEOUT_MS for the worker (batches, sweeps).
     */
    statementTimeoutMs: number;
    /** Server-side prepared statements (MNEMO_DB_PREPARED_STATEMENTS): off behind PgBouncer in transaction mode before 1.21. */
    preparedStatements: boolean;
  };
  /** `statement_timeout` of jobs the API runs itself (no Redis): the worker's, MNEMO_WORKER_STATEMENT_TIMEOUT_MS. */
  jobStatementTimeoutMs: number;
  jobs: Jobs;
  port: number;
  /** The worker's port for /metrics and /healthz (MNEMO_METRICS_PORT, default 9464); 0 serves none. The API serves /metrics on `port`. */
  metricsPort: number;
  auth: {
    jwtSecret: string | undefined;
    jwksUrl: string | undefined;
    issuer: string | undefined;
    audience: string | undefined;
  };
  embeddings:
    | { kind: 'none' }
    /** The built-in model (use-lite-512), served in the API's own process (KINDGI_MEMORY_EMBEDDINGS=local). */
    | { kind: 'local'; batchSize: number; semanticWeight?: number | undefined }
    | {
        kind: 'openai-compat';
        url: string;
        model: string;
        apiKey: string | undefined;
        batchSize: number;
        /** MNEMO_SEMANTIC_WEIGHT: the model's weight in `both`; unset, its measured default or 1 (DESIGN §5). */
        semanticWeight?: number | undefined;
      };
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** BullMQ key prefix in Redis, so several deployments can share one Redis. */
  queuePrefix: string;
  /** How often the reconciler runs. */
  reconcileEveryMs: number;
  /**
   * The HMAC key erasure records hash a person's or conversation's id with (DESIGN §10). Without
   * it, erasure is off: requests answer 503.
   */
  erasureKey: string | undefined;
  /** How often the retention sweep runs. */
  retentionEveryMs: number;
  /** How long the content of a deleted or expired fact is kept before the sweep purges it. */
  purgeGraceMs: number;
  /** How long a worker holds a job before BullMQ deems it stalled (its worker died) and runs it again. */
  jobLockMs: number;
  /** How long shutdown may take before the process exits anyway. */
  shutdownTimeoutMs: number;
  /** MNEMO_RATE_LIMIT_*: per route class, kept in Redis for every API node (in this process without it). */
  rateLimits: RateLimits;
  /** MNEMO_MCP_*: what `kindgi_remember` writes, and where (src/memory/remember.ts). */
  mcp: Omit<RememberSettings, 'erasureKey'>;
}

export interface MigrateConfig {
  /** The owner connection that applies migrations: DATABASE_ADMIN_URL, else DATABASE_URL. */
  adminUrl: string;
  /** The app role's connection, when it differs from the admin one (its role is provisioned). */
  appUrl: string | undefined;
  /** On a Citus coordinator (MNEMO_DISTRIBUTED): distribute the tables when Citus is there (auto), insist (citus), or never (off). */
  distribution: DistributionSetting;
}

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
    mcp: { types: e.MNEMO_MCP_REMEMBER_TYPES, keepDays: e.MNEMO_MCP_REMEMBER_KEEP_DAYS, scope: e.MNEMO_MCP_SCOPE, review: e.MNEMO_MCP_REVIEW },
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
