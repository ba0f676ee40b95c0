import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, describeSearch, loadConfig, loadMigrateConfig, loadTokenSecret, serverConnections } from '../../src/config.ts';
import { withLocalSecrets } from '../../src/embedded/secrets.ts';

const secret = 'x'.repeat(32);
const base = {
  DATABASE_URL: 'postgres://mnemo_api:pw@db.internal:5432/mnemo',
  REDIS_URL: 'redis://cache.internal:6379',
  MNEMO_JWT_SECRET: secret,
};

const failure = (fn: () => unknown): string => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
};

describe('loadConfig', () => {
  it('reads a complete environment with defaults', () => {
    const config = loadConfig(base, 'api');
    expect(config).toMatchObject({
      storage: { kind: 'server', databaseUrl: base.DATABASE_URL },
      jobs: { kind: 'bullmq', redisUrl: base.REDIS_URL },
      port: 3000,
      auth: { jwtSecret: secret, jwksUrl: undefined, issuer: undefined, audience: undefined },
      embeddings: { kind: 'none' },
      logLevel: 'info',
      queuePrefix: 'mnemo',
      reconcileEveryMs: 30_000,
      retentionEveryMs: 3_600_000,
      purgeGraceMs: 7 * 24 * 3600 * 1000,
      jobLockMs: 30_000,
      shutdownTimeoutMs: 10_000,
      database: { connectTimeoutMs: 3000, statementTimeoutMs: 5000 },
    });
  });

  it('bounds database work: a connect timeout, and a statement timeout per process (longer for the worker)', () => {
    expect(loadConfig(base, 'worker').database).toEqual({ connectTimeoutMs: 3000, statementTimeoutMs: 120_000, preparedStatements: true });
    const env = { ...base, MNEMO_DB_CONNECT_TIMEOUT_MS: '1500', MNEMO_STATEMENT_TIMEOUT_MS: '800', MNEMO_WORKER_STATEMENT_TIMEOUT_MS: '0' };
    expect(loadConfig(env, 'api').database).toEqual({ connectTimeoutMs: 1500, statementTimeoutMs: 800, preparedStatements: true });
    expect(loadConfig(env, 'worker').database).toEqual({ connectTimeoutMs: 1500, statementTimeoutMs: 0, preparedStatements: true });
  });

  it('turns server-side prepared statements off for PgBouncer in transaction mode, in the API and the worker alike', () => {
    for (const purpose of ['api', 'worker'] as const) {
      expect(loadConfig({ ...base, MNEMO_DB_PREPARED_STATEMENTS: 'false' }, purpose).database.preparedStatements).toBe(false);
      expect(loadConfig({ ...base, MNEMO_DB_PREPARED_STATEMENTS: 'true' }, purpose).database.preparedStatements).toBe(true);
      expect(loadConfig({ ...base, MNEMO_DB_PREPARED_STATEMENTS: '' }, purpose).database.preparedStatements).toBe(true);
    }
  });

  it('reads a replica for the API only, and refuses one beside the embedded database', () => {
    const replica = 'postgres://mnemo_api:pw@replica.internal:5432/mnemo';
    expect(loadConfig({ ...base, DATABASE_READ_URL: replica }, 'api').storage).toEqual({ kind: 'server', databaseUrl: base.DATABASE_URL, readUrl: replica });
    // A worker writes: it has no use for a replica, and keeps none.
    expect(loadConfig({ ...base, DATABASE_READ_URL: replica }, 'worker').storage).toEqual({ kind: 'server', databaseUrl: base.DATABASE_URL });
    expect(loadConfig({ ...base, DATABASE_READ_URL: '' }, 'api').storage).toEqual({ kind: 'server', databaseUrl: base.DATABASE_URL });
    expect(failure(() => loadConfig({ MNEMO_JWT_SECRET: secret, DATABASE_READ_URL: replica }, 'api'))).toBe(
      'Invalid configuration: DATABASE_READ_URL is set without DATABASE_URL: the embedded database has no replicas; unset DATABASE_READ_URL or set DATABASE_URL',
    );
  });

  it('reads the embeddings endpoint when turned on', () => {
    const config = loadConfig(
      {
        ...base,
        KINDGI_MEMORY_EMBEDDINGS: 'openai-compat',
        KINDGI_MEMORY_EMBEDDINGS_URL: 'http://127.0.0.1:11434/v1',
        KINDGI_MEMORY_EMBEDDINGS_MODEL: 'nomic-embed-text',
      },
      'api',
    );
    expect(config.embeddings).toEqual({
      kind: 'openai-compat',
      url: 'http://127.0.0.1:11434/v1',
      model: 'nomic-embed-text',
      apiKey: undefined,
      batchSize: 64,
    });
    expect(describeSearch(config)).toBe(
      'Memory search: keyword and by meaning (openai-compat nomic-embed-text at http://127.0.0.1:11434/v1)',
    );
  });

  it('names the embeddings endpoint in the startup line without a query string that may hold a key', () => {
    const config = loadConfig(
      { ...base, KINDGI_MEMORY_EMBEDDINGS: 'openai-compat', KINDGI_MEMORY_EMBEDDINGS_URL: 'https://gw.example.com/v1?api_key=sk-secret', KINDGI_MEMORY_EMBEDDINGS_MODEL: 'm' },
      'api',
    );
    expect(describeSearch(config)).toBe('Memory search: keyword and by meaning (openai-compat m at https://gw.example.com/v1)');
  });

  it('says plainly when search by meaning is off', () => {
    expect(describeSearch(loadConfig(base, 'api'))).toBe(
      'Memory search: keyword (KINDGI_MEMORY_EMBEDDINGS turns on search by meaning)',
    );
  });

  it('runs the API with neither DATABASE_URL nor REDIS_URL: embedded storage in MNEMO_DATA_DIR (default ./.mnemo), jobs in-process', () => {
    const config = loadConfig({ MNEMO_JWT_SECRET: secret }, 'api');
    expect(config.storage).toEqual({ kind: 'embedded', dataDir: join(process.cwd(), '.mnemo') });
    expect(config.jobs).toEqual({ kind: 'in-process' });
    expect(loadConfig({ MNEMO_JWT_SECRET: secret, MNEMO_DATA_DIR: '/var/lib/mnemo' }, 'api').storage).toEqual({ kind: 'embedded', dataDir: '/var/lib/mnemo' });
    // A server with in-process jobs works; embedded storage with BullMQ would queue jobs no worker can run.
    expect(loadConfig({ ...base, REDIS_URL: '' }, 'api').jobs).toEqual({ kind: 'in-process' });
    expect(failure(() => loadConfig({ ...base, DATABASE_URL: undefined }, 'api'))).toBe(
      'Invalid configuration: REDIS_URL is set without DATABASE_URL: workers could not reach the embedded database; unset REDIS_URL (jobs then run in the API process) or set DATABASE_URL',
    );
  });

  it.each([
    [{ DATABASE_URL: undefined }, 'Invalid configuration: DATABASE_URL is required'],
    [{ REDIS_URL: '' }, 'Invalid configuration: REDIS_URL is required'],
    [{ KINDGI_MEMORY_EMBEDDINGS: 'local' }, 'Invalid configuration: KINDGI_MEMORY_EMBEDDINGS "local" runs the model inside the API process, which then runs the jobs too (leave REDIS_URL unset); with workers, serve it with `mnemo embeddings-server` and use "openai-compat"'],
  ])('the worker stops on %j: it runs only beside a server and Redis', (override, message) => {
    expect(failure(() => loadConfig({ ...base, ...override }, 'worker'))).toBe(message);
    expect(serverConnections(loadConfig(base, 'worker'))).toEqual({ databaseUrl: base.DATABASE_URL, redisUrl: base.REDIS_URL });
  });

  it('reads the built-in model setting: search by meaning in the API process', () => {
    const config = loadConfig({ ...base, KINDGI_MEMORY_EMBEDDINGS: 'local' }, 'api');
    expect(config.embeddings).toEqual({ kind: 'local', batchSize: 64, semanticWeight: undefined });
    expect(describeSearch(config)).toBe('Memory search: keyword and by meaning (built-in use-lite-512, in this process)');
  });

  it.each([
    [{ DATABASE_URL: 'mysql://x/y' }, 'Invalid configuration: DATABASE_URL must be a URL starting with postgres:// or postgresql://'],
    [{ REDIS_URL: 'not a url' }, 'Invalid configuration: REDIS_URL must be a URL starting with redis:// or rediss://'],
    [{ DATABASE_READ_URL: 'replica.internal:5432' }, 'Invalid configuration: DATABASE_READ_URL must be a URL starting with postgres:// or postgresql://'],
    [{ MNEMO_DB_PREPARED_STATEMENTS: 'no' }, 'Invalid configuration: MNEMO_DB_PREPARED_STATEMENTS must be true or false'],
    [{ PORT: 'abc' }, 'Invalid configuration: PORT must be a port number'],
    [{ PORT: '70000' }, 'Invalid configuration: PORT must be between 1 and 65535'],
    [{ PORT: '80.5' }, 'Invalid configuration: PORT must be a whole number'],
    [{ MNEMO_JWT_SECRET: 'short' }, 'Invalid configuration: MNEMO_JWT_SECRET must be at least 32 bytes'],
    [{ MNEMO_JWKS_URL: 'ftp://idp/jwks' }, 'Invalid configuration: MNEMO_JWKS_URL must be a URL starting with http:// or https://'],
    [{ KINDGI_MEMORY_EMBEDDINGS: 'ollama' }, 'Invalid configuration: KINDGI_MEMORY_EMBEDDINGS must be "openai-compat", "local" or unset'],
    [
      { KINDGI_MEMORY_EMBEDDINGS: 'openai-compat', KINDGI_MEMORY_EMBEDDINGS_MODEL: 'm' },
      'Invalid configuration: KINDGI_MEMORY_EMBEDDINGS_URL is required when KINDGI_MEMORY_EMBEDDINGS=openai-compat',
    ],
    [{ LOG_LEVEL: 'loud' }, 'Invalid configuration: LOG_LEVEL must be debug, info, warn or error'],
    [{ MNEMO_QUEUE_PREFIX: 'a:b' }, 'Invalid configuration: MNEMO_QUEUE_PREFIX must be 1 to 64 of A-Z a-z 0-9 _ -'],
    [{ MNEMO_PURGE_GRACE_DAYS: '-1' }, 'Invalid configuration: MNEMO_PURGE_GRACE_DAYS must be 0 or more'],
    [{ MNEMO_RETENTION_EVERY_MS: '10' }, 'Invalid configuration: MNEMO_RETENTION_EVERY_MS must be at least 1000'],
    [{ MNEMO_DB_CONNECT_TIMEOUT_MS: 'soon' }, 'Invalid configuration: MNEMO_DB_CONNECT_TIMEOUT_MS must be a number of milliseconds'],
    [{ MNEMO_DB_CONNECT_TIMEOUT_MS: '0' }, 'Invalid configuration: MNEMO_DB_CONNECT_TIMEOUT_MS must be between 100 and 60000'],
    [{ MNEMO_DB_CONNECT_TIMEOUT_MS: '2.5' }, 'Invalid configuration: MNEMO_DB_CONNECT_TIMEOUT_MS must be a whole number of milliseconds'],
    [{ MNEMO_STATEMENT_TIMEOUT_MS: '-5' }, 'Invalid configuration: MNEMO_STATEMENT_TIMEOUT_MS must be 0 (off) or between 100 and 3600000'],
    [{ MNEMO_STATEMENT_TIMEOUT_MS: '50' }, 'Invalid configuration: MNEMO_STATEMENT_TIMEOUT_MS must be 0 (off) or between 100 and 3600000'],
    [{ MNEMO_STATEMENT_TIMEOUT_MS: '5s' }, 'Invalid configuration: MNEMO_STATEMENT_TIMEOUT_MS must be a number of milliseconds (0 turns it off)'],
    [{ MNEMO_WORKER_STATEMENT_TIMEOUT_MS: '99' }, 'Invalid configuration: MNEMO_WORKER_STATEMENT_TIMEOUT_MS must be 0 (off) or between 100 and 86400000'],
  ])('stops on %j with one line naming the variable', (override, message) => {
    const text = failure(() => loadConfig({ ...base, ...override }, 'api'));
    expect(text).toBe(message);
    expect(text).not.toContain('\n');
  });

  it('reads what the MCP tool kindgi_remember writes, and where (MNEMO_MCP_*), with defaults', () => {
    expect(loadConfig(base, 'api').mcp).toEqual({ types: ['note', 'preference', 'fact'], keepDays: 30, scope: 'user', review: 'instruction-like', reviewThreshold: 0.95 });
    const set = loadConfig(
      { ...base, MNEMO_MCP_REMEMBER_TYPES: ' acme.note, acme.preference ,acme.note', MNEMO_MCP_REMEMBER_KEEP_DAYS: '7', MNEMO_MCP_SCOPE: 'tenant', MNEMO_MCP_REVIEW: 'all', MNEMO_MCP_REVIEW_THRESHOLD: '0.8' },
      'api',
    );
    expect(set.mcp).toEqual({ types: ['acme.note', 'acme.preference'], keepDays: 7, scope: 'tenant', review: 'all', reviewThreshold: 0.8 });
    expect(loadConfig({ ...base, MNEMO_MCP_REVIEW_THRESHOLD: '1' }, 'api').mcp.reviewThreshold).toBe(1);
    for (const [variable, value, message] of [
      ['MNEMO_MCP_REMEMBER_TYPES', 'Notes', 'must be fact types (^[a-z0-9][a-z0-9._-]*$), comma-separated'],
      ['MNEMO_MCP_REMEMBER_TYPES', ' , ', 'must name at least one fact type'],
      ['MNEMO_MCP_REMEMBER_KEEP_DAYS', '0', 'must be at least 1'],
      ['MNEMO_MCP_SCOPE', 'project', 'must be "user" (each caller\'s own facts) or "tenant" (tenant-wide)'],
      ['MNEMO_MCP_REVIEW', 'none', 'must be "instruction-like" (hold what reads like an instruction) or "all" (hold everything agents remember)'],
      ['MNEMO_MCP_REVIEW_THRESHOLD', 'high', 'must be a number above 0 and at most 1'],
      ['MNEMO_MCP_REVIEW_THRESHOLD', '0', 'must be above 0 (0 would hold everything: use MNEMO_MCP_REVIEW=all)'],
      ['MNEMO_MCP_REVIEW_THRESHOLD', '1.5', 'must be at most 1'],
    ] as const) {
      expect(failure(() => loadConfig({ ...base, [variable]: value }, 'api'))).toBe(`Invalid configuration: ${variable} ${message}`);
    }
  });

  it('reads the purge grace in days, 0 allowed (purge as soon as the sweep runs)', () => {
    expect(loadConfig({ ...base, MNEMO_PURGE_GRACE_DAYS: '0' }, 'worker').purgeGraceMs).toBe(0);
    expect(loadConfig({ ...base, MNEMO_PURGE_GRACE_DAYS: '1.5' }, 'worker').purgeGraceMs).toBe(36 * 3600 * 1000);
  });

  it('counts the secret in UTF-8 bytes', () => {
    // 11 three-byte characters = 33 bytes, though only 11 characters.
    expect(loadConfig({ ...base, MNEMO_JWT_SECRET: '€'.repeat(11) }, 'api').auth.jwtSecret).toBe('€'.repeat(11));
  });

  it('needs a way to verify tokens for the API, not for the worker', () => {
    const env = { ...base, MNEMO_JWT_SECRET: undefined };
    expect(failure(() => loadConfig(env, 'api'))).toBe(
      'Invalid configuration: MNEMO_JWT_SECRET or MNEMO_JWKS_URL is required: the API needs a way to verify tokens',
    );
    expect(loadConfig(env, 'worker').auth.jwtSecret).toBeUndefined();
    expect(loadConfig({ ...env, MNEMO_JWKS_URL: 'https://idp.example/jwks.json' }, 'api').auth.jwksUrl).toBe(
      'https://idp.example/jwks.json',
    );
  });

  it('never echoes a secret in its message', () => {
    const text = failure(() => loadConfig({ ...base, MNEMO_JWT_SECRET: 'hunter2-short' }, 'api'));
    expect(text).not.toContain('hunter2');
  });
});

