/**
 * Fault row "fuzzed bodies and query strings on every route" (issue 10), against a real API
 * process over its own database. The routes come from the API's own `/openapi.json`, read at run
 * time, so a new route is fuzzed without touching this file. For each operation:
 *
 * 1. the bytes of defect 3, one field at a time: a NUL, an unpaired surrogate and dates
 *    PostgreSQL cannot store in every string of the body (with the rest of the body minimal),
 *    in every query parameter and in every path parameter;
 * 2. fast-check requests derived from the operation's JSON schemas: bodies and query strings
 *    shaped as the schema says, and the same with one value replaced by something hostile
 *    (wrong types, huge strings, NUL, unpaired surrogates, deep nesting, odd numbers, extreme
 *    dates, unknown keys), or a body that is not the JSON it claims to be.
 *
 * Every answer must be 2xx or 4xx, never 5xx, a 4xx in the error envelope, and after a 4xx no
 * row changed (facts, revisions, erasures, reports, schedules, vectors; an idempotency record
 * only when the request carried a key and the record holds that same 4xx, which DESIGN §7
 * replays). Seeded, so a failure is reproducible: MNEMO_FUZZ_SEED, MNEMO_FUZZ_RUNS.
 */
import { SignJWT } from 'jose';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_SECRET } from '../helpers/api.ts';
import { uniqueTenant } from '../helpers/factories.ts';
import { isMemoryApiPath } from '../helpers/id-inputs.ts';
import { type ApiProcess, startApiProcess } from './helpers/api-process.ts';

const SEED = Number(process.env.MNEMO_FUZZ_SEED ?? 20_261_130);
/** Random requests per operation, on top of the defect-3 cases (a few dozen per operation). */
const RUNS = Number(process.env.MNEMO_FUZZ_RUNS ?? 200);

// ---------------------------------------------------------------------------------------------
// The OpenAPI document, as far as this file reads it

type JsonSchema = {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  example?: unknown;
};

interface Parameter {
  name: string;
  in: 'query' | 'path' | 'header' | 'cookie';
  schema: JsonSchema;
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body: JsonSchema | undefined;
}

let components: Record<string, JsonSchema> = {};

function deref(schema: JsonSchema): JsonSchema {
  let current = schema;
  for (let i = 0; current.$ref && i < 10; i++) current = components[current.$ref.replace('#/components/schemas/', '')] ?? {};
  if (current.allOf) {
    const parts = current.allOf.map(deref);
    return {
      ...Object.assign({}, ...parts),
      properties: Object.assign({}, ...parts.map((p) => p.properties ?? {})),
      required: parts.flatMap((p) => p.required ?? []),
    };
  }
  return current;
}

const typeOf = (schema: JsonSchema): string | undefined => (Array.isArray(schema.type) ? schema.type[0] : schema.type);

// ---------------------------------------------------------------------------------------------
// Hostile values. A body is serialized with JSON.stringify; what JSON.stringify cannot write
// (1e400, 5,000 levels of nesting) goes in as a marker string replaced in the text afterwards.

class Raw {
  constructor(readonly json: string) {}
}
const rawMarker = (index: number) => `\u0001raw${index}\u0001`;

function serialize(value: unknown): string {
  const raws: Raw[] = [];
  const text = JSON.stringify(value, (_key, item: unknown) => {
    if (item instanceof Raw) {
      raws.push(item);
      return rawMarker(raws.length - 1);
    }
    return item;
  });
  return raws.reduce((out, raw, i) => out.replace(JSON.stringify(rawMarker(i)), raw.json), text ?? '');
}

