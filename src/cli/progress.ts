/**
 * The progress of a command that follows work (`mnemo import`, `erase`, `reembed --watch`), on
 * stderr: on a terminal one line redrawn in place; elsewhere (logs, CI) a line of its own each
 * time the work passes a milestone, so a log tells how it went without a line per poll.
 */
import { exitCodes } from './args.ts';

export interface ProgressView<T> {
  /** The line a terminal shows. */
  line(state: T): string;
  /** The line a log gets. */
  logLine(state: T): string;
  /** How far the work is, for a log: a line is logged when this passes the last logged one; undefined logs nothing. */
  milestone(state: T): number | undefined;
  /** On a terminal, whether the last line stays once the progress ends (else it is wiped). */
  keep?: boolean;
  /** On a terminal, the least time between two redraws. */
  redrawMs?: number;
}

export interface Progress<T> {
  draw(state: T): void;
  /** A line of its own, the progress line kept (or wiped) as at the end. */
  note(text: string): void;
  end(): void;
}

type Output = Pick<NodeJS.WriteStream, 'isTTY' | 'write'>;

export function progressLine<T>(view: ProgressView<T>, output: Output = process.stderr): Progress<T> {
  const tty = output.isTTY === true;
  let open = false;
  let drawnAt = 0;
  let logged = Number.NEGATIVE_INFINITY;
  const end = () => {
    if (open) output.write(view.keep ? '\n' : '\r\x1b[2K');
    open = false;
  };
  return {
    draw(state) {
      if (!tty) {
        const milestone = view.milestone(state);
        if (milestone === undefined || milestone <= logged) return;
        logged = milestone;
        output.write(`${view.logLine(state)}\n`);
        return;
      }
      const now = Date.now();
      if (open && view.redrawMs !== undefined && now - drawnAt < view.redrawMs) return;
      drawnAt = now;
      output.write(`\r\x1b[2K${view.line(state)}`);
      open = true;
    },
    note(text) {
      end();
      output.write(`${text}\n`);
    },
    end,
  };
}

/** `[#####-----]`: `fraction` (0 to 1) of `width` filled. */
export function progressBar(fraction: number, width = 30): string {
  const filled = Math.round(Math.min(Math.max(fraction, 0), 1) * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
}

/**
 * Runs `step` every `intervalMs` until it says the work is done. Ctrl-C stops the following, not
 * the work: `onInterrupt` says so, and the exit code is 130.
 */
export async function pollUntilDone(intervalMs: number, step: () => Promise<boolean>, onInterrupt: () => void): Promise<void> {
  let interrupted = false;
  const interrupt = () => {
    interrupted = true;
  };
  process.once('SIGINT', interrupt);
  try {
    while (!(await step())) {
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
      if (interrupted) {
        onInterrupt();
        process.exitCode = exitCodes.interrupted;
        return;
      }
    }
  } finally {
    process.off('SIGINT', interrupt);
  }
}
