/**
 * Writes docs/operations/configuration.md from the configuration schema
 * (src/foundation/environment.ts): each variable's meaning, default and readers live beside the
 * schema that reads it, and this only lays them out. `npm run docs:config`; test/unit/config-reference.test.ts fails when the file
 * is not what this makes.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { z } from 'zod';
import { environmentSettings } from '../src/foundation/environment.ts';
import { type SettingDoc, type SettingReader, settingGroups } from '../src/foundation/setting-docs.ts';

export const referencePath = join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'operations', 'configuration.md');

/**
 * Variables the code reads outside the schema, each where it is read: the settings file is chosen
 * before the schema runs, and the token is the CLI's, not a process's. The test holds the code to
 * this list and the schema.
 */
export const readElsewhere: Readonly<Record<string, string>> = {
  MNEMO_ENV_FILE: 'src/env-file.ts',
  MNEMO_TOKEN: 'src/cli/args.ts',
};

const code = (value: string | number) => `\`${value}\``;

const list = (items: readonly string[]) => (items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`);

/** What the schema itself says a variable accepts: its enum, or its bounds. */
function schemaAccepts(schema: z.ZodType): string | undefined {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as { type?: string; enum?: string[]; minimum?: number; maximum?: number };
  if (json.enum) return `${list(json.enum.map(code))}`;
  if (json.type !== 'integer' && json.type !== 'number') return undefined;
  const what = json.type === 'integer' ? 'a whole number' : 'a number';
  const max = json.maximum === undefined || json.maximum >= Number.MAX_SAFE_INTEGER ? undefined : json.maximum;
  if (json.minimum !== undefined && max !== undefined) return `${what} from ${json.minimum} to ${max}`;
  if (json.minimum !== undefined) return `${what}, at least ${json.minimum}`;
  return what;
}

/** "API" when both of its modes read it; then the worker; then the commands. */
function readers(readBy: readonly SettingReader[]): string {
  const has = (reader: SettingReader) => readBy.includes(reader);
  const names: string[] = [];
  if (has('server') && has('embedded')) names.push('API');
  else if (has('server')) names.push('API (server)');
  else if (has('embedded')) names.push('API (embedded)');
  if (has('worker')) names.push('worker');
  for (const reader of readBy) if (reader.startsWith('mnemo ')) names.push(code(reader));
  return names.join(', ');
}

const anchor = (name: string) => name.toLowerCase();

interface Entry {
  name: string;
  doc: SettingDoc;
  accepts: string;
  byDefault: string;
}

function entries(settings: typeof environmentSettings): Entry[] {
  return settings.map(({ name, schema, doc }) => {
    if (!doc) throw new Error(`${name} has no description: read it with setting({ group, readBy, meaning, … }, schema) in src/foundation/environment.ts`);
    const accepts = doc.accepts ?? schemaAccepts(schema);
    if (!accepts) throw new Error(`${name}: the schema cannot say what it accepts; give it \`accepts\` in src/foundation/environment.ts`);
    if (doc.default === undefined && !doc.unset) throw new Error(`${name}: say what unset means (\`unset\`) or give it a \`default\` in src/foundation/environment.ts`);
    return { name, doc, accepts, byDefault: doc.default !== undefined ? `Default: ${code(doc.default)}` : `Unset: ${doc.unset}` };
  });
}

const intro = `# Configuration

<!-- Generated from src/config.ts by \`npm run docs:config\` (scripts/config-reference.ts): change the descriptions there, not here. -->

Mnemo is configured by environment variables. Each process reads them once, when it starts, through
one zod schema (\`src/config.ts\`); a value it does not accept stops the process with one line
naming the variable, e.g. \`Invalid configuration: PORT must be between 1 and 65535\`.

**The settings file.** Before that, the API (\`npm start\`, \`mnemo serve\`), the worker
(\`npm run worker\`, \`mnemo worker\`) and every \`mnemo\` command load \`./.env\` from the directory
they start in, when there is one, or the file \`MNEMO_ENV_FILE\` names, which must then exist;
\`MNEMO_ENV_FILE=\` (empty) loads none (\`src/env-file.ts\`). The file has Node's syntax
(\`process.loadEnvFile\`, Node 20.12 or later): \`NAME=value\` lines, \`#\` comments, optional quotes
and \`export \`. A variable already set in the environment wins over the file, even when empty, so
\`PORT=3001 npm start\` still decides. \`.env.example\` holds what a local run needs. No other file
configures Mnemo: the \`.kiwi/config.toml\` that \`mnemo memory report\` and \`mnemo import\` read is
the KiwiFS folder's own (its \`episodes_path_prefix\`).

**Empty is unset.** For every variable below, an empty value is the same as none: the default
applies.

**Embedded secrets.** With embedded storage (no \`DATABASE_URL\`), the API takes \`MNEMO_JWT_SECRET\`
(unless it or \`MNEMO_JWKS_URL\` is set) and \`MNEMO_ERASURE_KEY\` from files in the data directory,
made on its first run (\`src/embedded/secrets.ts\`); a variable that is set wins.

**Read by** names the processes that read a variable: *API (server)* is the API with
\`DATABASE_URL\` set, *API (embedded)* without it, *API* either; the *worker* runs only beside a
PostgreSQL server and Redis (without \`REDIS_URL\` it says the API runs the jobs, and exits); a
\`mnemo\` command is one that reads the variable itself (\`mnemo reembed\` reads the worker's
settings).

Two more variables are read outside the schema: \`MNEMO_ENV_FILE\` (the settings file, above) and
\`MNEMO_TOKEN\`, the bearer token \`mnemo import\` and \`mnemo erase\` send when \`--token\` is not given.
The benchmarks and the test suite read a few of their own (\`MNEMO_IR_DATA\`, for one): see
[testing](../testing.md).
`;

/** The reference, from the schema's settings (another list only in the test of its guards). */
export function renderConfigurationReference(settings = environmentSettings): string {
  const all = entries(settings);
  const out = [intro];
  out.push('| variable | default | read by |', '| --- | --- | --- |');
  for (const entry of all) {
    const shown = entry.doc.default !== undefined ? code(entry.doc.default) : '—';
    out.push(`| [\`${entry.name}\`](#${anchor(entry.name)}) | ${shown} | ${readers(entry.doc.readBy)} |`);
  }
  for (const group of settingGroups) {
    const members = all.filter((entry) => entry.doc.group === group);
    if (members.length === 0) continue;
    out.push('', `## ${group}`);
    for (const { name, doc, accepts, byDefault } of members) {
      out.push('', `### \`${name}\``, '', doc.meaning, '', `- Accepts: ${accepts}`, `- ${byDefault}`, `- Read by: ${readers(doc.readBy)}`);
    }
  }
  return `${out.join('\n')}\n`;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(referencePath, renderConfigurationReference());
  process.stdout.write(`wrote ${referencePath}\n`);
}
