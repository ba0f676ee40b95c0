/**
 * Secrets the embedded mode generates on its first run, so `npm start` needs no settings: the
 * HS256 key tokens are signed with (MNEMO_JWT_SECRET) and the erasure key (MNEMO_ERASURE_KEY),
 * each in a file of the data directory readable by its owner only. A variable set in the
 * environment always wins; the files are only read or made when it is not.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { ensureDataDir, resolveDataDir } from './data-dir.ts';

export const SECRET_FILES = { jwtSecret: 'jwt-secret', erasureKey: 'erasure-key' } as const;

/** 48 random bytes as hex (96 characters): well over the 32 bytes both settings require. */
const generate = () => randomBytes(48).toString('hex');

/**
 * Reads the secret in `dir/name`, or makes it (exclusively: two first runs cannot disagree). The
 * directory is made owner-only first: a key read from a directory others could write to may be
 * one they put there.
 */
export function localSecret(dir: string, name: string): string {
  ensureDataDir(dir);
  const file = join(dir, name);
  if (!existsSync(file)) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, `${generate()}\n`);
      closeSync(fd);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  return readFileSync(file, 'utf8').trim();
}

/** The secret in `dir/name` if it exists, without making one (for `mnemo token`). */
export function existingLocalSecret(dir: string, name: string): string | undefined {
  const file = join(dir, name);
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
}

/**
 * The environment the API runs with: as given, and, with embedded storage (no DATABASE_URL), the
 * data directory's secrets for what is not set — the token key unless MNEMO_JWT_SECRET or
 * MNEMO_JWKS_URL is, the erasure key unless MNEMO_ERASURE_KEY is. Server deployments set their own.
 */
export function withLocalSecrets(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (env.DATABASE_URL?.trim()) return env;
  const dir = resolveDataDir(env);
  const filled = { ...env };
  if (!env.MNEMO_JWT_SECRET?.trim() && !env.MNEMO_JWKS_URL?.trim()) filled.MNEMO_JWT_SECRET = localSecret(dir, SECRET_FILES.jwtSecret);
  if (!env.MNEMO_ERASURE_KEY?.trim()) filled.MNEMO_ERASURE_KEY = localSecret(dir, SECRET_FILES.erasureKey);
  return filled;
}
