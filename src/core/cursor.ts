import { z } from 'zod';
import { BadInput } from './errors.ts';

/**
 * List cursors are opaque to clients: base64url JSON of the last id of a page. Facts, reports and
 * erasures are listed newest first by id (UUIDv7, time-ordered), so the next page is `id < cursor`.
 */
const cursorSchema = z.object({ v: z.literal(1), after: z.uuid() });

function encodeCursor(afterId: string): string {
  return Buffer.from(JSON.stringify({ v: 1, after: afterId })).toString('base64url');
}

/** The id a cursor continues after; none without a cursor (the first page). */
export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  try {
    return cursorSchema.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))).after;
  } catch {
    throw new BadInput('cursor', 'is not a cursor this API returned');
  }
}

/** A page of a list, as every list answers. */
export interface Page<Item> {
  data: Item[];
  hasMore: boolean;
  nextCursor: string | null;
}

/**
 * The page out of the `limit + 1` rows a list read: the row past `limit` is read only to know
 * that more follow, and the next page starts after the last row kept.
 */
export function pageOf<Row extends { id: string }>(rows: readonly Row[], limit: number): Page<Row>;
export function pageOf<Row extends { id: string }, Item>(rows: readonly Row[], limit: number, toItem: (row: Row) => Item): Page<Item>;
export function pageOf<Row extends { id: string }, Item>(rows: readonly Row[], limit: number, toItem?: (row: Row) => Item): Page<Row | Item> {
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  return {
    data: toItem ? page.map((row) => toItem(row)) : page,
    hasMore,
    nextCursor: hasMore ? encodeCursor(page[page.length - 1]!.id) : null,
  };
}