const deepArrays = (depth: number) => new Raw(`${'['.repeat(depth)}"x"${']'.repeat(depth)}`);
const deepObjects = (depth: number) => new Raw(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`);

/** Dates PostgreSQL cannot store, or that are not dates at all. */
const EXTREME_DATES = [
  '0000-01-01T00:00:00Z',
  '0001-01-01T00:00:00+14:00',
  '9999-12-31T23:59:59-23:59',
  '+275760-09-13T00:00:00.000Z',
  '-000001-01-01T00:00:00Z',
  '2026-02-30T00:00:00Z',
  '2026-01-01T00:00:00.1234567891Z',
  '2026-01-01T24:00:00Z',
  '1970-01-01T00:00:00Z',
  '0001-01-01T00:00:00Z',
  '9999-12-31T23:59:59.999Z',
];

/** Values put in place of one value of a schema-shaped body. */
const HOSTILE_VALUES: unknown[] = [
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfff',
  '\udbff\ud800',
  '',
  ' ',
  'x'.repeat(70_000),
  '😀'.repeat(200),
  ...EXTREME_DATES,
  null,
  true,
  0,
  -1,
  -0,
  1.5,
  2 ** 53 + 1,
  1e308,
  -1e308,
  Number.MIN_VALUE,
  new Raw('1e400'),
  new Raw('-1e400'),
  new Raw('123456789012345678901234567890'),
  new Raw('0.1e-400'),
  [],
  {},
  [[[]]],
  { a: { b: { c: '\u0000' } } },
  { '\u0000': 1 },
  { '\ud800': 'x' },
  deepArrays(65),
  deepArrays(5000),
  deepObjects(5000),
  new Raw('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}'),
];

/** Bodies that are not the JSON object they claim to be. */
const HOSTILE_BODIES: (string | Buffer)[] = [
  '',
  'null',
  '[]',
  '"text"',
  '42',
  '{',
  '{"type":',
  '{"a":1,}',
  "{'type':'acme.note'}",
  '{"type":"acme.note","content":{"text":"x"}} trailing',
  '\ufeff{"type":"acme.note","content":{"text":"x"}}',
  '{"type":"acme.note","type":"other.note","content":1}',
  '{"__proto__":{"admin":true},"type":"acme.note","content":1}',
  '{"type":"acme.note","content":"\\ud800"}',
  '{"type":"acme.note","content":"\\u0000"}',
  '{"type":"acme.note","content":NaN}',
  `{"type":"acme.note","content":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
  Buffer.from([0x7b, 0x22, 0x74, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
  Buffer.from('{"type":"acme.note","content":"\xed\xa0\x80"}', 'latin1'),
  Buffer.from([0xc0, 0x80]),
];

/** Query values, already percent-encoded. */
const HOSTILE_QUERY_VALUES = [
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%FF',
  '%',
  '%zz',
  '',
  '-1',
  '0',
  '1.5',
  '1e400',
  '9'.repeat(40),
  'a'.repeat(5000),
  '%F0%9F%98%80',
  ...EXTREME_DATES.map(encodeURIComponent),
  encodeURIComponent('acme.note,\u0000'),
  encodeURIComponent(',,,'),
];

const HOSTILE_PATH_VALUES = [
  '%00',
  '%ED%A0%80',
  'not-a-uuid',
  '00000000-0000-0000-0000-000000000000',
  'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
  'a'.repeat(300),
  '..%2F..%2Fopenapi.json',
  '%20',
];

/** Percent-encodes a generated string; an unpaired surrogate goes as its WTF-8 bytes. */
function encodeQueryValue(value: string): string {
  if (!/\p{Cs}/u.test(value)) return encodeURIComponent(value);
  return [...value]
    .map((ch) => {
      const code = ch.codePointAt(0)!;
      if (code < 0xd800 || code > 0xdfff) return encodeURIComponent(ch);
      return [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    })
    .join('');
}

// ---------------------------------------------------------------------------------------------
// Arbitraries from JSON schemas

interface Pools {
  fact: string[];
  report: string[];
  erasure: string[];
}

function stringArbitrary(schema: JsonSchema, pools: Pools): fc.Arbitrary<string> {
  const min = schema.minLength ?? 0;
  const max = Math.max(min, Math.min(schema.maxLength ?? 64, 64));
  if (schema.format === 'uuid') return fc.oneof(fc.constantFrom(...pools.fact, ...pools.report, ...pools.erasure), fc.uuid());
  if (schema.format === 'date-time') {
    return fc.oneof(
      { weight: 4, arbitrary: fc.date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }).map((d) => d.toISOString()) },
      { weight: 1, arbitrary: fc.constantFrom(...EXTREME_DATES) },
    );
  }
  if (schema.pattern) {
    const pattern = new RegExp(schema.pattern);
    return fc.stringMatching(pattern).filter((s) => s.length >= min && s.length <= (schema.maxLength ?? Infinity));
  }
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom('p1', 'u1', 'end-9', 'th-1', 'episodes/', 'acme.note', 'x') },
    { weight: 3, arbitrary: fc.string({ minLength: min, maxLength: max }) },
    { weight: 2, arbitrary: fc.string({ minLength: min, maxLength: max, unit: 'binary' }) },
  );
}

