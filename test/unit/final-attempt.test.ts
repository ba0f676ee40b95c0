import { UnrecoverableError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { isFinalAttempt } from '../../src/jobs/worker.ts';

const job = (attemptsMade: number, attempts?: number) => ({ attemptsMade, opts: { attempts } });

describe('isFinalAttempt', () => {
  it('is the last of the attempts the job was given', () => {
    const failure = new Error('failed');
    expect([0, 1, 2].map((made) => isFinalAttempt(job(made, 3), failure))).toEqual([false, false, true]);
  });

  it('counts a job without attempts as given one', () => {
    expect(isFinalAttempt(job(0), new Error('failed'))).toBe(true);
  });

  it('is final on an UnrecoverableError, however many attempts are left', () => {
    expect(isFinalAttempt(job(0, 20), new UnrecoverableError('invalid payload'))).toBe(true);
  });
});
