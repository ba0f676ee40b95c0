import { randomBytes } from 'node:crypto';

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits. Fact ids are time-ordered,
 * so "newest first" is the primary key order and list pages are a keyset over the primary key.
 */
export function uuidv7(now: number = Date.now(), random: Buffer = randomBytes(16)): string {
  // `random` fixed (16 bytes, e.g. a hash) makes the id deterministic: the same input, the same id.
  const bytes = Buffer.from(random.subarray(0, 16));
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70; // version 7
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
