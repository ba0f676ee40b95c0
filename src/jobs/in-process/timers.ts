/** Longest single timer: Node fires a longer one at once; a later time is reached in steps. */
const MAX_TIMER_MS = 3_600_000;

/**
 * An in-process queue's timers (a delayed job's next attempt, a scheduler's next run). None keeps
 * the process alive, and `stop` clears them all: a closed queue starts nothing more.
 */
export class Timers {
  private readonly armed = new Set<NodeJS.Timeout>();
  private stopped = false;

  /** Runs `fn` at `when` (ms) unless stopped first; returns a cancel. */
  at(when: number, fn: () => void): () => void {
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      const wait = when - Date.now();
      timer = setTimeout(
        () => {
          this.armed.delete(timer!);
          if (this.stopped) return;
          if (when - Date.now() > 0 && wait > MAX_TIMER_MS) arm();
          else fn();
        },
        Math.min(Math.max(wait, 0), MAX_TIMER_MS),
      );
      timer.unref();
      this.armed.add(timer);
    };
    arm();
    return () => {
      if (!timer) return;
      clearTimeout(timer);
      this.armed.delete(timer);
    };
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.armed) clearTimeout(timer);
    this.armed.clear();
  }
}
