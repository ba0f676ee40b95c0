import { describe, expect, it } from 'vitest';
import { skippedLine } from '../setup/needs.ts';

const of = (...tags: string[][]) => tags.map((t) => ({ tags: t }));

describe("the run's closing line about skipped tests", () => {
  it('is empty when nothing was skipped', () => {
    expect(skippedLine([])).toBe('');
  });

  it('counts each need and says what would run its tests', () => {
    expect(skippedLine(of(['postgres-server']))).toBe('1 test needs a PostgreSQL server: set DATABASE_URL');
    expect(skippedLine(of(['postgres-server'], ['redis'], ['postgres-server'], ['postgres-server']))).toBe(
      '3 tests need a PostgreSQL server: set DATABASE_URL; 1 test needs Redis: set REDIS_URL or start redis-server on 127.0.0.1:6379',
    );
  });

  it('names skips that give no need, so none is silent', () => {
    expect(skippedLine(of([], ['slow']))).toBe('2 tests were skipped without saying what they need');
    expect(skippedLine(of(['redis'], []))).toBe('1 test needs Redis: set REDIS_URL or start redis-server on 127.0.0.1:6379; 1 test was skipped without saying what it needs');
  });

  it('counts a test needing both under the first need only, so the counts add up to the skips', () => {
    expect(skippedLine(of(['postgres-server', 'redis']))).toBe('1 test needs a PostgreSQL server: set DATABASE_URL');
  });
});
