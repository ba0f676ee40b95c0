import { loadMigrateConfig, loadTokenSecret } from '../config.ts';
import { loadEnvFile } from '../env-file.ts';
import { migrate } from '../db/migrate.ts';
import { mintDevToken } from '../auth/dev-token.ts';
import { roles } from '../auth/claims.ts';
import { asCommand, CommandFailed, parseFlags, runCli, UsageError } from './args.ts';
import { consoleLink } from './console-link.ts';

const usage = `Usage: mnemo <command> [options]

Settings are environment variables; ./.env is read when present (MNEMO_ENV_FILE names another
file), and a variable set in the environment wins over it.

Commands:
  serve                 run the API (same as npm start)
  worker                run the BullMQ workers (same as npm run worker)
  migrate               apply database migrations (DATABASE_ADMIN_URL, else DATABASE_URL)
  export --out FILE     write every row of the embedded data directory (MNEMO_DATA_DIR, else ./.mnemo) to FILE
  restore --in FILE     load an export into an empty, migrated PostgreSQL (DATABASE_ADMIN_URL, else DATABASE_URL)
  token                 mint a development HS256 token signed with MNEMO_JWT_SECRET (with no DATABASE_URL:
                        the embedded data directory's key, the one npm start uses)
      --tenant T          tenant id (tid)                                  required
      --sub S             subject (user or app key id)                     required
      --role R            admin | member | service                         required
      --projects-read p1,p2   --projects-write p1,p2
      --orgs-read o1,o2       --orgs-write o1,o2
      --ttl SECONDS       lifetime, default 3600
      --json              print {token, claims, expiresAt} instead of the bare token
      --console           print a link that signs the console in with it (token in the fragment)
      --console-url URL   the API the link opens, default http://localhost:3000
  reembed               switch search to the configured model (KINDGI_MEMORY_EMBEDDINGS*): register it,
                        queue its backfill for the worker, print its state
      --watch             show the backfill's progress until search has switched to it
      --no-start          only print (or watch) the state; queue nothing
  embeddings-server     serve the local embedding model (use-lite-512) over an OpenAI-compatible API
      --port P            default 11435
      --host H            default 127.0.0.1
  memory report         episodic coverage of a local KiwiFS folder (no server): episodes no merged-from covers
      --root DIR          the knowledge folder                             required
      --json              print the report as JSON (KiwiFS's shape) instead of a table
      --episodes-prefix P default: .kiwi/config.toml [memory] episodes_path_prefix, else episodes/
      --limit N  --offset N   cut the listed episodes (not the counts); --limit 0 lists all
  import                load a KiwiFS folder as facts through the API, one per markdown file, by path;
                        a second run writes only what changed (supersede)
      --root DIR          the knowledge folder                             required
      --url URL           the Mnemo API, e.g. http://localhost:3000         required
      --token T           bearer token (or MNEMO_TOKEN)                    required
      --type T            fact type, default kiwi.page
      --episodes-prefix P as for memory report (an episode without episode_id is named by its id)
  erase                 erase a person's data, a conversation or a fact through the API (tenant admin),
                        and follow it until it has completed or failed
      --url URL           the Mnemo API, e.g. http://localhost:3000         required
      --token T           bearer token of a tenant admin (or MNEMO_TOKEN)  required
      --subject KIND:ID   a person: participant:ID or external:ID          one target
      --conversation ID   every fact of a conversation (thread id)
      --fact UUID         one fact
      --resume ERASURE_ID run a failed erasure again (e.g. after a legal hold was lifted) and follow it
      --no-wait           print the erasure id and exit without following it
`;

const list = (value: string | undefined) =>
  value
    ? value
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean)
    : [];

