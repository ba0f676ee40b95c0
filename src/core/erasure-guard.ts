/**
 * The guard the write path needs from erasure (DESIGN §10), kept below the domains so that
 * memory/ can call it without importing lifecycle/: the keyed hash an erasure row keeps of a
 * name, the advisory locks writes and erasures take on it, and the 409 `erasure-in-progress`
 * check a write runs in its own transaction. Requesting and running erasures stays in
 * src/lifecycle/erasure.ts, which builds on these.
 */
import { createHmac } from 'node:crypto';
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Tx } from '../db/client.ts';
import { erasures } from '../db/schema.ts';
import { ErasureInProgress } from './errors.ts';

/** The keyed hash an erasure row keeps of a person's or conversation's id. */
export function targetHash(key: string, kind: 'participant' | 'external' | 'conversation', id: string): string {
  return createHmac('sha256', key).update(`${kind}:${id}`).digest('hex');
}

/**
 * Transaction-level advisory locks on the names a write or an erasure concerns, keyed by the
 * HMAC the erasure row keeps (never the id itself) and the transaction's tenant. Writes take
 * them shared (writes never wait for each other); an erasure takes its one name exclusive.
 */
export async function lockNames(tx: Tx, hashes: readonly string[], mode: 'shared' | 'exclusive'): Promise<void> {
  const lock = mode === 'shared' ? sql`pg_advisory_xact_lock_shared` : sql`pg_advisory_xact_lock`;
  await tx.execute(sql`
    select ${lock}(hashtextextended('mnemo.erasure:' || mnemo_current_tenant() || ':' || h, 0))
    from unnest(${`{${[...new Set(hashes)].sort().join(',')}}`}::text[]) as h`);
}

/** Who a write names: the scope's person and conversation, and its subjects. */
interface WriteNames {
  participantId?: string | null | undefined;
  threadId?: string | null | undefined;
  subjects?: readonly { kind: string; id: string }[] | undefined;
}

/**
 * 409 `erasure-in-progress` when a write names a person or conversation whose erasure is pending
 * or running. Runs in the write's transaction; without a key no erasure can exist.
 *
 * The check alone leaves a window: a write that checked before the erasure was recorded, and
 * commits after the erasure's job has scanned for matching facts, would leave a fact of the
 * person behind a `completed` erasure. So the write first takes a shared lock on each name it
 * carries, held to its commit, and checks after it (a new snapshot under READ COMMITTED); the
 * erasure job takes the name's lock exclusively before its first batch. Either the write holds
 * the lock first, and the job waits for it to commit and then finds its fact; or the job holds
 * it (or has held it), so the erasure row was committed before the write's check, which sees it
 * and answers 409.
 *
 * `tenantId` is the tenant `tx` acts for: the lookup names it, so that Citus routes it to that
 * tenant's shard (row-level security stays the second wall).
 */
export async function assertNoErasureInProgress(
  tx: Tx,
  key: string | undefined,
  names: WriteNames | readonly WriteNames[],
  tenantId: string,
): Promise<void> {
  if (!key) return;
  // A batch of writes is checked at once: one lock statement and one lookup for all its names.
  const writes = Array.isArray(names) ? (names as readonly WriteNames[]) : [names as WriteNames];
  const hashesOfWrite = writes.map((each) => {
    const hashes: string[] = [];
    if (each.participantId) hashes.push(targetHash(key, 'participant', each.participantId));
    if (each.threadId) hashes.push(targetHash(key, 'conversation', each.threadId));
    for (const subject of each.subjects ?? []) {
      if (subject.kind === 'participant' || subject.kind === 'external') hashes.push(targetHash(key, subject.kind, subject.id));
    }
    return hashes;
  });
  const hashes = [...new Set(hashesOfWrite.flat())];
  if (hashes.length === 0) return;
  await lockNames(tx, hashes, 'shared');
  const open = await tx
    .select({ id: erasures.id, targetHash: erasures.targetHash })
    .from(erasures)
    .where(
      and(
        eq(erasures.tenantId, tenantId),
        inArray(erasures.status, ['pending', 'running']),
        inArray(erasures.targetHash, hashes),
      ),
    );
  // The first write that names someone being erased, with that erasure: a batch's error names the item.
  const erasureOf = new Map(open.map((erasure) => [erasure.targetHash, erasure.id]));
  for (const [index, each] of hashesOfWrite.entries()) {
    const erasureId = each.map((hash) => erasureOf.get(hash)).find((id) => id !== undefined);
    if (erasureId) throw new ErasureInProgress(erasureId, index);
  }
}
