/**
 * Stable JSON: keys sorted (by UTF-16 code unit, as `Array.prototype.sort` orders strings),
 * `undefined` members left out, so the same value always gives the same text whatever its key
 * order. What is hashed from it must stay byte for byte the same: `http/idempotency.ts` keeps the
 * hash of each keyed request for 24 h, and `mnemo import` derives its idempotency keys from it.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record)
      .filter((key) => record[key] !== undefined)
      .sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
