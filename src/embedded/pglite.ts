/**
 * A PGlite with the extensions the migrations need (pgvector, btree_gin): the one place it is
 * created, for the embedded mode and for tests that run on it. Loaded only when called: PGlite
 * and its extensions are tens of megabytes of WebAssembly.
 */
import type { PGlite } from '@electric-sql/pglite';

export interface PGliteOptions {
  /** Where its files live; absent, in memory. */
  dataDir?: string;
  /** A dump of a data directory (`dumpDataDir()`) to start from, instead of an empty database. */
  loadDataDir?: Blob;
}

export async function createPGlite({ dataDir, loadDataDir }: PGliteOptions = {}): Promise<PGlite> {
  const [{ PGlite }, { vector }, { btree_gin }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('@electric-sql/pglite-pgvector'),
    import('@electric-sql/pglite/contrib/btree_gin'),
  ]);
  return PGlite.create({ ...(dataDir && { dataDir }), ...(loadDataDir && { loadDataDir }), extensions: { vector, btree_gin } });
}