function arbitraryOf(input: JsonSchema, pools: Pools, depth = 0): fc.Arbitrary<unknown> {
  const schema = deref(input);
  if (depth > 6) return fc.constant('x');
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return fc.oneof(...alternatives.map((s) => arbitraryOf(s, pools, depth + 1)));
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  switch (typeOf(schema)) {
    case 'string':
      return stringArbitrary(schema, pools);
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -5, max: Math.min(schema.maximum ?? 1_000_000, 1_000_000) });
    case 'number':
      return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(arbitraryOf(schema.items ?? {}, pools, depth + 1), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.max(schema.minItems ?? 0, Math.min(schema.maxItems ?? 3, 3)),
      });
    case 'object': {
      const properties = schema.properties ?? {};
      const required = (schema.required ?? []).filter((key) => key in properties);
      return fc.record(
        Object.fromEntries(Object.entries(properties).map(([key, value]) => [key, arbitraryOf(value, pools, depth + 1)])),
        { requiredKeys: required },
      );
    }
    default:
      // No type: content, any JSON value.
      return fc.jsonValue({ maxDepth: 3 });
  }
}

/** Every node of a JSON value, as paths (the root is []). */
function pathsOf(value: unknown, path: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(path);
  if (Array.isArray(value)) value.forEach((item, i) => pathsOf(item, [...path, i], out));
  else if (value !== null && typeof value === 'object' && !(value instanceof Raw)) {
    for (const [key, item] of Object.entries(value)) pathsOf(item, [...path, key], out);
  }
  return out;
}

/** `value` with the node at `path` replaced (a copy; the root may be replaced too). */
function replaced(value: unknown, path: (string | number)[], by: unknown): unknown {
  if (path.length === 0) return by;
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((item, i) => (i === head ? replaced(item, rest, by) : item));
  const object = value as Record<string, unknown>;
  return { ...object, [head!]: replaced(object[head!], rest, by) };
}

/** The least body the schema takes: required properties only, each the least of its kind. */
function minimal(input: JsonSchema, pools: Pools, depth = 0): unknown {
  const schema = deref(input);
  if (depth > 6) return 'x';
  if (schema.anyOf ?? schema.oneOf) return minimal((schema.anyOf ?? schema.oneOf)![0]!, pools, depth + 1);
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  switch (typeOf(schema)) {
    case 'string':
      if (schema.example !== undefined) return schema.example;
      if (schema.format === 'uuid') return pools.fact[0];
      if (schema.format === 'date-time') return '2026-01-31T12:00:00Z';
      return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return false;
    case 'array':
      return Array.from({ length: schema.minItems ?? 0 }, () => minimal(schema.items ?? {}, pools, depth + 1));
    case 'object':
      return Object.fromEntries((schema.required ?? []).map((key) => [key, minimal(schema.properties?.[key] ?? {}, pools, depth + 1)]));
    default:
      return schema.example ?? { text: 'x' };
  }
}

/**
 * One body per (string or untyped field of the schema, defect-3 value): the field set, its
 * ancestors minimal, so the request is otherwise as valid as the schema alone can make it.
 */
