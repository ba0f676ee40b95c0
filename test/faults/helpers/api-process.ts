/**
 * A real API process (`src/server.ts`, as operators run it) over a test database of its own and
 * the machine's Redis under a queue prefix of its own, for the fault rows that attack the API
 * from outside: it is killed and everything it left in Redis is removed.
 */
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { type Deployment, startDeployment } from '../../helpers/deployment.ts';
import type { RunningProcess } from '../../../support/processes.ts';

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
  let deployment: Deployment;
  try {
    deployment = await startDeployment({ db, env });
  } catch (error) {
    await db.drop();
    throw error;
  }
  return {
    url: deployment.apiUrl,
    db,
    process: deployment.api,
    async stop() {
      await deployment.close();
      await db.drop();
    },
  };
}
