/**
 * A real API process (`src/server.ts`, as operators run it) over a test database of its own and
 * the machine's Redis under a queue prefix of its own, for the fault rows that attack the API
 * from outside: it is stopped with SIGTERM and everything it left in Redis is removed.
 */
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { TEST_ERASURE_KEY, TEST_SECRET } from '../../helpers/api.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { freePort, killProcess, type RunningProcess, startProcess, stopProcess } from '../../helpers/process.ts';
import { removeQueuePrefix } from '../../helpers/redis.ts';

export interface ApiProcess {
  url: string;
  db: TestDatabase;
  process: RunningProcess;
  stop(): Promise<void>;
}

/**
 * Starts the API with HS256 tokens of TEST_SECRET and erasure on; `env` adds or overrides
 * variables (a variable set to undefined is left out, e.g. `MNEMO_JWT_SECRET: undefined`).
 */
export async function startApiProcess(env: Record<string, string | undefined> = {}): Promise<ApiProcess> {
  const db = await createTestDatabase();
  const port = await freePort();
  const prefix = `mnemo-faults-${randomBytes(4).toString('hex')}`;
  const variables: Record<string, string | undefined> = {
    DATABASE_URL: db.appUrl,
    REDIS_URL: inject('redisUrl'),
    MNEMO_JWT_SECRET: TEST_SECRET,
    MNEMO_ERASURE_KEY: TEST_ERASURE_KEY,
    MNEMO_QUEUE_PREFIX: prefix,
    MNEMO_SHUTDOWN_TIMEOUT_MS: '5000',
    PORT: String(port),
    ...env,
  };
  const api = startProcess(
    'src/server.ts',
    [],
    Object.fromEntries(Object.entries(variables).filter(([, value]) => value !== undefined)),
  );
  try {
    await api.waitFor('"api listening"', 30_000);
  } catch (error) {
    await killProcess(api);
    await db.drop();
    throw error;
  }

  return {
    url: `http://127.0.0.1:${port}`,
    db,
    process: api,
    async stop() {
      await stopProcess(api, 10_000);
      // Jobs the API queued (reports, erasures) under this prefix only; never beyond it.
      await removeQueuePrefix(prefix);
      await db.drop();
    },
  };
}
