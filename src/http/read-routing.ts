/**
 * Reads on a streaming replica (DATABASE_READ_URL), each caller reading its own writes.
 *
 * The list, single-fact, revisions, retrieve, context and report routes read through `readFrom`,
 * which hands the domain verb the replica's handle as `Caller.db` (the MCP tools that read call
 * `read` themselves: a `POST /mcp` may also have written); every other route, and every write,
 * stays on the primary. A caller (tenant + sub) reads from the primary until the replica has
 * replayed past its last write:
 * - once a request that may have written has answered (a 2xx to anything but GET/HEAD/OPTIONS that
 *   did not go through `readFrom`), the primary's WAL end is remembered for the caller: in Redis,
 *   which every API node reads (the larger position kept, for POSITION_TTL_MS), and in this node;
 * - before a read, a caller whose remembered position is past what the replica is known to have
 *   replayed asks the replica how far it has replayed, and reads from the primary when it is behind.
 * Redis not answering → the primary: without the shared position a read cannot know it is safe. The
 * replica not answering (down, unreachable, or a query cancelled by a recovery conflict) → the same
 * read runs on the primary; a connection failure also leaves the replica out until a probe finds it
 * answering again as a safe role, and readiness shows it `degraded` meanwhile.
 *
 * What it costs (measured in test/scale/read-replica.test.ts; docs/operations/scaling-and-citus.md, "Read replicas"):
 * a write, one `select` on the primary and one Redis call after it answers; a read, one Redis
 * call, plus one `select` on the replica while the caller's last write has not been seen there.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { Redis } from 'ioredis';
import type { Principal } from '../auth/permissions.ts';
import { FactNotFound } from '../core/errors.ts';
import { assertRestrictedRole, type Database, type Db, UnsafeDatabaseRoleError } from '../db/client.ts';
import { databaseUnavailableReason } from '../db/errors.ts';
import { replayedUpTo, walEnd } from '../db/replica.ts';
import type { Logger } from '../foundation/log.ts';
import { addToPhase } from '../foundation/request-timing.ts';
import type { AppEnv } from './app-env.ts';
import { principalOf } from './auth.ts';

export interface ReadOptions {
  /**
   * For a fact asked for by id: "not found" on the replica may only mean the fact has not reached it
   * yet (another caller wrote it a moment ago), so the primary is asked then.
   */
  notFoundAsksPrimary?: boolean;
}

export interface ReadRouting {
  /** Runs a read with the database it goes to for this caller. */
  read<T>(principal: Principal, run: (db: Db) => Promise<T>, options?: ReadOptions): Promise<T>;
  /** After a request of this caller that may have written has committed. */
  wrote(principal: Principal): Promise<void>;
}

/** Without a replica: everything on the primary, nothing to remember. */
export const primaryReads = (db: Db): ReadRouting => ({ read: (_principal, run) => run(db), wrote: async () => {} });

/**
 * How long a caller's last write position is kept. The replica must replay a write within this
 * for its writer to be sure to see it; one that lags minutes behind is broken, not slow.
 */
export const POSITION_TTL_MS = 10 * 60_000;
/** Past this, Redis counts as not answering: the read goes to the primary, the write's position stays local. */
const REDIS_TIMEOUT_MS = 250;
/** Callers whose positions this node keeps; past it the oldest are forgotten (Redis still has them). */
const LOCAL_POSITIONS = 100_000;
/**
 * The position remembered when the primary could not say where its WAL ends (it failed right after
 * the commit): larger than any real one, so the caller reads from the primary while it is kept.
 */
const UNKNOWN_POSITION = BigInt(Number.MAX_SAFE_INTEGER);

/** The caller's positions, shared by every API node. */
export interface WritePositions {
  remember(caller: string, position: bigint): Promise<void>;
  recall(caller: string): Promise<bigint | undefined>;
  close(): Promise<void>;
}

/** Keeps the larger of the stored and the new position, and renews the key's life either way. */
const REMEMBER_LARGER = `
local current = tonumber(redis.call('GET', KEYS[1]))
if current == nil or current < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1`;

/**
 * Positions in Redis under `<prefix>:written:`. Its own connection, which never queues a command
 * while disconnected and gives up on one after REDIS_TIMEOUT_MS: a read waits on Redis no longer.
 */