async function token(argv: string[]): Promise<void> {
  const values = parseFlags(argv, {
    tenant: { type: 'string' },
    sub: { type: 'string' },
    role: { type: 'string' },
    'projects-read': { type: 'string' },
    'projects-write': { type: 'string' },
    'orgs-read': { type: 'string' },
    'orgs-write': { type: 'string' },
    ttl: { type: 'string', default: '3600' },
    json: { type: 'boolean', default: false },
    console: { type: 'boolean', default: false },
    'console-url': { type: 'string', default: 'http://localhost:3000' },
  });
  for (const name of ['tenant', 'sub', 'role'] as const) {
    if (!values[name]) throw new UsageError(`--${name} is required`);
  }
  if (!(roles as readonly string[]).includes(values.role!)) {
    throw new UsageError(`--role must be one of ${roles.join(', ')}`);
  }
  const ttlSeconds = Number(values.ttl);
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1) {
    throw new UsageError('--ttl must be a whole number of seconds, at least 1');
  }
  const now = new Date();
  const { token, claims } = await mintDevToken({
    secret: loadTokenSecret(process.env),
    claims: {
      tid: values.tenant!,
      sub: values.sub!,
      role: values.role as (typeof roles)[number],
      projects: { read: list(values['projects-read']), write: list(values['projects-write']) },
      orgs: { read: list(values['orgs-read']), write: list(values['orgs-write']) },
    },
    ttlSeconds,
    issuer: process.env.MNEMO_JWT_ISSUER || undefined,
    audience: process.env.MNEMO_JWT_AUDIENCE || undefined,
    now,
  });
  const expiresAt = new Date(now.getTime() + ttlSeconds * 1000).toISOString();
  if (values.console) {
    // In the fragment, which the browser never sends: the console moves it into the tab's
    // sessionStorage and out of the address bar at once (console/api.ts).
    process.stdout.write(`${consoleLink(values['console-url']!, token)}\n`);
    return;
  }
  process.stdout.write(values.json ? `${JSON.stringify({ token, claims, expiresAt })}\n` : `${token}\n`);
}

async function runMigrate(): Promise<void> {
  const { adminUrl, appUrl, distribution } = loadMigrateConfig(process.env);
  await migrate({ adminUrl, appUrl, distribution, log: (message) => process.stderr.write(`${message}\n`) });
}

async function exportDataDir(argv: string[]): Promise<void> {
  const values = parseFlags(argv, { out: { type: 'string' } });
  if (!values.out) throw new UsageError('--out FILE is required');
  const [{ exportEmbedded }, { resolveDataDir, displayDataDir }] = await Promise.all([import('../embedded/export.ts'), import('../embedded/data-dir.ts')]);
  const dataDir = resolveDataDir(process.env);
  const header = await exportEmbedded({ dataDir, out: values.out, log: (message) => process.stderr.write(`${message}\n`) });
  const rows = Object.values(header.tables).reduce((sum, t) => sum + t.rows, 0);
  process.stderr.write(`export: ${rows} rows of ${Object.keys(header.tables).length} tables from ${displayDataDir(dataDir)} (${header.migrations} migrations) written to ${values.out}\n`);
}

async function restoreExport(argv: string[]): Promise<void> {
  const values = parseFlags(argv, { in: { type: 'string' } });
  if (!values.in) throw new UsageError('--in FILE is required');
  if (!process.env.DATABASE_ADMIN_URL && !process.env.DATABASE_URL) {
    throw new UsageError('set DATABASE_ADMIN_URL (a superuser of the target database), else DATABASE_URL');
  }
  const { adminUrl } = loadMigrateConfig(process.env);
  const { restore, RestoreRefused } = await import('../embedded/restore.ts');
  const restored = await restore({ url: adminUrl, file: values.in, log: (message) => process.stderr.write(`${message}\n`) }).catch((error: unknown) => {
    // A refusal is worded for the operator: one line, named for the command.
    throw error instanceof RestoreRefused ? new CommandFailed(error.message) : error;
  });
  const rows = Object.values(restored).reduce((sum, n) => sum + n, 0);
  process.stderr.write(`restore: ${rows} rows of ${Object.keys(restored).length} tables committed\n`);
}

async function main(argv: string[]): Promise<void> {
  loadEnvFile();
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      await import('../server.ts');
      return;
    case 'worker':
      await import('../../workers/index.ts');
      return;
    case 'migrate':
      return runMigrate();
    case 'token':
      return asCommand('mnemo token', () => token(rest));
    case 'export':
      return asCommand('mnemo export', () => exportDataDir(rest));
    case 'restore':
      return asCommand('mnemo restore', () => restoreExport(rest));
    case 'reembed':
      return (await import('./reembed.ts')).reembed(rest);
    case 'embeddings-server':
      return (await import('./embeddings-server.ts')).embeddingsServer(rest);
    case 'memory':
      return (await import('./memory.ts')).memory(rest);
    case 'import':
      return (await import('./import.ts')).importFolder(rest);
    case 'erase':
      return (await import('./erase.ts')).erase(rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(usage);
      return;
    default:
      throw new UsageError(`unknown command "${command}"\n\n${usage}`);
  }
}

runCli(() => main(process.argv.slice(2)));
