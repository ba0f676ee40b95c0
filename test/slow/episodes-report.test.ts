/** The coverage report streaming 100,000 episodes (test/helpers/episodes-report.ts; 10,000 in npm test). */
import { afterAll, beforeAll, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { checkStreamedReport } from '../helpers/episodes-report.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db?.drop());

it('a report over 100,000 episodes: lists cut to the page, counts complete', async () => {
  await checkStreamedReport(db, 100_000);
});