export function redisWritePositions(url: string, prefix: string, logger: Logger): WritePositions {
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: REDIS_TIMEOUT_MS });
  // Redis being away already shows in readiness and the producer's log; here it only sends reads to the primary.
  redis.on('error', (error: Error) => logger.debug('read-your-writes redis error', { error: error.message }));
  const keyOf = (caller: string) => `${prefix}:written:${caller}`;
  return {
    async remember(caller, position) {
      await redis.eval(REMEMBER_LARGER, 1, keyOf(caller), position.toString(), String(POSITION_TTL_MS));
    },
    async recall(caller) {
      const stored = await redis.get(keyOf(caller));
      return stored === null ? undefined : BigInt(stored);
    },
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

export interface ReplicaReadsOptions {
  primary: Database;
  replica: Database;
  /** Shared positions (Redis); without them (no REDIS_URL, one node) this node's own are enough. */
  positions: WritePositions | undefined;
  logger: Logger;
  /** How often a replica left out is tried again. */
  probeEveryMs?: number;
}

export interface ReplicaReads extends ReadRouting {
  /** Readiness: resolves while reads go to the replica and it answers. */
  check(): Promise<void>;
  /** Stops probing a replica left out (the databases and the positions are closed by their opener). */
  close(): void;
}

const callerKey = (principal: Principal) => JSON.stringify([principal.tenantId, principal.sub]);

/**
 * Opens the routing, after checking the replica's role as the primary's is checked (a role that
 * bypasses row-level security is refused: startup fails). A replica that does not answer yet does
 * not stop the API: it starts with reads on the primary, and takes the replica once a probe passes.
 */
export async function openReplicaReads({ primary, replica, positions, logger, probeEveryMs = 1000 }: ReplicaReadsOptions): Promise<ReplicaReads> {
  const local = new Map<string, { position: bigint; until: number }>();
  /** The replica has replayed at least this far (it only moves forward; forgotten when it goes away). */
  let replayed = 0n;
  let down = false;
  let refused: UnsafeDatabaseRoleError | undefined;
  let probe: NodeJS.Timeout | undefined;
  let probing = false;

  const rememberLocally = (key: string, position: bigint) => {
    const known = local.get(key);
    local.delete(key);
    local.set(key, { position: known && known.position > position ? known.position : position, until: Date.now() + POSITION_TTL_MS });
    if (local.size <= LOCAL_POSITIONS) return;
    const now = Date.now();
    for (const [stale, entry] of local) if (entry.until <= now) local.delete(stale);
    for (const oldest of local.keys()) {
      if (local.size <= LOCAL_POSITIONS) break;
      local.delete(oldest);
    }
  };
  const recallLocally = (key: string): bigint | undefined => {
    const entry = local.get(key);
    if (entry && entry.until > Date.now()) return entry.position;
    if (entry) local.delete(key);
    return undefined;
  };

  const probeOnce = async () => {
    if (probing || !down) return;
    probing = true;
    try {
      await assertRestrictedRole(replica.sql, 'DATABASE_READ_URL');
      down = false;
      clearInterval(probe);
      logger.info('read replica answers: reads go to it again');
    } catch (error) {
      if (error instanceof UnsafeDatabaseRoleError) {
        refused = error;
        clearInterval(probe);
        logger.error('read replica refused: reads stay on the primary', { error: error.message });
      }
    } finally {
      probing = false;
    }
  };
  const leaveOut = (error: unknown) => {
    if (down) return;
    down = true;
    replayed = 0n;
    logger.warn('read replica unavailable: reads go to the primary until it answers', { error });
    probe = setInterval(() => void probeOnce(), probeEveryMs).unref();
  };
  /** A failure of the replica: one of its connection leaves it out; anything else only this read. */
  const replicaFailed = (error: unknown) => {
    if (databaseUnavailableReason(error) === 'connection') leaveOut(error);
  };

  try {
    await assertRestrictedRole(replica.sql, 'DATABASE_READ_URL');
  } catch (error) {
    if (databaseUnavailableReason(error) !== 'connection') throw error;
    leaveOut(error);
  }

  /** The database this caller's read goes to. */
  const target = async (principal: Principal): Promise<Database> => {
    if (down || refused) return primary;
    const key = callerKey(principal);
    let needed = recallLocally(key);
    try {
      const shared = positions ? await positions.recall(key) : undefined;
      if (shared !== undefined && (needed === undefined || shared > needed)) needed = shared;
    } catch {
      return primary;
    }
    if (needed === undefined || needed <= replayed) return replica;
    try {
      const now = await replayedUpTo(replica.sql);
      if (now > replayed) replayed = now;
    } catch (error) {
      replicaFailed(error);
      return primary;
    }
    return needed <= replayed ? replica : primary;
  };

  return {
    async read(principal, run, options = {}) {
      const database = await target(principal);
      if (database === primary) return run(primary.db);
      try {
        return await run(replica.db);
      } catch (error) {
        if (options.notFoundAsksPrimary && error instanceof FactNotFound) return run(primary.db);
        const reason = databaseUnavailableReason(error);
        // A recovery conflict cancels a replica's query (40001, 40P01): the primary has none.
        if (reason !== 'connection' && reason !== 'contention') throw error;
        replicaFailed(error);
        return run(primary.db);
      }
    },
    async wrote(principal) {
      const key = callerKey(principal);
      let position: bigint;
      try {
        position = await walEnd(primary.sql);
      } catch (error) {
        logger.warn('could not read the primary WAL position after a write: the caller reads from the primary for a while', { error });
        position = UNKNOWN_POSITION;
      }
      rememberLocally(key, position);
      if (!positions) return;
      try {
        await positions.remember(key, position);
      } catch (error) {
        logger.warn('could not share a write position through Redis: another node may read this caller\'s write late', { error });
      }
    },
    async check() {
      if (refused) throw refused;
      if (down) throw new Error('read replica unavailable');
      try {
        await replica.sql`select 1`;
      } catch (error) {
        replicaFailed(error);
        throw error;
      }
    },
    close() {
      clearInterval(probe);
    },
  };
}

/** Requests whose handler read through `readFrom`: they wrote nothing, whatever their method. */
const readRequests = new WeakSet<Context<AppEnv>>();

/** For a route: runs a read with the database this caller's reads go to (see above). */
export function readFrom<T>(c: Context<AppEnv>, reads: ReadRouting, run: (db: Db) => Promise<T>, options?: ReadOptions): Promise<T> {
  readRequests.add(c);
  // What choosing the database costs (a Redis round trip with a replica): the time until `run` starts.
  const asked = performance.now();
  return reads.read(principalOf(c), (db) => {
    addToPhase('read-routing', performance.now() - asked);
    return run(db);
  }, options);
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Remembers where a caller's writes end, once the request has answered: so its next read, on any
 * node, waits for the replica or goes to the primary. Before the response leaves, so a client that
 * reads after its write's answer finds the position shared.
 */
export function rememberWrites(reads: ReadRouting): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (READ_METHODS.has(c.req.method) || readRequests.has(c)) return;
    const principal = c.get('principal');
    if (!principal || c.res.status >= 300) return;
    await reads.wrote(principal);
  };
}