function defect3Bodies(root: JsonSchema, pools: Pools): { field: string; body: unknown }[] {
  const cases: { field: string; body: unknown }[] = [];
  const visit = (input: JsonSchema, path: (string | number)[], depth: number) => {
    const schema = deref(input);
    if (depth > 5) return;
    const type = typeOf(schema);
    if (type === 'object') {
      for (const [key, child] of Object.entries(schema.properties ?? {})) visit(child, [...path, key], depth + 1);
      return;
    }
    if (type === 'array') {
      visit(schema.items ?? {}, [...path, 0], depth + 1);
      return;
    }
    const values: unknown[] =
      type === 'string'
        ? ['a\u0000b', '\ud800', ...(schema.format === 'date-time' ? ['0000-01-01T00:00:00Z', '0001-01-01T00:00:00+14:00', '9999-12-31T23:59:59-23:59'] : [])]
        : type === undefined
          ? [{ text: 'a\u0000b' }, { 'k\u0000': 1 }, { text: '\ud800' }, ['\udfff'], deepArrays(5000), deepObjects(100), new Raw('1e400')]
          : [new Raw('1e400'), -0, 2 ** 53 + 1];
    for (const value of values) cases.push({ field: path.join('.'), body: setWithin(root, path, value, pools) });
  };
  visit(root, [], 0);
  return cases;
}

/** The minimal body of `root` with `value` at `path`, creating the ancestors minimal. */
function setWithin(root: JsonSchema, path: (string | number)[], value: unknown, pools: Pools): unknown {
  const build = (input: JsonSchema, rest: (string | number)[]): unknown => {
    if (rest.length === 0) return value;
    const schema = deref(input);
    const [head, ...tail] = rest;
    if (typeof head === 'number') return [build(schema.items ?? {}, tail)];
    const base = (minimal(schema, pools) ?? {}) as Record<string, unknown>;
    return { ...base, [head!]: build(schema.properties?.[head!] ?? {}, tail) };
  };
  return build(root, path);
}

// ---------------------------------------------------------------------------------------------
// Requests

