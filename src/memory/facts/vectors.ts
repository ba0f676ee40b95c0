/**
 * The database side of embeddings (DESIGN §8, §9): which model serves semantic search, which
 * facts still need a vector, storing vectors, and the blue-green switch to a new model.
 *
 * "Needs embedding" is not a flag to keep in step: a live fact at version v needs a vector for
 * model m exactly when `fact_embeddings` has none for (fact, m) at version v. Every write bumps
 * the version in its own transaction, so the need is recorded atomically with the write, and the
 * reconciler can always find it again, whatever Redis lost.
 *
 * Statements on tenant tables name their tenant (`tenant_id = …`) on each of them, besides
 * row-level security, so that Citus routes each to the tenant's one shard (issue 16).
 * `embedding_models` is global (a reference table there) and has no tenant.
 */
import { and, eq, gt, inArray, sql } from 'drizzle-orm';
import { inTenantTransaction, type Caller } from '../../core/caller.ts';
import { assertTenantAdmin } from '../../core/errors.ts';
import type { Db, Tx } from '../../db/client.ts';
import { withTenant } from '../../db/client.ts';
import { embeddingModels, factEmbeddings, facts } from '../../db/schema.ts';
import { forEachTenant } from '../../db/tenants.ts';
import { type EmbeddingProvider, embeddingText } from '../../embeddings/provider.ts';
import { live } from './conditions.ts';

export interface ModelInfo {
  model: string;
  dims: number;
  state: 'backfilling' | 'active' | 'retired';
}

export async function listModels(db: Db | Tx): Promise<ModelInfo[]> {
  return db
    .select({ model: embeddingModels.model, dims: embeddingModels.dims, state: embeddingModels.state })
    .from(embeddingModels)
    .where(inArray(embeddingModels.state, ['active', 'backfilling']));
}

/**
 * The model semantic search serves from: the active one; before any model was ever active (the
 * very first model, still embedding), the backfilling one.
 */
export async function servingModel(db: Db | Tx): Promise<ModelInfo | null> {
  const models = await listModels(db);
  return models.find((m) => m.state === 'active') ?? models.find((m) => m.state === 'backfilling') ?? null;
}

/**
 * Makes the configured model known. A model the database has never used starts `backfilling`
 * when another is active (search keeps serving the old one until the switch), else `active`.
 * Its HNSW index is created now, while it has no vectors. Returns the model's state.
 */
