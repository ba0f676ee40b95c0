/**
 * What a process runs with once the environment is read: the `Config` of the API and the worker,
 * the `MigrateConfig` of `mnemo migrate` (made by src/config.ts from
 * src/foundation/environment.ts). Types only, so the layers that take a `Config` import nothing
 * of the loading.
 */
import type { RateLimits } from './rate-limits.ts';
import type { RememberSettings } from './remember-settings.ts';

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
  /** MNEMO_SERVER_TIMING: answers carry a `Server-Timing` header, each phase's milliseconds (src/foundation/request-timing.ts). */
  serverTiming: boolean;
  /** BullMQ key prefix in Redis, so several deployments can share one Redis. */
  queuePrefix: string;
  /** How often the reconciler runs. */
  reconcileEveryMs: number;
  /**
   * The HMAC key erasure records hash a person's or conversation's id with (DESIGN §10). Without
   * it, erasure is off: requests answer 501.
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
  /** MNEMO_MCP_*: what `kindgi_remember` writes, and where (src/memory/remember/remember.ts). */
  mcp: Omit<RememberSettings, 'erasureKey'>;
}


/**
 * How `mnemo migrate` treats a Citus cluster (MNEMO_DISTRIBUTED): `auto` (the default) distributes
 * the tables when the database has the `citus` extension, `citus` insists on it (and fails without
 * the extension), `off` leaves every table on the coordinator even where Citus is installed.
 */
export type DistributionSetting = 'auto' | 'citus' | 'off';

export interface MigrateConfig {
  /** The owner connection that applies migrations: DATABASE_ADMIN_URL, else DATABASE_URL. */
  adminUrl: string;
  /** The app role's connection, when it differs from the admin one (its role is provisioned). */
  appUrl: string | undefined;
  /** On a Citus coordinator (MNEMO_DISTRIBUTED): distribute the tables when Citus is there (auto), insist (citus), or never (off). */
  distribution: DistributionSetting;
}
