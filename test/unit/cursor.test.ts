import { describe, expect, it } from 'vitest';
import { decodeCursor, pageOf } from '../../src/core/cursor.ts';
import { uuidv7 } from '../../src/core/ids.ts';

/** `n` rows newest first, as a list reads them. */
const rowsOf = (count: number) =>
  Array.from({ length: count }, () => uuidv7())
    .reverse()
    .map((id, n) => ({ id, n }));

describe('pageOf', () => {
  it('is the last page when the extra row was not there', () => {
    for (const count of [0, 1, 3]) {
      const rows = rowsOf(count);
      expect(pageOf(rows, 3)).toEqual({ data: rows, hasMore: false, nextCursor: null });
    }
  });

  it('keeps `limit` rows when the extra one came back, and continues after the last kept', () => {
    const rows = rowsOf(4);
    const page = pageOf(rows, 3);
    expect(page.data).toEqual(rows.slice(0, 3));
    expect(page.hasMore).toBe(true);
    expect(decodeCursor(page.nextCursor!)).toBe(rows[2]!.id);
  });

  it('maps the kept rows only, one argument each', () => {
    const rows = rowsOf(3);
    const seen: unknown[][] = [];
    const page = pageOf(rows, 2, (...args) => {
      seen.push(args);
      return `row ${args[0].n}`;
    });
    expect(page.data).toEqual(['row 0', 'row 1']);
    expect(seen).toEqual([[rows[0]], [rows[1]]]);
    expect(decodeCursor(page.nextCursor!)).toBe(rows[1]!.id);
  });
});

describe('decodeCursor', () => {
  it('starts at the first page without a cursor, and refuses one this API did not make', () => {
    expect(decodeCursor(undefined)).toBeUndefined();
    expect(() => decodeCursor('bm90IGEgY3Vyc29y')).toThrow(/is not a cursor this API returned/);
  });
});
