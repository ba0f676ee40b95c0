/**
 * Searches by meaning hold no database connection while the query is being embedded (issue 12,
 * part 2): with a pool of one connection, other work runs while the embeddings endpoint is slow.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/permissions.ts';
import { connect, type Database, withTenant } from '../../src/db/client.ts';
import { registerModel } from '../../src/memory/facts/vectors.ts';
import { writeFact } from '../../src/memory/facts/insert.ts';
import { type QueryEmbedder, retrieve } from '../../src/memory/retrieval/retrieve.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { sleep } from '../../support/wait.ts';

const DIMS = 8;

describe('retrieve while the query is embedded', () => {
  let t: TestDatabase;
  let single: Database;
  const principal: Principal = { tenantId: uniqueTenant('conn'), sub: 'a', role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] } };

  beforeAll(async () => {
    t = await createTestDatabase();
    await registerModel(t.app.db, 'gated-model', DIMS);
    await writeFact({ db: t.app.db, principal }, { type: 'acme.note', content: { text: 'The dishwasher is leaking.' } });
    single = connect(t.appUrl, { max: 1, applicationName: 'mnemo-test-single' });
  });
  afterAll(async () => {
    await single?.close();
    await t?.drop();
  });

  it.each(['semantic', 'both'] as const)('%s: the only connection of the pool stays free until the query vector is back', async (mode) => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let asked = false;
    const embedder: QueryEmbedder = {
      async embed() {
        asked = true;
        await gate;
        return Array.from({ length: DIMS }, (_, i) => (i === 0 ? 1 : 0));
      },
    };
    const search = retrieve({ db: single.db, principal, embedder }, { mode, query: 'dishwasher' });
    while (!asked) await sleep(5);

    // With the connection held by the search, this would wait for the gate, which never opens.
    const other = withTenant(single.db, principal.tenantId, async (tx) => tx.execute(sql`select 1 as one`));
    const outcome = await Promise.race([other.then(() => 'ran'), new Promise((resolve) => setTimeout(() => resolve('blocked'), 3000))]);
    release();
    expect(outcome).toBe('ran');

    const { results, journal } = await search;
    expect(journal).toMatchObject({ mode, embeddingModel: 'gated-model' });
    if (mode === 'both') expect(results.map((r) => r.fact.content)).toEqual([{ text: 'The dishwasher is leaking.' }]);
  });
});
