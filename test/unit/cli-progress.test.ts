/**
 * src/cli/progress.ts and the views of the three commands that follow work: what a terminal shows
 * (one line redrawn in place) and what a log gets (a line per milestone). The e2e tests run the
 * commands without a terminal; the terminal's output is pinned only here.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { erasing } from '../../src/cli/erase.ts';
import { importing } from '../../src/cli/import.ts';
import { pollUntilDone, progressBar, type ProgressView, progressLine } from '../../src/cli/progress.ts';
import { backfillView } from '../../src/cli/reembed.ts';

const CLEAR = '\r\x1b[2K';

function output(isTTY: boolean) {
  const written: string[] = [];
  return { isTTY, written, write: (chunk: string) => written.push(chunk) > 0 };
}

const view: ProgressView<number> = { line: (n) => `line ${n}`, logLine: (n) => `log ${n}`, milestone: (n) => (n < 0 ? undefined : Math.floor(n / 10)) };

describe('progressLine without a terminal', () => {
  it('logs a line each time the work passes a milestone, never for none, never backwards', () => {
    const out = output(false);
    const progress = progressLine(view, out as never);
    for (const n of [-1, 0, 3, 10, 15, 9, 20, 21]) progress.draw(n);
    progress.note('a note');
    progress.end();
    expect(out.written).toEqual(['log 0\n', 'log 10\n', 'log 20\n', 'a note\n']);
  });
});

describe('progressLine on a terminal', () => {
  afterEach(() => vi.useRealTimers());

  it('redraws one line in place; a note and the end wipe it', () => {
    const out = output(true);
    const progress = progressLine(view, out as never);
    progress.draw(1);
    progress.draw(2);
    progress.note('a note');
    progress.draw(3);
    progress.end();
    progress.end();
    expect(out.written).toEqual([`${CLEAR}line 1`, `${CLEAR}line 2`, CLEAR, 'a note\n', `${CLEAR}line 3`, CLEAR]);
  });

  it('with keep, leaves the last line on screen and writes a note below it', () => {
    const out = output(true);
    const progress = progressLine({ ...view, keep: true }, out as never);
    progress.draw(1);
    progress.note('a note');
    progress.draw(2);
    progress.end();
    expect(out.written).toEqual([`${CLEAR}line 1`, '\n', 'a note\n', `${CLEAR}line 2`, '\n']);
  });

  it('with redrawMs, skips a redraw that comes sooner', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const out = output(true);
    const progress = progressLine({ ...view, redrawMs: 100 }, out as never);
    progress.draw(1);
    vi.advanceTimersByTime(50);
    progress.draw(2);
    vi.advanceTimersByTime(50);
    progress.draw(3);
    expect(out.written).toEqual([`${CLEAR}line 1`, `${CLEAR}line 3`]);
  });
});

describe('progressBar', () => {
  it('fills its share of 30 columns', () => {
    expect(progressBar(0)).toBe(`[${'-'.repeat(30)}]`);
    expect(progressBar(0.5)).toBe(`[${'#'.repeat(15)}${'-'.repeat(15)}]`);
    expect(progressBar(1)).toBe(`[${'#'.repeat(30)}]`);
    expect(progressBar(2, 4)).toBe('[####]');
  });
});

describe('pollUntilDone', () => {
  afterEach(() => {
    process.exitCode = undefined;
  });

  it('polls until the step says done', async () => {
    let calls = 0;
    const interrupted = vi.fn();
    await pollUntilDone(1, async () => ++calls === 3, interrupted);
    expect(calls).toBe(3);
    expect(interrupted).not.toHaveBeenCalled();
    expect(process.exitCode).toBeUndefined();
  });

  it('stops following at Ctrl-C: says so, exit code 130, and lets go of SIGINT', async () => {
    // The SIGINT is emitted in this test's process, which other test files share (isolate: false):
    // a handler one of them left behind (a server's shutdown, the bench's cleanup) would exit the
    // worker. Only pollUntilDone's own listener may hear it; the others are put back afterwards,
    // and one of this test's own proves none of them was called.
    const bystander = vi.fn();
    process.on('SIGINT', bystander);
    const others = process.listeners('SIGINT');
    process.removeAllListeners('SIGINT');
    try {
      let calls = 0;
      const interrupted = vi.fn();
      await pollUntilDone(
        1,
        async () => {
          if (++calls === 2) process.emit('SIGINT');
          return false;
        },
        interrupted,
      );
      expect(calls).toBe(2);
      expect(interrupted).toHaveBeenCalledOnce();
      expect(process.exitCode).toBe(130);
      expect(process.listenerCount('SIGINT')).toBe(0);
    } finally {
      for (const listener of others) process.on('SIGINT', listener);
      process.off('SIGINT', bystander);
    }
    expect(bystander).not.toHaveBeenCalled();
  });
});

describe('the commands’ progress', () => {
  const lines = <T>(progressView: ProgressView<T>, states: T[], isTTY: boolean) => {
    const out = output(isTTY);
    const progress = progressLine(progressView, out as never);
    for (const state of states) progress.draw(state);
    progress.end();
    return out.written;
  };

  it('mnemo erase: the counts, logged each time they grow once the erasure runs', () => {
    const erasure = (status: string, facts: number, revisions: number, vectors: number) =>
      ({ id: 'e-1', status, factsErased: facts, revisionsErased: revisions, embeddingsDeleted: vectors, error: null }) as never;
    const states = [erasure('pending', 0, 0, 0), erasure('running', 1, 1, 0), erasure('running', 1, 1, 0), erasure('running', 2, 3, 1)];
    expect(lines(erasing, states, false)).toEqual(['erasing… 1 fact, 1 revision, 0 vectors\n', 'erasing… 2 facts, 3 revisions, 1 vector\n']);
    expect(lines(erasing, states.slice(0, 2), true)).toEqual([`${CLEAR}erasing… 0 facts, 0 revisions, 0 vectors`, `${CLEAR}erasing… 1 fact, 1 revision, 0 vectors`, CLEAR]);
  });

  it('mnemo import: a bar with the counts; in a log a line every 100 files but the last', () => {
    const counts = { created: 1, updated: 0, unchanged: 0, failed: 0 };
    expect(lines(importing(4), [{ done: 1, counts }], true)).toEqual([
      `${CLEAR}[${'#'.repeat(8)}${'-'.repeat(22)}] 1/4  created 1 / updated 0 / unchanged 0 / failed 0`,
      CLEAR,
    ]);
    const states = Array.from({ length: 200 }, (_, i) => ({ done: i + 1, counts }));
    expect(lines(importing(200), states, false)).toEqual(['mnemo import: 100/200 files (created 1 / updated 0 / unchanged 0 / failed 0)\n']);
  });

  it('mnemo reembed --watch: a bar kept at the end; in a log a line per 10% step', () => {
    expect(lines(backfillView('m-2'), [{ live: 200, embedded: 100 }], true)).toEqual([
      `${CLEAR}m-2 [${'#'.repeat(15)}${'-'.repeat(15)}]  50% 100/200`,
      '\n',
    ]);
    const states = [0, 5, 19, 20, 31, 100].map((embedded) => ({ live: 100, embedded }));
    expect(lines(backfillView('m-2'), states, false)).toEqual([
      'm-2: 0% (0/100 live facts)\n',
      'm-2: 19% (19/100 live facts)\n',
      'm-2: 20% (20/100 live facts)\n',
      'm-2: 31% (31/100 live facts)\n',
      'm-2: 100% (100/100 live facts)\n',
    ]);
  });
});
