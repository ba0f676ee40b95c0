/**
 * The environment Mnemo reads (DESIGN §2), as one zod schema: each variable with its parse, its
 * default and its doc. src/config.ts parses it once per process, and a bad value stops startup
 * with one line naming the variable.
 */
import { z } from 'zod';
import { LOCAL_MODEL } from './local-model.ts';
import { defaultRateLimits, type RateLimitClass, rateLimitSchema } from './rate-limits.ts';
import { DEFAULT_REMEMBER_SETTINGS } from './remember-settings.ts';
import { type SettingDoc, setting, settingDocs } from './setting-docs.ts';

/** Where the embedded mode keeps its data without MNEMO_DATA_DIR, relative to the working directory (src/embedded/data-dir.ts). */
export const DEFAULT_DATA_DIR = '.mnemo';

const urlOf = (protocols: readonly string[]) => `a URL starting with ${protocols.map((p) => `\`${p}//\``).join(' or ')}`;

const optionalText = () =>
  z
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

const rateLimitDoc = (routeClass: RateLimitClass, what: string): SettingDoc => ({
  group: 'Rate limits',
  readBy: ['server', 'embedded'],
  default: defaultRateLimits[routeClass],
  accepts: '`<per caller>/<per tenant>` requests a minute (each at least 1, per caller at most per tenant), or `off`',
  meaning: what,
});

/** A secret or key: unset when empty, else at least 32 bytes. */
const key = () =>
  z.preprocess(
    (value) => (value === '' ? undefined : value),
    z
      .string()
      .refine((secret) => Buffer.byteLength(secret, 'utf8') >= 32, 'must be at least 32 bytes')
      .optional(),
  );

const postgresProtocols = ['postgres:', 'postgresql:'] as const;
const redisProtocols = ['redis:', 'rediss:'] as const;
const httpUrl = ['http:', 'https:'] as const;

const metricsPortRange = 'must be a port number from 1 to 65535, or 0 to serve no metrics';

/** Both API modes. */
const api = ['server', 'embedded'] as const;
/** Whoever runs the jobs: the worker, or the API itself without REDIS_URL (src/jobs/in-process.ts). */
const jobRunners = ['worker', 'server', 'embedded'] as const;

export const environmentSchema = z
  .object({
    DATABASE_URL: setting(
      {
        group: 'Storage',
        readBy: ['server', 'worker', 'mnemo migrate', 'mnemo restore', 'mnemo reembed', 'mnemo token'],
        accepts: urlOf(postgresProtocols),
        unset: 'the API runs the embedded PostgreSQL in `MNEMO_DATA_DIR`; the worker and `mnemo reembed` require it',
        meaning:
          "The PostgreSQL database, as the app's own role: not the tables' owner, not a superuser, no `BYPASSRLS`, and a member of the database's app group `mnemo_app_<database>`; the API and the worker refuse to start as any other role ([database roles](production.md#database-roles)). `mnemo migrate` and `mnemo restore` use it when `DATABASE_ADMIN_URL` is unset. With it set, `mnemo token` signs only with `MNEMO_JWT_SECRET`.",
      },
      optionalUrl(postgresProtocols),
    ),
    DATABASE_ADMIN_URL: setting(
      {
        group: 'Storage',
        readBy: ['mnemo migrate', 'mnemo restore'],
        accepts: urlOf(postgresProtocols),
        unset: '`DATABASE_URL`',
        meaning:
          "The tables' owner, used only to apply migrations (`mnemo migrate`, `npm run migrate`) and, as a superuser of the target database, by `mnemo restore`. When it is set, `mnemo migrate` also creates or updates `DATABASE_URL`'s role and grants it the database's own app group `mnemo_app_<database>`. It must reach PostgreSQL itself, not PgBouncer: migrate holds a session advisory lock for the whole run.",
      },
      optionalUrl(postgresProtocols),
    ),
    DATABASE_READ_URL: setting(
      {
        group: 'Storage',
        readBy: ['server'],
        accepts: urlOf(postgresProtocols),
        unset: 'every read goes to `DATABASE_URL`',
        meaning:
          "A streaming replica of `DATABASE_URL`'s database, as the same app role (checked as the primary's is). Lists, single-fact reads, revisions, retrieve, context and the coverage report read from it, and each caller still reads its own writes (WAL positions, kept in Redis under `<MNEMO_QUEUE_PREFIX>:written:`); it must reach one server, not a balancer over several replicas ([read replicas](scaling-and-citus.md#read-replicas)). Workers and migrations never use it; refused without `DATABASE_URL`.",
      },
      optionalUrl(postgresProtocols),
    ),
    REDIS_URL: setting(
      {
        group: 'Jobs',
        readBy: ['server', 'worker', 'mnemo reembed'],
        accepts: urlOf(redisProtocols),
        unset: 'the API runs the jobs itself (claimed from PostgreSQL) and keeps rate limits in its memory; the worker requires it',
        meaning:
          'Redis, for the BullMQ job queues, the rate-limit counters every API node shares, and the write positions that let each caller read its own writes from a replica. Writes commit without it: while it is down the reconciler finds the work in PostgreSQL later. Refused without `DATABASE_URL`: workers could not reach the embedded database.',
      },
      optionalUrl(redisProtocols),
    ),
    PORT: setting(
      {
        group: 'Processes',
        readBy: api,
        default: 3000,
        meaning: "The API's HTTP port; the API serves `/metrics` on it too.",
      },
      z.coerce
        .number({ message: 'must be a port number' })
        .int('must be a whole number')
        .min(1, 'must be between 1 and 65535')
        .max(65535, 'must be between 1 and 65535'),
    ),
    MNEMO_METRICS_PORT: setting(
      {
        group: 'Processes',
        readBy: ['worker'],
        default: 9464,
        meaning: "The worker's port for `/metrics` and `/healthz`; `0` serves neither. A port already taken is logged and the worker runs without it.",
      },
      z.coerce
        .number({ message: metricsPortRange })
        .int(metricsPortRange)
        .min(0, metricsPortRange)
        .max(65535, metricsPortRange),
    ),
    MNEMO_JWT_SECRET: setting(
      {
        group: 'Tokens',
        readBy: [...api, 'mnemo token'],
        accepts: 'text of at least 32 bytes (UTF-8)',
        unset: 'embedded: made on the first run, in the data directory (`jwt-secret`); on a PostgreSQL server the API then needs `MNEMO_JWKS_URL`',
        meaning: 'The HS256 key tokens are verified with (development, tests, simple deployments), and the one `mnemo token` signs with. The API needs it or `MNEMO_JWKS_URL`.',
      },
      key(),
    ),
    MNEMO_ERASURE_KEY: setting(
      {
        group: 'Retention and erasure',
        readBy: api,
        accepts: 'text of at least 32 bytes (UTF-8)',
        unset: 'embedded: made on the first run, in the data directory (`erasure-key`); on a PostgreSQL server erasure is off, and its requests answer 501 `memory-operation-unsupported`',
        meaning:
          "The HMAC key erasure records hash a person's or a conversation's id with; a record keeps only that hash (DESIGN §10; [retention and erasure](../guide/retention-and-erasure.md)). Set the same key on every API node, and change it only when no erasure is pending or running: writes are checked against the hashes of open erasures, and a hash made with the old key no longer matches.",
      },
      key(),
    ),
    MNEMO_JWKS_URL: setting(
      {
        group: 'Tokens',
        readBy: api,
        accepts: urlOf(httpUrl),
        unset: 'tokens are verified with `MNEMO_JWT_SECRET` only',
        meaning: "The JWKS URL of the tenants' identity provider: tokens signed with RS256, ES256 or EdDSA are verified with its keys.",
      },
      optionalUrl(httpUrl),
    ),
    MNEMO_JWT_ISSUER: setting(
      {
        group: 'Tokens',
        readBy: [...api, 'mnemo token'],
        accepts: 'text',
        unset: 'not checked',
        meaning: "A token's `iss` must be this; `mnemo token` writes it into the tokens it makes.",
      },
      optionalText(),
    ),
    MNEMO_JWT_AUDIENCE: setting(
      {
        group: 'Tokens',
        readBy: [...api, 'mnemo token'],
        accepts: 'text',
        unset: 'not checked',
        meaning: "A token's `aud` must name this; `mnemo token` writes it into the tokens it makes.",
      },
      optionalText(),
    ),
    MNEMO_DATA_DIR: setting(
      {
        group: 'Storage',
        readBy: ['embedded', 'mnemo token', 'mnemo export'],
        accepts: 'a directory, relative to the working directory or absolute',
        unset: `\`./${DEFAULT_DATA_DIR}\` in the working directory`,
        meaning:
          "The embedded mode's data: PGlite's files (`pgdata/`), the keys made on the first run (`jwt-secret`, `erasure-key`) and, while a process uses it, a lock file: a second process on the same directory is refused. It is made owner-only (0700), or refused when it is open to others and not this user's to change. `mnemo token` reads the token key there; `mnemo export` exports it.",
      },
      optionalText(),
    ),
    KINDGI_MEMORY_EMBEDDINGS: setting(
      {
        group: 'Search by meaning',
        readBy: [...jobRunners, 'mnemo reembed'],
        unset: 'keyword search only',
        meaning: `\`openai-compat\` turns on search by meaning through an OpenAI-compatible embeddings endpoint (\`KINDGI_MEMORY_EMBEDDINGS_URL\`, \`KINDGI_MEMORY_EMBEDDINGS_MODEL\`). \`local\` runs the built-in model (${LOCAL_MODEL}) in the API's own process, with no other server; the jobs then run there too, so the worker refuses it (serve the model with \`mnemo embeddings-server\` and use \`openai-compat\`). \`mnemo reembed\` needs \`openai-compat\` ([search by meaning](../guide/search.md#turning-on-search-by-meaning)).`,
      },
      z.preprocess(
        (value) => (value === '' ? undefined : value),
        z.enum(['openai-compat', 'local'], { message: 'must be "openai-compat", "local" or unset' }).optional(),
      ),
    ),
    KINDGI_MEMORY_EMBEDDINGS_URL: setting(
      {
        group: 'Search by meaning',
        readBy: [...jobRunners, 'mnemo reembed'],
        accepts: urlOf(httpUrl),
        unset: 'required with `KINDGI_MEMORY_EMBEDDINGS=openai-compat`',
        meaning: "The embeddings endpoint's base URL, e.g. `http://localhost:11434/v1`.",
      },
      optionalUrl(httpUrl),
    ),
    KINDGI_MEMORY_EMBEDDINGS_MODEL: setting(
      {
        group: 'Search by meaning',
        readBy: [...jobRunners, 'mnemo reembed'],
        accepts: 'a model name the endpoint serves',
        unset: 'required with `KINDGI_MEMORY_EMBEDDINGS=openai-compat`',
        meaning: `The model to embed with, e.g. \`nomic-embed-text\` (\`mnemo embeddings-server\` serves \`${LOCAL_MODEL}\` and its \`--alias\` names). A name the endpoint does not have is logged by the worker at startup, and embed jobs then fail for good with that message instead of retrying. Changing it switches models ([changing the embedding model](../guide/search.md#changing-the-embedding-model), \`mnemo reembed\`).`,
      },
      optionalText(),
    ),
    KINDGI_MEMORY_EMBEDDINGS_API_KEY: setting(
      {
        group: 'Search by meaning',
        readBy: [...jobRunners, 'mnemo reembed'],
        accepts: 'text',
        unset: 'no key is sent',
        meaning: 'The bearer key sent to the embeddings endpoint.',
      },
      optionalText(),
    ),
    MNEMO_SEMANTIC_WEIGHT: setting(
      {
        group: 'Search by meaning',
        readBy: api,
        unset: 'the measured weight of a known model (use-lite-512: 0.075; src/embeddings/registry.ts), else 1',
        meaning:
          "The configured model's weight in retrieval mode `both` (the keyword list weighs 1; DESIGN §5); a request's own `weights` win. use-lite-512's measured 0.075: at equal weights it pulled `both` 0.10 below keyword on cranfield and cacm. `npm run bench -- --calibrate` prints the weight a model should get ([fusion weights](../guide/search.md#fusion-weights)). During a model switch, the model still serving keeps its own default.",
      },
      z.preprocess(
        (value) => (value === '' ? undefined : value),
        z.coerce
          .number({ message: 'must be a number from 0 to 100' })
          .min(0, 'must be a number from 0 to 100')
          .max(100, 'must be a number from 0 to 100')
          .optional(),
      ),
    ),
    KINDGI_MEMORY_EMBEDDINGS_BATCH_SIZE: setting(
      {
        group: 'Search by meaning',
        readBy: [...jobRunners, 'mnemo reembed'],
        default: 64,
        meaning: 'Texts sent in one embeddings request; each batch is one endpoint request, one read and one write transaction.',
      },
      z.coerce.number().int('must be a whole number').min(1, 'must be between 1 and 2048').max(2048, 'must be between 1 and 2048'),
    ),
    LOG_LEVEL: setting(
      {
        group: 'Processes',
        readBy: [...api, 'worker'],
        default: 'info',
        meaning: 'The least severe log lines written (JSON, one line each, on standard output).',
      },
      z.enum(['debug', 'info', 'warn', 'error'], { message: 'must be debug, info, warn or error' }),
    ),
    MNEMO_SERVER_TIMING: setting(
      {
        group: 'Processes',
        readBy: [...api],
        default: 'false',
        meaning:
          "`true` adds a `Server-Timing` header to every answer: the milliseconds of each phase (authentication, the rate limit, opening and committing the tenant transaction, each search statement, loading the facts, serialising) and the total, what `npm run bench` prints as a search's breakdown ([Metrics](metrics.md#where-a-request-spends-its-time)). Off by default: the timings are for operators, not for every client.",
      },
      z.enum(['true', 'false'], { message: 'must be true or false' }).transform((value) => value === 'true'),
    ),
    MNEMO_QUEUE_PREFIX: setting(
      {
        group: 'Jobs',
        readBy: ['server', 'worker', 'mnemo reembed'],
        default: 'mnemo',
        accepts: '1 to 64 of `A-Z a-z 0-9 _ -`',
        meaning:
          'The prefix of every key Mnemo keeps in Redis (BullMQ queues, `<prefix>:rl:` rate limits, `<prefix>:written:` write positions), so several deployments can share one Redis. The API, the workers and `mnemo reembed` of one deployment must agree on it.',
      },
      z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 of A-Z a-z 0-9 _ -'),
    ),
    MNEMO_RECONCILE_EVERY_MS: setting(
      {
        group: 'Jobs',
        readBy: jobRunners,
        default: 30_000,
        meaning:
          'How often, in milliseconds, the reconciler hands in again the work Redis lost or never got (open outbox rows, facts missing their vector, due report schedules); it also runs when the worker starts, and the worker checks its repeatable schedules in Redis as often. Read by whoever runs the jobs: the worker, or the API without `REDIS_URL`.',
      },
      z.coerce.number().int('must be a whole number').min(1000, 'must be at least 1000'),
    ),
    MNEMO_RETENTION_EVERY_MS: setting(
      {
        group: 'Retention and erasure',
        readBy: jobRunners,
        default: 3_600_000,
        meaning:
          'How often, in milliseconds, the retention sweep runs (and once when the worker starts): it closes facts past their `expiresAt` ("expired") and purges content past `MNEMO_PURGE_GRACE_DAYS`. Several workers sweeping at once share the rows (`SKIP LOCKED`). Read by whoever runs the jobs.',
      },
      z.coerce.number().int('must be a whole number').min(1000, 'must be at least 1000'),
    ),
    MNEMO_PURGE_GRACE_DAYS: setting(
      {
        group: 'Retention and erasure',
        readBy: jobRunners,
        default: 7,
        meaning:
          'How long, in days (fractions allowed), the content of a deleted or expired fact is kept before the sweep removes it from the fact, every revision and every vector, keeping ids, versions and timestamps; `0`: at the next sweep.',
      },
      z.coerce.number().min(0, 'must be 0 or more').max(3650, 'must be at most 3650'),
    ),
    MNEMO_JOB_LOCK_MS: setting(
      {
        group: 'Jobs',
        readBy: jobRunners,
        default: 30_000,
        meaning: "How long, in milliseconds, a running job is held for its runner: a job whose worker died runs again after this (BullMQ's lock; the lease of a job the API runs itself).",
      },
      z.coerce.number().int('must be a whole number').min(1000, 'must be at least 1000'),
    ),
    MNEMO_DISTRIBUTED: setting(
      {
        group: 'Storage',
        readBy: ['mnemo migrate'],
        default: 'auto',
        meaning:
          'What `mnemo migrate` does on a Citus coordinator: `auto` distributes the tables by tenant when the database has the citus extension, `citus` fails without it, `off` never distributes ([Citus](scaling-and-citus.md#citus)).',
      },
      z.enum(['auto', 'citus', 'off'], { message: 'must be auto, citus or off' }),
    ),
    MNEMO_DB_PREPARED_STATEMENTS: setting(
      {
        group: 'Storage',
        readBy: ['server', 'worker', 'mnemo reembed'],
        default: 'true',
        meaning:
          'Server-side prepared statements. Set `false` behind PgBouncer in transaction mode before 1.21, or with `max_prepared_statements = 0`: left on there, requests hang ([PgBouncer](scaling-and-citus.md#pgbouncer)); docker-compose.yml runs with `false`. Migrations connect to PostgreSQL directly and do not read it.',
      },
      z.enum(['true', 'false'], { message: 'must be true or false' }).transform((value) => value === 'true'),
    ),
    MNEMO_DB_CONNECT_TIMEOUT_MS: setting(
      {
        group: 'Storage',
        readBy: [...api, 'worker', 'mnemo reembed'],
        default: 3000,
        meaning: 'How long, in milliseconds, opening a database connection may take before the request answers 503 `unavailable` (with `Retry-After: 2`).',
      },
      z.coerce
        .number({ message: 'must be a number of milliseconds' })
        .int('must be a whole number of milliseconds')
        .min(100, 'must be between 100 and 60000')
        .max(60_000, 'must be between 100 and 60000'),
    ),
    MNEMO_STATEMENT_TIMEOUT_MS: setting(
      {
        group: 'Storage',
        readBy: api,
        default: 5000,
        accepts: '`0`, or a whole number of milliseconds from 100 to 3600000',
        meaning:
          "The API's `statement_timeout` for each request's transaction: the server cancels a statement running longer and the request answers 503 with `Retry-After: 1`. `0` sets none (the server's own applies). The embedded database runs its jobs under it too.",
      },
      z.coerce
        .number({ message: 'must be a number of milliseconds (0 turns it off)' })
        .int('must be a whole number of milliseconds')
        .min(0, 'must be 0 (off) or between 100 and 3600000')
        .max(3_600_000, 'must be 0 (off) or between 100 and 3600000')
        .refine((ms) => ms === 0 || ms >= 100, 'must be 0 (off) or between 100 and 3600000'),
    ),
    MNEMO_WORKER_STATEMENT_TIMEOUT_MS: setting(
      {
        group: 'Storage',
        readBy: ['worker', 'server', 'mnemo reembed'],
        default: 120_000,
        accepts: '`0`, or a whole number of milliseconds from 100 to 86400000',
        meaning:
          'The same for the worker (its batches and sweeps), `mnemo reembed`, and the jobs the API runs itself on a PostgreSQL server without `REDIS_URL`. `0` sets none.',
      },
      z.coerce
        .number({ message: 'must be a number of milliseconds (0 turns it off)' })
        .int('must be a whole number of milliseconds')
        .min(0, 'must be 0 (off) or between 100 and 86400000')
        .max(86_400_000, 'must be 0 (off) or between 100 and 86400000')
        .refine((ms) => ms === 0 || ms >= 100, 'must be 0 (off) or between 100 and 86400000'),
    ),
    MNEMO_SHUTDOWN_TIMEOUT_MS: setting(
      {
        group: 'Processes',
        readBy: [...api, 'worker'],
        default: 10_000,
        meaning:
          "How long, in milliseconds, draining after SIGTERM or SIGINT may take before the process exits anyway (with status 1). Give the orchestrator's grace period a few seconds more (compose's `stop_grace_period` is 15 s).",
      },
      z.coerce.number().int('must be a whole number').min(0, 'must be 0 or more'),
    ),
    MNEMO_RATE_LIMIT_WRITES: setting(
      rateLimitDoc(
        'writes',
        'Writes: every POST, PUT, PATCH and DELETE but searches and report requests, and the MCP tool `kindgi_remember`. Each class has a limit per caller (tenant + token `sub`) and one per tenant (all its callers), counted in Redis and shared by every API node (in the API\'s memory without `REDIS_URL`, and on each node by itself while Redis does not answer). Over a limit the answer is 429 `rate-limited` with `Retry-After` ([rate limits](rate-limits.md)).',
      ),
      rateLimitSchema,
    ),
    MNEMO_RATE_LIMIT_SEARCHES: setting(
      rateLimitDoc('searches', 'The same for searches: `POST /v1/memory/retrieve` and `POST /v1/memory/context`, and the MCP tool `memory_retrieve`.'),
      rateLimitSchema,
    ),
    MNEMO_RATE_LIMIT_REPORTS: setting(
      rateLimitDoc(
        'reports',
        'The same for coverage reports: `GET /v1/memory/report`, `GET /api/kiwi/memory/report`, `POST /v1/memory/reports` and the MCP tool `kiwi_memory_report`.',
      ),
      rateLimitSchema,
    ),
    MNEMO_RATE_LIMIT_READS: setting(
      rateLimitDoc('reads', 'The same for every other GET (facts, lists, revisions, stored reports, erasure status; a HEAD counts as its GET) and each MCP `tools/list`.'),
      rateLimitSchema,
    ),
    MNEMO_MCP_REMEMBER_TYPES: setting(
      {
        group: 'Agents over MCP',
        readBy: api,
        default: DEFAULT_REMEMBER_SETTINGS.types.join(','),
        accepts: 'fact types (`^[a-z0-9][a-z0-9._-]*$`, at most 128 characters each), comma-separated; at least one',
        meaning: 'The fact types an agent may remember through the MCP tool `kindgi_remember`; another type is a tool error naming the allowed ones.',
      },
      z
        .string()
        .transform((value) => [...new Set(value.split(',').map((type) => type.trim()).filter(Boolean))])
        .pipe(
          z
            .array(z.string().max(128, 'holds a type longer than 128 characters').regex(/^[a-z0-9][a-z0-9._-]*$/, 'must be fact types (^[a-z0-9][a-z0-9._-]*$), comma-separated'))
            .min(1, 'must name at least one fact type'),
        ),
    ),
    MNEMO_MCP_REMEMBER_KEEP_DAYS: setting(
      {
        group: 'Agents over MCP',
        readBy: api,
        default: DEFAULT_REMEMBER_SETTINGS.keepDays,
        meaning: 'How long, in days, a remembered fact is kept (`retention.keepDays`), counted again each time it is remembered.',
      },
      z.coerce.number({ message: 'must be a number of days' }).int('must be a whole number of days').min(1, 'must be at least 1').max(36_500, 'must be at most 36500'),
    ),
    MNEMO_MCP_REVIEW: setting(
      {
        group: 'Agents over MCP',
        readBy: api,
        default: DEFAULT_REMEMBER_SETTINGS.review,
        meaning:
          'Which remembered facts wait for a person to verify them before any search returns them: `instruction-like`, those that read like an instruction; `all`, every one, for a deployment that cannot afford a miss ([agents over MCP](../guide/agents-and-mcp.md#text-that-reads-like-an-instruction)).',
      },
      z.enum(['instruction-like', 'all'], { message: 'must be "instruction-like" (hold what reads like an instruction) or "all" (hold everything agents remember)' }),
    ),
    MNEMO_MCP_REVIEW_THRESHOLD: setting(
      {
        group: 'Agents over MCP',
        readBy: api,
        default: DEFAULT_REMEMBER_SETTINGS.reviewThreshold,
        accepts: 'a number above 0 and at most 1',
        meaning:
          'With `MNEMO_MCP_REVIEW=instruction-like`: the score of the learned instruction-like check (0–1) at or above which a remembered text is held, beside the patterns; lower holds more injections and more ordinary text, `1` leaves holding to the patterns alone ([the measured trade-off](../guide/agents-and-mcp.md#text-that-reads-like-an-instruction)).',
      },
      z.coerce.number({ message: 'must be a number above 0 and at most 1' }).gt(0, 'must be above 0 (0 would hold everything: use MNEMO_MCP_REVIEW=all)').max(1, 'must be at most 1'),
    ),
    MNEMO_MCP_SCOPE: setting(
      {
        group: 'Agents over MCP',
        readBy: api,
        default: DEFAULT_REMEMBER_SETTINGS.scope,
        meaning:
          "Where a token without an `mcp.scope` claim remembers: `user`, the caller's own facts (`{userId: sub}`); `tenant`, tenant-wide (only an admin may write there).",
      },
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

export type Environment = z.infer<typeof environmentSchema>;

/** Every variable Mnemo reads through the schema (test/unit/compose.test.ts holds docker-compose.yml's services to them). */
export const environmentVariables: readonly string[] = Object.keys(environmentSchema.shape);

/**
 * Each variable with its schema and its doc (undefined: read without `setting()`), in the
 * schema's order; what scripts/config-reference.ts writes docs/operations/configuration.md from.
 */
export const environmentSettings: readonly { name: string; schema: z.ZodType; doc: SettingDoc | undefined }[] = Object.entries(environmentSchema.shape).map(
  ([name, schema]) => ({ name, schema, doc: settingDocs.get(schema) }),
);
