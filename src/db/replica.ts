import type { Sql } from 'postgres';

/**
 * WAL positions, for reading one's own writes on a streaming replica. A position is the byte
 * offset in the WAL (`pg_lsn - '0/0'`), as a bigint: it only grows, compares as a number, and
 * keeps as a number in Redis (exact in a double up to 2^53 bytes, 8 PiB of WAL).
 */

/**
 * Where the primary's WAL ends now. Taken after a write has committed, so its commit record lies
 * before it: a replica that has replayed up to here shows the write. The insert position, not
 * `pg_current_wal_lsn()` (what has been written out): with `synchronous_commit = off` a commit
 * record may still be in the WAL buffers, past the written position.
 */
export async function walEnd(primary: Sql): Promise<bigint> {
  const [row] = await primary<{ position: string }[]>`select (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::text as position`;
  return BigInt(row!.position);
}

/**
 * How far a server has replayed the WAL: on a replica, what its queries see; a server that is not
 * in recovery (DATABASE_READ_URL naming a primary) has everything, up to its own end.
 */
export async function replayedUpTo(server: Sql): Promise<bigint> {
  const [row] = await server<{ position: string }[]>`
    select (coalesce(case when pg_is_in_recovery() then pg_last_wal_replay_lsn() else pg_current_wal_insert_lsn() end, '0/0')
            - '0/0'::pg_lsn)::text as position`;
  return BigInt(row!.position);
}
