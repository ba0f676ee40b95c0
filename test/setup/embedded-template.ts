/**
 * The embedded run's template: one PGlite migrated as `mnemo migrate` migrates a server (the
 * run's app login role provisioned), dumped to a file that every test file loads into a PGlite of
 * its own (test/helpers/database.ts), so no file pays for the migrations.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate } from '../../src/db/migrate.ts';
import { createPGlite } from '../../src/embedded/pglite.ts';
import { startWireServer } from '../../src/embedded/wire-server.ts';
import { TEST_APP_PASSWORD, testAppRole } from '../../support/urls.ts';

export async function createEmbeddedTemplate(runId: string): Promise<{ file: string; remove(): void }> {
  const started = performance.now();
  const pglite = await createPGlite();
  try {
    const server = await startWireServer(pglite);
    try {
      const at = `127.0.0.1:${server.port}`;
      await migrate({ adminUrl: `postgres://postgres@${at}/postgres`, appUrl: `postgres://${testAppRole(runId)}:${TEST_APP_PASSWORD}@${at}/postgres` });
    } finally {
      await server.close();
    }
    // Every test file loads this dump, and PGlite's two template databases were 15 of its 41 MB:
    // nothing a test runs makes a database from them (PGlite has one), and a load costs a quarter less.
    await pglite.exec(`update pg_database set datistemplate = false where datname in ('template0', 'template1')`);
    await pglite.exec('drop database template0');
    await pglite.exec('drop database template1');
    await pglite.exec('checkpoint');
    const dump = await pglite.dumpDataDir('none');
    const file = join(tmpdir(), `mnemo-test-${runId}-template.tar`);
    writeFileSync(file, Buffer.from(await dump.arrayBuffer()), { mode: 0o600 });
    console.log(`Tests run on embedded PostgreSQL (PGlite): template migrated in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return { file, remove: () => rmSync(file, { force: true }) };
  } finally {
    await pglite.close();
  }
}
