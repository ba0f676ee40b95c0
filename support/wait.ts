export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` every `everyMs` until it returns a truthy value, and resolves with it; fails with
 * `describe()` when `timeoutMs` has passed. An error from `check` fails at once (a check that may
 * throw while the system recovers catches its own).
 */
export async function eventually<T>(
  check: () => Promise<T | undefined | false | null>,
  timeoutMs: number,
  describe: () => Promise<string> | string,
  everyMs = 100,
): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms: ${await describe()}`);
    await sleep(everyMs);
  }
}