export async function registerModel(db: Db, model: string, dims: number): Promise<ModelInfo> {
  const info = await db.transaction(async (tx) => {
    // One registration at a time, whichever worker starts first.
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext('mnemo.register_model'))`);
    const [existing] = await tx.select().from(embeddingModels).where(eq(embeddingModels.model, model));
    if (existing && existing.state !== 'retired') {
      return { model, dims: existing.dims, state: existing.state };
    }
    const [active] = await tx.select().from(embeddingModels).where(eq(embeddingModels.state, 'active'));
    const state = active ? 'backfilling' : 'active';
    const activatedAt = state === 'active' ? sql`now()` : null;
    // A retired model named again starts over: its vectors were removed when it was retired.
    await tx
      .insert(embeddingModels)
      .values({ model, dims, state, activatedAt })
      .onConflictDoUpdate({
        target: embeddingModels.model,
        // excluded.*, not now() again: Citus accepts no volatile function in DO UPDATE SET.
        set: { dims, state, activatedAt: sql`excluded.activated_at`, retiredAt: null },
      });
    return { model, dims, state } as ModelInfo;
  });
  await db.execute(sql`select ensure_embedding_index(${model}, ${dims})`);
  return info;
}

/**
 * Registers the configured model if the database does not know it (or retired it), learning its
 * dimension from the endpoint. Throws EmbeddingsUnavailable while the endpoint is down; the
 * reconciler tries again on its next run.
 */
export async function ensureConfiguredModel(db: Db, provider: EmbeddingProvider): Promise<ModelInfo> {
  const [known] = await db
    .select({ model: embeddingModels.model, dims: embeddingModels.dims, state: embeddingModels.state })
    .from(embeddingModels)
    .where(eq(embeddingModels.model, provider.model));
  if (known && known.state !== 'retired') return known;
  const [probe] = await provider.embed(['dimension probe']);
  return registerModel(db, provider.model, probe!.length);
}

export interface PendingFact {
  id: string;
  version: number;
  text: string;
}

/**
 * Live facts of the tenant without a vector of `model` for their current version, in id order,
 * after `after` when given: a walk of the facts' primary key with a probe of the vectors' per fact,
 * stopping at `limit`. A drain that passes the last id it read as `after` reads each fact once,
 * instead of walking past every embedded one again for each batch.
 */
export async function factsNeedingEmbedding(
  tx: Tx,
  tenantId: string,
  model: string,
  limit: number,
  options: { ids?: readonly string[] | undefined; after?: string | undefined } = {},
): Promise<PendingFact[]> {
  const rows = await tx
    .select({ id: facts.id, version: facts.version, type: facts.type, content: facts.content })
    .from(facts)
    .where(
      and(
        eq(facts.tenantId, tenantId),
        live(),
        // A scalar subquery, not NOT EXISTS: the planner cannot turn it into a join, so it stays a
        // probe of the vectors' primary key per fact even before ANALYZE has seen the tables (as a
        // join, fresh tables got a plan that read every vector of the tenant for each fact).
        sql`${facts.version} > coalesce((
          select e.version from ${factEmbeddings} e
          where e.tenant_id = ${facts.tenantId} and e.tenant_id = ${tenantId} and e.fact_id = ${facts.id} and e.model = ${model}), 0)`,
        options.ids ? inArray(facts.id, [...options.ids]) : undefined,
        options.after ? gt(facts.id, options.after) : undefined,
      ),
    )
    .orderBy(facts.id)
    .limit(limit);
  return rows.map((row) => ({ id: row.id, version: row.version, text: embeddingText(row.type, row.content) }));
}

/**
 * Stores vectors, each only if its fact is still live at exactly the version the vector was
 * computed from, and only while the model is in use (not retired). A job reads a fact's text,
 * asks the endpoint outside any transaction, then comes here: in between the fact may have been
 * erased, deleted (and purged) or superseded, and its vector must then not be stored. Storing
 * twice is harmless: a vector never replaces one of the same or a later version.
 *
 * Why this is race-free under READ COMMITTED. The check and the insert run in one transaction,
 * after `FOR SHARE` locks on the model's row and on the facts' rows, held until commit. Every
 * change that makes content go away takes a conflicting lock on the fact's row before it touches
 * vectors: erasure and the retention purge select their batch `FOR UPDATE` and delete vectors in
 * the same transaction; delete, expire and supersede lock the row `FOR UPDATE` and write the next
 * version; a model switch updates the model's row before it removes the retired model's vectors.
 * - The store locks first: the eraser waits until the store commits. Its later statements each
 *   take a new snapshot (READ COMMITTED), so its `DELETE FROM fact_embeddings` sees the stored
 *   vector and removes it.
 * - The eraser locks first: the store waits until the eraser commits, then PostgreSQL re-checks
 *   the locked row's newest version against the WHERE clause (EvalPlanQual): no longer live, or
 *   at another version, so the fact is not returned and nothing is inserted for it.
 * Both lock facts in id order (`ORDER BY id` under the locking clause), so a batch of each cannot
 * deadlock. A store for a fact that is already gone finds no live row and stores nothing.
 */
export async function storeEmbeddings(
  tx: Tx,
  tenantId: string,
  model: string,
  dims: number,
  vectors: readonly { id: string; version: number; embedding: number[] }[],
): Promise<number> {
  if (vectors.length === 0) return 0;
  const [inUse] = await tx
    .select({ model: embeddingModels.model })
    .from(embeddingModels)
    .where(and(eq(embeddingModels.model, model), inArray(embeddingModels.state, ['active', 'backfilling'])))
    .for('share');
  if (!inUse) return 0;
  const current = await tx
    .select({ id: facts.id, version: facts.version })
    .from(facts)
    .where(and(eq(facts.tenantId, tenantId), inArray(facts.id, [...new Set(vectors.map((v) => v.id))]), live()))
    .orderBy(facts.id)
    .for('share');
  const liveVersion = new Map(current.map((row) => [row.id, row.version]));
  const storable = vectors.filter((v) => liveVersion.get(v.id) === v.version).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (storable.length === 0) return 0;
  const stored = await tx
    .insert(factEmbeddings)
    .values(storable.map((v) => ({ tenantId, factId: v.id, model, version: v.version, dims, embedding: v.embedding })))
    .onConflictDoUpdate({
      target: [factEmbeddings.tenantId, factEmbeddings.factId, factEmbeddings.model],
      set: { version: sql`excluded.version`, dims: sql`excluded.dims`, embedding: sql`excluded.embedding`, createdAt: sql`excluded.created_at` },
      setWhere: sql`${factEmbeddings.version} < excluded.version`,
    })
    .returning({ id: factEmbeddings.factId });
  return stored.length;
}

/**
 * A revision that leaves type and content as they were (verify; a supersede with equal content)
 * keeps its vectors: they are carried to the new version instead of being recomputed. Only ever
 * called under the caller's `FOR UPDATE` lock on the fact's row (a live fact, or one the sweep is
 * closing), so it cannot race an erasure or a purge: those need the same row lock first, and
 * erase or purge whatever this carried.
 */
export async function carryEmbeddings(tx: Tx, tenantId: string, factId: string, fromVersion: number, toVersion: number): Promise<void> {
  await tx
    .update(factEmbeddings)
    .set({ version: toVersion })
    .where(and(eq(factEmbeddings.tenantId, tenantId), eq(factEmbeddings.factId, factId), eq(factEmbeddings.version, fromVersion)));
}

export interface Coverage {
  live: number;
  embedded: number;
}

/** How many live facts of the tenant have a current vector of `model`. */
export async function coverage(tx: Tx, model: string, tenantId: string): Promise<Coverage> {
  const [row] = (await tx.execute(sql`
    select count(*)::int as live,
           count(e.fact_id)::int as embedded
    from facts f
    left join fact_embeddings e
      on e.tenant_id = f.tenant_id and e.tenant_id = ${tenantId} and e.fact_id = f.id and e.model = ${model} and e.version = f.version
    where f.tenant_id = ${tenantId} and f.invalidated_at is null and (f.expires_at is null or f.expires_at > now())`)) as unknown as [Coverage];
  return row;
}

/** The tenant `withTenant` set for this transaction (null when none is). */
/** A model in use, and how much of the tenant's memory it covers. */
export interface ModelStatus extends Coverage {
  model: string;
  dims: number;
  state: 'backfilling' | 'active';
  /** Live facts still without a current vector of this model. */
  backlog: number;
}

/** The tenant's embedding coverage per model in use (tenant admins only). */
export async function embeddingStatus(caller: Caller): Promise<ModelStatus[]> {
  assertTenantAdmin(caller.principal, 'Embedding status is for tenant admins');
  return inTenantTransaction(caller, async (tx) =>
    Promise.all(
      (await listModels(tx)).map(async (m) => {
        const { live, embedded } = await coverage(tx, m.model, caller.principal.tenantId);
        return { model: m.model, dims: m.dims, state: m.state as 'backfilling' | 'active', live, embedded, backlog: live - embedded };
      }),
    ),
  );
}

/** Coverage of `model` over every tenant (the backfill's progress). */
export async function totalCoverage(db: Db, model: string): Promise<Coverage> {
  const total: Coverage = { live: 0, embedded: 0 };
  await forEachTenant(db, async (tenantId) => {
    const c = await withTenant(db, tenantId, (tx) => coverage(tx, model, tenantId));
    total.live += c.live;
    total.embedded += c.embedded;
  });
  return total;
}

/**
 * The blue-green switch: when `model` (backfilling) covers every live fact of every tenant, it
 * becomes active and the previous active model is retired in one transaction; then the retired
 * model's vectors are deleted tenant by tenant and its index dropped. Returns whether it switched.
 */
export async function switchWhenCovered(db: Db, model: string): Promise<boolean> {
  const { live: liveCount, embedded } = await totalCoverage(db, model);
  if (embedded < liveCount) return false;
  const retired = await db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext('mnemo.register_model'))`);
    const [current] = await tx.select().from(embeddingModels).where(eq(embeddingModels.model, model)).for('update');
    if (!current || current.state !== 'backfilling') return [];
    const old = await tx
      .update(embeddingModels)
      .set({ state: 'retired', retiredAt: sql`now()` })
      .where(eq(embeddingModels.state, 'active'))
      .returning({ model: embeddingModels.model });
    await tx.update(embeddingModels).set({ state: 'active', activatedAt: sql`now()` }).where(eq(embeddingModels.model, model));
    return old.map((o) => o.model);
  });
  for (const oldModel of retired) await removeModelVectors(db, oldModel);
  return true;
}

