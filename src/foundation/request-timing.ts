/**
 * Where a request's milliseconds go, by phase (issue 30): authentication, the rate limit's round
 * trip, the tenant transaction's opening and commit, each search statement, loading the facts,
 * serialising the answer. With MNEMO_SERVER_TIMING on, the API answers with a `Server-Timing`
 * header (W3C Server Timing) naming each phase's milliseconds and the total; `npm run bench`
 * prints them as a table. Off, nothing is measured: `phase()` only looks for the request's store.
 *
 * A phase that runs more than once in a request (two scoring rounds) is summed. Phases that run at
 * the same time (the two searches of `both`) each count their own time, so the phases of such a
 * request add up to more than its total.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** The phases one request has spent time in: name → milliseconds. */
export type Phases = Map<string, number>;

const current = new AsyncLocalStorage<Phases>();

/** Runs `fn` with a store of its own for the phases it, and all it calls, reports. */
export function measuringPhases<T>(phases: Phases, fn: () => T): T {
  return current.run(phases, fn);
}

/** Counts the time until `work` settles as `name`, when the request is being measured. */
export function phase<T>(name: string, work: () => Promise<T>): Promise<T> {
  const phases = current.getStore();
  if (!phases) return work();
  const started = performance.now();
  const done = () => phases.set(name, (phases.get(name) ?? 0) + performance.now() - started);
  return work().finally(done);
}

/** Adds `ms` to `name`: for a phase measured by its caller (between two callbacks). */
export function addToPhase(name: string, ms: number): void {
  const phases = current.getStore();
  if (phases) phases.set(name, (phases.get(name) ?? 0) + ms);
}

/** A `Server-Timing` header's value: each phase with its milliseconds (to 0.01 ms), in the order they began. */
export function serverTimingHeader(phases: Phases, totalMs: number): string {
  const entries = [...phases].map(([name, ms]) => `${name};dur=${ms.toFixed(2)}`);
  return [...entries, `total;dur=${totalMs.toFixed(2)}`].join(', ');
}

/** The phases of a `Server-Timing` header (what serverTimingHeader wrote); entries without `dur` are left out. */
export function parseServerTiming(header: string | null | undefined): Map<string, number> {
  const parsed = new Map<string, number>();
  for (const entry of (header ?? '').split(',')) {
    const [name, ...params] = entry.trim().split(';');
    const dur = params.map((p) => p.trim()).find((p) => p.startsWith('dur='));
    if (name && dur) parsed.set(name, Number(dur.slice(4)));
  }
  return parsed;
}
