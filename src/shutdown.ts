import type { Logger } from './foundation/log.ts';
import { ConfigError } from './config.ts';
import { UnsafeDatabaseRoleError } from './db/client.ts';
import { DataDirectoryRefused } from './embedded/data-dir.ts';
import { HandlerRegistryError } from './jobs/worker.ts';

/**
 * Graceful shutdown shared by the API and the worker: on SIGTERM or SIGINT, run `stop` once;
 * exit 0 when it finishes, 1 when it fails or outlasts `timeoutMs`.
 */
export function onShutdown(name: string, logger: Logger, timeoutMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.info(`${name} already stopping`, { signal });
      return;
    }
    stopping = true;
    logger.info(`${name} stopping`, { signal });
    const deadline = setTimeout(() => {
      logger.error(`${name} shutdown timed out; exiting`, { timeoutMs });
      process.exit(1);
    }, timeoutMs);
    deadline.unref();
    try {
      await stop();
    } catch (error) {
      logger.error(`${name} shutdown failed`, { error });
      process.exit(1);
    }
    clearTimeout(deadline);
    logger.info(`${name} stopped`);
    process.exit(0);
  };
  // `on`, not `once`: a second signal while stopping (a supervisor repeating SIGTERM, Ctrl-C
  // pressed twice) must not fall through to the default action and kill the process mid-drain.
  process.on('SIGTERM', (signal) => void shutdown(signal));
  process.on('SIGINT', (signal) => void shutdown(signal));
}

/**
 * Ends a process whose startup failed. Misconfiguration gets its one-line message; anything
 * else its stack, since that is a bug or an outage worth the detail.
 */
export function exitOnStartupFailure(name: string): (error: unknown) => never {
  return (error) => {
    const expected =
      error instanceof ConfigError || error instanceof UnsafeDatabaseRoleError || error instanceof HandlerRegistryError || error instanceof DataDirectoryRefused;
    const detail = expected ? (error as Error).message : `failed to start: ${error instanceof Error ? error.stack : String(error)}`;
    process.stderr.write(`mnemo ${name}: ${detail}\n`);
    process.exit(1);
  };
}
