import { z } from 'zod';
import { BadInput } from './errors.ts';

/**
 * List cursors are opaque to clients: base64url JSON of the last fact id of a page. Facts are
 * listed newest first by id (UUIDv7, time-ordered), so the next page is `id < cursor`.
 */
const cursorSchema = z.object({ v: z.literal(1), after: z.uuid() });

export function encodeCursor(afterId: string): string {
  return Buffer.from(JSON.stringify({ v: 1, after: afterId })).toString('base64url');
}

export function decodeCursor(cursor: string): string {
  try {
    return cursorSchema.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))).after;
  } catch {
    throw new BadInput('cursor', 'is not a cursor this API returned');
  }
}
