/**
 * A streaming replica of a private cluster (support/postgres-cluster.ts), as operators make one:
 * `pg_basebackup -R` over loopback, then the copy started as a hot standby on its own port and
 * socket directory. `applyDelayMs` sets `recovery_min_apply_delay`, so the replica is visibly
 * behind: it receives the WAL at once but shows a commit only that long after it happened. Runs as
 * the `postgres` OS user (the server refuses root); only this server's pid is ever signalled.
 */
import { asPostgres, type PostgresCluster, startPrivateServer } from '../../../support/postgres-cluster.ts';

export interface Replica {
  port: number;
  /** The same URL (user, password, database) on the replica: its port replaced. */
  through(url: string): string;
  /** A clean stop (`pg_ctl stop -m fast`): its connections are closed, new ones refused. */
  stop(): Promise<void>;
  /** Starts it again; resolves once it accepts connections in recovery. */
  start(): Promise<void>;
  /** Stops it for good and removes its directory. */
  remove(): Promise<void>;
  /** The server log, for a failure message. */
  log(): string;
}

export async function startReplica(primary: PostgresCluster, { applyDelayMs = 0 }: { applyDelayMs?: number } = {}): Promise<Replica> {
  const server = await startPrivateServer({
    what: 'replica',
    label: 'scale-replica',
    // -R writes primary_conninfo and standby.signal; the copy's settings (the primary's port and
    // socket directory included) are overridden by the server's own, later lines of the file winning.
    create: async (dataDir) => {
      await asPostgres('pg_basebackup', ['-D', dataDir, '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-R', '-X', 'stream', '-c', 'fast', '--no-sync'], 120_000);
    },
    settings: [`recovery_min_apply_delay = '${applyDelayMs}ms'`, 'hot_standby = on'],
    check: async (sql) => {
      const [row] = await sql<{ recovery: boolean }[]>`select pg_is_in_recovery() as recovery`;
      if (!row?.recovery) throw new Error('the server is not in recovery: not a replica');
    },
  });
  return {
    port: server.port,
    through(url) {
      const moved = new URL(url);
      moved.hostname = '127.0.0.1';
      moved.port = String(server.port);
      return moved.toString();
    },
    stop: server.stop,
    start: server.start,
    remove: server.remove,
    log: server.log,
  };
}
