/**
 * A child process for the fault suite: many tenant transactions in flight at once through the
 * app's own client (`connect` + `withTenant`), as the worker runs them, until SIGUSR2; then it
 * prints one JSON line of counts and exits 0. An uncaught exception in the driver ends it with
 * exit code 1 instead: the PostgreSQL crash row uses it to show that the database dying under
 * open transactions cannot kill a process (issue 10, defect 1: postgres.js wrote to a closed
 * socket from a setImmediate).
 *
 * Usage: node --import tsx transaction-loop.ts DATABASE_URL [LOOPS]
 */
import { sql } from 'drizzle-orm';
import { connect, withTenant } from '../../../src/db/client.ts';
import { databaseUnavailableReason } from '../../../src/db/errors.ts';
import { sleep } from '../../../support/wait.ts';

const [url, loops = '24'] = process.argv.slice(2);
if (!url) throw new Error('usage: transaction-loop.ts DATABASE_URL [LOOPS]');
const database = connect(url, { max: 10, connectTimeoutMs: 1000 });
let committed = 0;
let unavailable = 0;
let other = 0;
let stop = false;
const otherErrors = new Set<string>();

async function loop(n: number): Promise<void> {
  for (let i = 0; !stop; i++) {
    try {
      await withTenant(database.db, `loop-${n}`, async (tx) => {
        await tx.execute(sql`select count(*) from facts`);
        await tx.execute(sql`select pg_sleep(0.002)`);
        await tx.execute(sql`select ${`${n}-${i}`}::text as v`);
      });
      committed++;
    } catch (error) {
      if (databaseUnavailableReason(error)) unavailable++;
      else {
        other++;
        otherErrors.add(String((error as { code?: unknown }).code ?? (error as Error).name));
      }
      await sleep(20);
    }
  }
}

const running = Array.from({ length: Number(loops) }, (_, n) => loop(n));
process.on('SIGUSR2', () => {
  stop = true;
  void Promise.all(running).then(async () => {
    process.stdout.write(`${JSON.stringify({ committed, unavailable, other, otherErrors: [...otherErrors] })}\n`);
    await database.close({ timeoutSeconds: 1 });
    process.exit(0);
  });
});
process.stdout.write('looping\n');