describe('loadMigrateConfig', () => {
  it('prefers the admin URL and provisions the app URL', () => {
    expect(loadMigrateConfig({ DATABASE_URL: 'postgres://app@h/db', DATABASE_ADMIN_URL: 'postgres://owner@h/db' })).toEqual({
      adminUrl: 'postgres://owner@h/db',
      appUrl: 'postgres://app@h/db',
      distribution: 'auto',
    });
  });

  it('falls back to DATABASE_URL alone, with no role to provision', () => {
    expect(loadMigrateConfig({ DATABASE_URL: 'postgres://owner@h/db' })).toEqual({
      adminUrl: 'postgres://owner@h/db',
      appUrl: undefined,
      distribution: 'auto',
    });
  });

  it('reads MNEMO_DISTRIBUTED (auto by default) and refuses anything but auto, citus or off', () => {
    expect(loadMigrateConfig({ DATABASE_URL: 'postgres://owner@h/db', MNEMO_DISTRIBUTED: 'citus' }).distribution).toBe('citus');
    expect(loadMigrateConfig({ DATABASE_URL: 'postgres://owner@h/db', MNEMO_DISTRIBUTED: 'off' }).distribution).toBe('off');
    expect(failure(() => loadMigrateConfig({ DATABASE_URL: 'postgres://owner@h/db', MNEMO_DISTRIBUTED: 'yes' }))).toBe(
      'Invalid configuration: MNEMO_DISTRIBUTED must be auto, citus or off',
    );
  });

  it('needs one of them, and neither Redis nor a secret', () => {
    expect(failure(() => loadMigrateConfig({}))).toBe('Invalid configuration: DATABASE_ADMIN_URL or DATABASE_URL is required to migrate');
  });
});

