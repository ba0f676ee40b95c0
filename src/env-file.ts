import { existsSync } from 'node:fs';
import { ConfigError } from './config.ts';

/**
 * Settings from a file, so that the API, the worker (often started in a second shell) and the
 * CLI see the same settings without exporting them in each shell: `./.env` in the working
 * directory when present, or the file MNEMO_ENV_FILE names (`MNEMO_ENV_FILE=` loads none).
 * Called first thing by each entry point, before the configuration is read (src/config.ts).
 *
 * A variable already set in the environment wins over the file, an empty one included: Node's
 * `process.loadEnvFile` never overwrites (checked by test/e2e/dotenv.test.ts), so a one-off
 * `PORT=3001 npm start` or a deployment's own variables still decide. The file's syntax is
 * Node's: `NAME=value` lines, `#` comments, optional quotes and `export `.
 *
 * Returns the file loaded, if any.
 */
export function loadEnvFile(): string | undefined {
  const named = process.env.MNEMO_ENV_FILE;
  if (named === '') return undefined;
  const file = named ?? '.env';
  // The default file is optional; a file someone named must be there.
  if (named === undefined && !existsSync(file)) return undefined;
  // process.loadEnvFile came with Node 20.12.
  if (typeof process.loadEnvFile !== 'function') {
    throw new ConfigError('MNEMO_ENV_FILE', `(default .env): reading ${file} needs Node 20.12 or later (this is ${process.version})`);
  }
  try {
    process.loadEnvFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error instanceof Error ? error.message : String(error));
    throw new ConfigError('MNEMO_ENV_FILE', `(default .env): cannot read ${file} (${code})`);
  }
  return file;
}