interface FuzzRequest {
  method: string;
  /** Path with parameters substituted and query string, as sent. */
  target: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  /** What the case is, for a failure message. */
  label: string;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

const describeRequest = (r: FuzzRequest) => {
  const body = r.body === undefined ? '' : Buffer.isBuffer(r.body) ? `<${r.body.length} bytes>` : JSON.stringify(r.body.slice(0, 400));
  const headers = Object.fromEntries(Object.entries(r.headers).filter(([k]) => k !== 'authorization'));
  return `${r.label}: ${r.method} ${r.target.slice(0, 400)} ${JSON.stringify(headers)} ${body}`;
};

describe('fault: fuzzed bodies and query strings on every route of /openapi.json', () => {
  let api: ApiProcess;
  let tenantId: string;
  let adminToken: string;
  let memberToken: string;
  const pools: Pools = { fact: [], report: [], erasure: [] };
  const statuses = new Map<number, number>();
  let requests = 0;
  let operations: Operation[] = [];

  const sign = (claims: Record<string, unknown>) =>
    new SignJWT({ tid: tenantId, role: 'admin', projects: { read: [], write: [] }, orgs: { read: [], write: [] }, ...claims })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(String(claims.sub ?? 'fuzz-admin'))
      .setIssuedAt()
      .setExpirationTime('30m')
      .sign(new TextEncoder().encode(TEST_SECRET));

  async function send(request: FuzzRequest): Promise<Answer> {
    const hasBody = request.body !== undefined && request.method !== 'GET' && request.method !== 'HEAD';
    const response = await fetch(`${api.url}${request.target}`, {
      method: request.method,
      headers: request.headers,
      ...(hasBody ? { body: request.body } : {}),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: response.status, headers: response.headers, text: await response.text() };
  }

  /** What a refused request must leave as it was, seen by the owner (no row-level security). */
  async function stored() {
    const [row] = await api.db.admin<Record<string, string | number>[]>`
      select (select count(*) from facts)::int as facts,
             (select coalesce(sum(version), 0) from facts)::int as versions,
             (select count(*) from facts where invalidated_at is not null)::int as invalidated,
             (select count(*) from fact_revisions)::int as revisions,
             (select count(*) from fact_embeddings)::int as vectors,
             (select count(*) from erasures)::int as erasures,
             (select coalesce(string_agg(id::text || status, ',' order by id), '') from erasures) as erasure_states,
             (select count(*) from coverage_reports)::int as reports,
             (select count(*) from coverage_report_schedules)::int as schedules,
             (select coalesce(max(updated_at)::text, '') from coverage_report_schedules) as schedule_updated,
             (select count(*) from idempotency_keys)::int as keys`;
    return row!;
  }

  /** Sends one request and checks what must hold of every answer. */
  async function check(request: FuzzRequest): Promise<void> {
    const before = await stored();
    let answer: Answer;
    try {
      answer = await send(request);
    } catch (error) {
      throw new Error(`request failed (${(error as Error).message}); ${describeRequest(request)}`);
    }
    requests++;
    statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    if (answer.status >= 500) {
      throw new Error(`${answer.status} ${answer.text.slice(0, 300)}; ${describeRequest(request)}`);
    }
    if (answer.status < 400) return;
    // Every refusal, the HTTP parser's included (answerMalformedRequests), is in the envelope.
    const requestId = answer.headers.get('x-request-id');
    if (!requestId) throw new Error(`${answer.status} without X-Request-Id: ${answer.text.slice(0, 300)}; ${describeRequest(request)}`);
    {
      let envelope: { error?: { code?: unknown; message?: unknown; requestId?: unknown } } = {};
      try {
        envelope = JSON.parse(answer.text);
      } catch {
        // checked below
      }
      if (typeof envelope.error?.code !== 'string' || typeof envelope.error.message !== 'string' || envelope.error.requestId !== requestId) {
        throw new Error(`${answer.status} not in the error envelope: ${answer.text.slice(0, 300)}; ${describeRequest(request)}`);
      }
    }
    const after = await stored();
    const keyed = request.headers['idempotency-key'] !== undefined;
    if (keyed && after.keys === Number(before.keys) + 1) {
      // DESIGN §7: a domain 4xx under an Idempotency-Key is stored to be replayed, and nothing else.
      // fetch sends a header value without its leading and trailing blanks.
      const key = request.headers['idempotency-key']!.replace(/^[ \t]+|[ \t]+$/g, '');
      const [record] = await api.db.admin<{ response_status: number }[]>`
        select response_status from idempotency_keys where tenant_id = ${tenantId} and key = ${key}`;
      expect(record?.response_status, `the stored record of ${describeRequest(request)}`).toBe(answer.status);
      after.keys = before.keys!;
    }
    expect(after, `rows changed by a ${answer.status}: ${describeRequest(request)}`).toEqual(before);
  }

  async function writeFact(content: unknown = { text: `fuzz ${requests}` }): Promise<string> {
    const response = await fetch(`${api.url}/v1/memory/facts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      // Naming no person or conversation, so a pending erasure the fuzz asked for never blocks it.
      body: JSON.stringify({ type: 'acme.note', content, scope: { projectId: 'p1' } }),
    });
    expect(response.status).toBe(201);
    return ((await response.json()) as { id: string }).id;
  }

  beforeAll(async () => {
    api = await startApiProcess();
    tenantId = uniqueTenant('fuzz');
    adminToken = await sign({ sub: 'fuzz-admin' });
    memberToken = await sign({ sub: 'fuzz-member', role: 'member', projects: { read: ['p1'], write: ['p2'] } });

    const document = (await (await fetch(`${api.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema: JsonSchema }> } }>>;
      components?: { schemas?: Record<string, JsonSchema> };
    };
    components = document.components?.schemas ?? {};
    // The memory API's routes: the health probes take nothing to fuzz, and /mcp's body is JSON-RPC, not one of these schemas.
    operations = Object.entries(document.paths).filter(([path]) => isMemoryApiPath(path)).flatMap(([path, methods]) =>
      Object.entries(methods)
        .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
        .map(([method, operation]) => ({
          method: method.toUpperCase(),
          path,
          parameters: operation.parameters ?? [],
          body: operation.requestBody?.content?.['application/json']?.schema,
        })),
    );

    pools.fact.push(await writeFact(), await writeFact());
    const erasable = await writeFact({ text: 'to be erased' });
    const auth = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };
    const report = await fetch(`${api.url}/v1/memory/reports`, { method: 'POST', headers: auth, body: '{}' });
    expect(report.status).toBe(202);
    pools.report.push(((await report.json()) as { id: string }).id);
    const erasure = await fetch(`${api.url}/v1/memory/erasures`, { method: 'POST', headers: auth, body: JSON.stringify({ factId: erasable }) });
    expect(erasure.status).toBe(202);
    pools.erasure.push(((await erasure.json()) as { id: string }).id);
  });

  afterAll(async () => {
    await api?.stop();
  });

  /** The id a path parameter of this route names: a fact, a report or an erasure of the tenant. */
  const poolFor = (path: string): string[] => (path.includes('/reports/') ? pools.report : path.includes('/erasures/') ? pools.erasure : pools.fact);

  function target(operation: Operation, pathValues: Record<string, string>, query: string): string {
    const path = operation.path.replace(/\{([^}]+)\}/g, (_m, name: string) => pathValues[name] ?? poolFor(operation.path)[0]!);
    return query ? `${path}?${query}` : path;
  }

  function baseHeaders(token = adminToken): Record<string, string> {
    return { authorization: `Bearer ${token}` };
  }

  it('answers only 2xx and 4xx, stores nothing on a 4xx', async () => {
    const started = Date.now();
    expect(operations.length).toBeGreaterThanOrEqual(20);

    for (const [index, operation] of operations.entries()) {
      // A fresh live fact for each route: an earlier route may have deleted or erased the last one.
      pools.fact.unshift(await writeFact());
      const queryParameters = operation.parameters.filter((p) => p.in === 'query');
      const pathParameters = operation.parameters.filter((p) => p.in === 'path');
      const headerParameters = operation.parameters.filter((p) => p.in === 'header');
      const label = `${operation.method} ${operation.path}`;
      const json = { 'content-type': 'application/json' };

      // 1. The bytes of defect 3, one field at a time.
      if (operation.body) {
        for (const { field, body } of defect3Bodies(operation.body, pools)) {
          await check({ method: operation.method, target: target(operation, {}, ''), headers: { ...baseHeaders(), ...json }, body: serialize(body), label: `${label} body ${field}` });
        }
      }
      for (const parameter of queryParameters) {
        for (const value of ['a%00b', '%ED%A0%80', '0000-01-01T00%3A00%3A00Z', encodeURIComponent('0001-01-01T00:00:00+14:00')]) {
          await check({ method: operation.method, target: target(operation, {}, `${parameter.name}=${value}`), headers: baseHeaders(), label: `${label} query ${parameter.name}` });
        }
      }
      for (const parameter of pathParameters) {
        for (const value of ['%00', '%ED%A0%80']) {
          const body = operation.body ? serialize(minimal(operation.body, pools)) : undefined;
          await check({
            method: operation.method,
            target: target(operation, { [parameter.name]: value }, ''),
            headers: { ...baseHeaders(), ...(body ? json : {}) },
            ...(body ? { body } : {}),
            label: `${label} path ${parameter.name}`,
          });
        }
      }

      // 2. Requests derived from the schemas, valid-shaped and with one hostile value.
      const bodyArbitrary: fc.Arbitrary<string | Buffer | undefined> = operation.body
        ? fc.oneof(
            { weight: 4, arbitrary: arbitraryOf(operation.body, pools).map(serialize) },
            {
              weight: 5,
              arbitrary: fc
                .tuple(arbitraryOf(operation.body, pools), fc.nat(), fc.oneof(fc.constantFrom(...HOSTILE_VALUES), fc.jsonValue({ maxDepth: 2 })), fc.boolean())
                .map(([base, pick, hostile, addKey]) => {
                  const paths = pathsOf(base);
                  const path = paths[pick % paths.length]!;
                  // Either the value at that path becomes hostile, or an unknown key is added there.
                  if (addKey && base !== null && typeof base === 'object' && !Array.isArray(base)) {
                    return serialize({ ...(base as object), [['zz', '__proto__', 'constructor', 'k\u0000'][pick % 4]!]: hostile });
                  }
                  return serialize(replaced(base, path, hostile));
                }),
            },
            { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_BODIES) },
          )
        : fc.option(fc.constantFrom<string | Buffer>('{}', '{"a":1}', '\u0000'), { freq: 8 }).map((b) => b ?? undefined);

      const queryArbitrary = fc
        .tuple(
          ...queryParameters.map((parameter) =>
            fc.option(
              fc.oneof(
                { weight: 3, arbitrary: arbitraryOf(parameter.schema, pools).map((v) => encodeQueryValue(String(v))) },
                { weight: 2, arbitrary: fc.constantFrom(...HOSTILE_QUERY_VALUES) },
              ),
              { freq: 2 },
            ),
          ),
          fc.option(fc.constantFrom('zz=1', 'limit=1&limit=2', '__proto__=x', 'asOf=2026-01-01T00:00:00Z&asOf=x', '%00=1'), { freq: 6 }),
        )
        .map((values) => {
          const extra = values.pop() as string | null;
          const parts = (values as (string | null)[]).flatMap((value, i) => (value === null ? [] : [`${queryParameters[i]!.name}=${value}`]));
          if (extra) parts.push(extra);
          return parts.join('&');
        });

      const pathArbitrary = fc.tuple(
        ...pathParameters.map((parameter) =>
          fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...poolFor(operation.path).slice(0, 3)) }, { weight: 2, arbitrary: fc.constantFrom(...HOSTILE_PATH_VALUES) }).map((v) => [parameter.name, v] as const),
        ),
      );

      const headerArbitrary = fc.tuple(
        ...headerParameters.map((parameter) =>
          fc
            .option(
              fc.oneof(
                fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme-ascii' }),
                fc.constantFrom('run:abc', 'run:', ':x', 'a:b:c', 'k'.repeat(300), `t:${'x'.repeat(2000)}`, 'caf\u00e9', ' ', '\t'),
              ),
              { freq: 3 },
            )
            .map((v) => [parameter.name, v] as const),
        ),
      );

      const requestArbitrary = fc.record({
        body: bodyArbitrary,
        query: queryArbitrary,
        path: pathArbitrary,
        headers: headerArbitrary,
        contentType: fc.oneof(
          { weight: 12, arbitrary: fc.constant<string | undefined>('application/json') },
          { weight: 1, arbitrary: fc.constantFrom<string | undefined>(undefined, 'text/plain', 'application/json; charset=utf-16', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x') },
        ),
        asMember: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
      });

      await fc.assert(
        fc.asyncProperty(requestArbitrary, async (generated) => {
          const headers: Record<string, string> = baseHeaders(generated.asMember ? memberToken : adminToken);
          for (const [name, value] of generated.headers) if (value !== null) headers[name] = value;
          if (generated.body !== undefined && generated.contentType) headers['content-type'] = generated.contentType;
          await check({
            method: operation.method,
            target: target(operation, Object.fromEntries(generated.path), generated.query),
            headers,
            ...(generated.body !== undefined ? { body: generated.body } : {}),
            label: `${label} (seed ${SEED + index})`,
          });
        }),
        { seed: SEED + index, numRuns: RUNS, endOnFailure: true },
      );
    }

    const fourxx = Object.fromEntries([...statuses].filter(([status]) => status >= 400 && status < 500).sort(([a], [b]) => a - b));
    const twoxx = [...statuses].filter(([status]) => status < 300).reduce((sum, [, n]) => sum + n, 0);
    const fivexx = [...statuses].filter(([status]) => status >= 500).reduce((sum, [, n]) => sum + n, 0);
    console.log(
      `[faults] fuzz: routes=${operations.length}, requests=${requests}, 2xx=${twoxx}, 4xx by status ${JSON.stringify(fourxx)}, 5xx=${fivexx} (seed ${SEED}, ${RUNS} random per route, ${((Date.now() - started) / 1000).toFixed(1)} s)`,
    );
    expect(fivexx).toBe(0);
    // The process logged no unhandled error either.
    expect(api.process.stdout() + api.process.stderr()).not.toContain('"unhandled error"');
  });
});