describe('loadTokenSecret', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('needs only the secret with a server; with embedded storage, the data directory\'s (the one the API uses)', () => {
    expect(loadTokenSecret({ MNEMO_JWT_SECRET: secret })).toBe(secret);
    expect(failure(() => loadTokenSecret({ DATABASE_URL: base.DATABASE_URL }))).toBe('Invalid configuration: MNEMO_JWT_SECRET is required');

    const dir = mkdtempSync(join(tmpdir(), 'mnemo-config-'));
    dirs.push(dir);
    const env = { MNEMO_DATA_DIR: join(dir, 'data') };
    // Made on first use (before the API ever started), kept after, readable by its owner only.
    const made = loadTokenSecret(env);
    expect(Buffer.byteLength(made)).toBeGreaterThanOrEqual(32);
    expect(loadTokenSecret(env)).toBe(made);
    expect(statSync(join(dir, 'data', 'jwt-secret')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, 'data', 'jwt-secret'), 'utf8').trim()).toBe(made);
    // The API reads the same one, and makes an erasure key beside it; settings given win.
    const filled = withLocalSecrets(env);
    expect(filled.MNEMO_JWT_SECRET).toBe(made);
    expect(filled.MNEMO_ERASURE_KEY).toMatch(/^[0-9a-f]{96}$/);
    expect(withLocalSecrets({ ...env, MNEMO_JWT_SECRET: secret }).MNEMO_JWT_SECRET).toBe(secret);
    expect(withLocalSecrets({ ...env, MNEMO_JWKS_URL: 'https://idp.example/jwks.json' }).MNEMO_JWT_SECRET).toBeUndefined();
    expect(withLocalSecrets({ ...base })).toEqual(base);
  });
});
