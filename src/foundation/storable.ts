/**
 * What PostgreSQL can store, as the building blocks of every wire schema (facts, retrieval,
 * reports, erasure, token claims). A value that passes its schema must never fail in the
 * database: such a failure is a 500 for what is the client's mistake, found only after work
 * was done. So text refuses NUL (text and jsonb cannot hold U+0000) and unpaired surrogates
 * (jsonb refuses them; a text column would silently store U+FFFD, so two different ids could
 * become one), content is bounded in depth (serializing it recurses), and timestamps stay in
 * the years PostgreSQL reads back from what the driver sends.
 *
 * Plain zod, so token claims and the database side need no HTTP framework. A wire schema that
 * calls `.openapi(…)` on one of these imports `@hono/zod-openapi` itself: loading that module is
 * what gives every zod schema the method (docs/decisions/0101-foundation-leaf.md).
 */
import { z } from 'zod';

/** NUL, or a surrogate code unit without its pair (under /u a lone one is its own code point, in Cs). */
const UNSTORABLE_CHARACTER = /[\u0000\p{Cs}]/u;

/** Why `value` cannot be stored as text, or undefined when it can. */
export function unstorableText(value: string): string | undefined {
  const found = UNSTORABLE_CHARACTER.exec(value);
  if (!found) return undefined;
  return found[0] === '\u0000' ? 'must not contain a NUL character (\\u0000)' : 'must be well-formed Unicode (no unpaired surrogate)';
}

/** A string PostgreSQL can store: every string of the wire is built on it (`.min`, `.max`, … chain on). */
export const textSchema = () =>
  z.string().superRefine((value, ctx) => {
    const problem = unstorableText(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/**
 * How deep `content` may nest: `{"a": 1}` is 1 level, `[[1]]` is 2. Deep enough for any real
 * document; far below what would exhaust the stack in serializing, hashing or in jsonb.
 */
export const CONTENT_MAX_DEPTH = 64;

export interface ContentProblem {
  /** Where inside the value, e.g. `['a', 0, 'b']`. */
  path: (string | number)[];
  message: string;
}

/**
 * The first part of a parsed JSON value that cannot be stored: too deep, a string or key with
 * NUL or an unpaired surrogate, or a number JSON.parse made infinite (e.g. `1e400`, which would
 * otherwise be stored as null). Recursion is bounded by the depth limit.
 */
export function unstorableJson(value: unknown, path: (string | number)[] = [], depth = 0): ContentProblem | undefined {
  if (typeof value === 'string') {
    const message = unstorableText(value);
    return message ? { path, message } : undefined;
  }
  if (typeof value === 'number') {
    return Number.isFinite(value) ? undefined : { path, message: 'must be a finite number' };
  }
  if (value === null || typeof value !== 'object') return undefined;
  if (depth >= CONTENT_MAX_DEPTH) {
    return { path: [], message: `must not nest deeper than ${CONTENT_MAX_DEPTH} levels of objects and arrays` };
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = unstorableJson(value[i], [...path, i], depth + 1);
      if (problem) return problem;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const keyProblem = unstorableText(key);
    if (keyProblem) return { path, message: `has a key that ${keyProblem}` };
    const problem = unstorableJson(item, [...path, key], depth + 1);
    if (problem) return problem;
  }
  return undefined;
}

/**
 * The instants the API stores: years 1 to 9999 in UTC. Values go to PostgreSQL as
 * `Date#toISOString()`, which writes year 0 (1 BC) as `0000` and years past 9999 with six
 * digits, and PostgreSQL reads neither; `0001-01-01T00:00:00+14:00` is year 0 in UTC.
 */
export const TIMESTAMP_MIN = '0001-01-01T00:00:00.000Z';
export const TIMESTAMP_MAX = '9999-12-31T23:59:59.999Z';
const timestampMin = Date.parse(TIMESTAMP_MIN);
const timestampMax = Date.parse(TIMESTAMP_MAX);

/**
 * An instant the API stores. Its example and description for /openapi.json are the wire
 * schemas' to add (src/memory/schemas.ts) with `.openapi(…)`: zod's own `.meta(…)` would put
 * them into the MCP tools' JSON Schemas too.
 */
export const timestampSchema = () =>
  z.iso
    .datetime({ offset: true, message: 'must be an ISO 8601 date-time, e.g. 2026-01-31T12:00:00Z' })
    .refine(
      (value) => {
        const instant = Date.parse(value);
        // Not a date-time at all: the format check above already says so.
        return Number.isNaN(instant) || (instant >= timestampMin && instant <= timestampMax);
      },
      { message: `must be between ${TIMESTAMP_MIN} and ${TIMESTAMP_MAX} (UTC)` },
    );