export async function removeModelVectors(db: Db, model: string): Promise<void> {
  await forEachTenant(db, async (tenantId) => {
    await withTenant(db, tenantId, (tx) =>
      tx.delete(factEmbeddings).where(and(eq(factEmbeddings.tenantId, tenantId), eq(factEmbeddings.model, model))),
    );
  });
  await db.execute(sql`select retire_embedding_index(${model})`);
}

/** Vectors computed for a batch of one tenant's facts, not stored yet. */
export interface ComputedBatch {
  tenantId: string;
  model: ModelInfo;
  vectors: { id: string; version: number; embedding: number[] }[];
  /** The last fact id read, to continue from (undefined: nothing was read). */
  last: string | undefined;
}

/**
 * Computes the next batch of what one tenant still needs for `model`: the given facts, or (without
 * ids) the next `batch` facts in id order after `after`. Reads the texts in one short transaction
 * and asks the endpoint once for all of them, outside any transaction. Fewer vectors than `batch`:
 * nothing was left after `after`.
 */
export async function computeNextBatch(
  db: Db,
  provider: EmbeddingProvider,
  tenantId: string,
  model: ModelInfo,
  options: { ids?: readonly string[] | undefined; batch: number; after?: string | undefined },
): Promise<ComputedBatch> {
  const pending = await withTenant(db, tenantId, (tx) => factsNeedingEmbedding(tx, tenantId, model.model, options.batch, options));
  if (pending.length === 0) return { tenantId, model, vectors: [], last: undefined };
  const embeddings = await provider.embed(
    pending.map((p) => p.text),
    { expectedDims: model.dims },
  );
  return { tenantId, model, vectors: pending.map((p, i) => ({ id: p.id, version: p.version, embedding: embeddings[i]! })), last: pending.at(-1)!.id };
}

/** Stores a computed batch in one transaction (storeEmbeddings: only for facts still live at that version). */
export async function storeBatch(db: Db, batch: ComputedBatch): Promise<number> {
  return withTenant(db, batch.tenantId, (tx) => storeEmbeddings(tx, batch.tenantId, batch.model.model, batch.model.dims, batch.vectors));
}

/** Embeds one batch of what the tenant needs (computeNextBatch, then storeBatch); returns how many facts were read. */
export async function embedPending(
  db: Db,
  provider: EmbeddingProvider,
  tenantId: string,
  model: ModelInfo,
  options: { ids?: readonly string[]; batch: number },
): Promise<number> {
  const computed = await computeNextBatch(db, provider, tenantId, model, options);
  if (computed.vectors.length > 0) await storeBatch(db, computed);
  return computed.vectors.length;
}
