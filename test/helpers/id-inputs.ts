/**
 * Where a request can carry an id, read from the live `/openapi.json` (and MCP `tools/list`), so
 * the cross-tenant tests (test/e2e/route-security.test.ts, the fault suite's isolation row) cover
 * every route there is, not a list someone keeps:
 * - a **resource id** is a string of `format: uuid` (every id the server issues is a UUID), in a
 *   path parameter, a query parameter or anywhere in a body. Its kind (`facts`, `reports`, …) is
 *   the path segment before `{id}`, or the property name (`factId` → `facts`);
 * - a **label** is any other string named `id`, `…Id` or `cursor`: ids a client chooses (scope
 *   keys, episode and subject ids) or hands back (cursors). Another tenant's labels name nothing
 *   of its own, so they must simply find nothing of it.
 * An input whose kind the caller has no ids or labels for is reported as a problem: the test
 * fails until it says what to send there.
 */

export interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  format?: string;
  enum?: unknown[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  minimum?: number;
  minItems?: number;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
}

interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema?: JsonSchema;
}

interface Operation {
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: JsonSchema }> };
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, JsonSchema> };
}

/** A position in a request: a parameter name, or a property path in the body ('[]' = an array item). */
export interface IdInput {
  in: 'path' | 'query' | 'body';
  path: string[];
  /** `resource`: a server-issued id of that kind. `label`: the key to look its values up by. */
  role: { resource: string } | { label: string };
}

export interface PlannedOperation {
  /** `METHOD /path/{param}`, as the tables of the test name it. */
  key: string;
  method: string;
  path: string;
  pathParams: string[];
  /** The body's schema, when the operation takes one. */
  body: { schema: JsonSchema; required: boolean } | undefined;
  /** It honours `Idempotency-Key`. */
  idempotent: boolean;
  inputs: IdInput[];
}

const ID_NAME = /^(id|.+Id|cursor)$/;

/** `facts` from `factId`, `reports` from `reportId`. */
const kindOfName = (name: string) => `${name.replace(/Id$/, '')}s`;

/** A label's key: its own name, or `parent.id` for a bare `id` (a subject's id is not a fact's). */
function labelKey(path: string[]): string {
  const names = path.filter((p) => p !== '[]');
  const last = names[names.length - 1]!;
  return last === 'id' && names.length > 1 ? `${names[names.length - 2]}.id` : last;
}

export function resolve(doc: OpenApiDocument, schema: JsonSchema | undefined): JsonSchema {
  let current = schema ?? {};
  for (let hops = 0; current.$ref && hops < 20; hops++) {
    const name = current.$ref.replace('#/components/schemas/', '');
    current = doc.components?.schemas?.[name] ?? {};
  }
  return current;
}

/** Every string leaf of a schema named like an id, with its path (depth-bounded). */
function idLeaves(doc: OpenApiDocument, schema: JsonSchema | undefined, path: string[] = [], depth = 0): { path: string[]; schema: JsonSchema }[] {
  const s = resolve(doc, schema);
  if (depth > 6) return [];
  const leaves: { path: string[]; schema: JsonSchema }[] = [];
  for (const variant of [...(s.anyOf ?? []), ...(s.oneOf ?? []), ...(s.allOf ?? [])]) leaves.push(...idLeaves(doc, variant, path, depth + 1));
  if (s.properties) {
    for (const [name, property] of Object.entries(s.properties)) {
      const resolved = resolve(doc, property);
      if (resolved.type === 'string' && (resolved.format === 'uuid' || ID_NAME.test(name))) leaves.push({ path: [...path, name], schema: resolved });
      else leaves.push(...idLeaves(doc, resolved, [...path, name], depth + 1));
    }
  }
  if (s.items) leaves.push(...idLeaves(doc, s.items, [...path, '[]'], depth + 1));
  return leaves;
}

function classify(where: IdInput['in'], path: string[], schema: JsonSchema, urlPath: string): IdInput['role'] {
  const name = path[path.length - 1]!;
  if (where === 'path') {
    const segments = urlPath.split('/');
    const at = segments.indexOf(`{${name}}`);
    return { resource: at > 0 ? segments[at - 1]! : `unknown (${name})` };
  }
  if (schema.format === 'uuid') return { resource: name === 'id' ? `unknown (${path.join('.')})` : kindOfName(name) };
  return { label: labelKey(path) };
}

/**
 * The memory API's paths: those src/app.ts puts behind the bearer token, the body limit and the
 * rate limits. The document also describes the health probes (no token, no ids) and `/mcp`
 * (JSON-RPC, whose ids are in its tools' arguments: planned from `tools/list`).
 */
export const isMemoryApiPath = (path: string): boolean => path.startsWith('/v1/') || path.startsWith('/api/kiwi/');

/** Every operation of the memory API (isMemoryApiPath, unless `include` says otherwise) with the id inputs it takes. */
export function planOperations(doc: OpenApiDocument, include: (path: string) => boolean = isMemoryApiPath): PlannedOperation[] {
  const planned: PlannedOperation[] = [];
  for (const [path, operations] of Object.entries(doc.paths)) {
    if (!include(path)) continue;
    for (const [method, operation] of Object.entries(operations)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const parameters = operation.parameters ?? [];
      const inputs: IdInput[] = [];
      const pathParams = parameters.filter((p) => p.in === 'path').map((p) => p.name);
      // A template parameter the document forgot to declare is still one.
      for (const match of path.matchAll(/\{([^}]+)\}/g)) if (!pathParams.includes(match[1]!)) pathParams.push(match[1]!);
      for (const name of pathParams) {
        const schema = parameters.find((p) => p.in === 'path' && p.name === name)?.schema ?? { type: 'string' };
        inputs.push({ in: 'path', path: [name], role: classify('path', [name], resolve(doc, schema), path) });
      }
      for (const p of parameters.filter((p) => p.in === 'query')) {
        const schema = resolve(doc, p.schema);
        if (schema.format === 'uuid' || ID_NAME.test(p.name)) inputs.push({ in: 'query', path: [p.name], role: classify('query', [p.name], schema, path) });
      }
      const bodySchema = operation.requestBody?.content?.['application/json']?.schema;
      if (bodySchema) {
        for (const leaf of idLeaves(doc, bodySchema)) inputs.push({ in: 'body', path: leaf.path, role: classify('body', leaf.path, leaf.schema, path) });
      }
      planned.push({
        key: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        pathParams,
        body: bodySchema ? { schema: bodySchema, required: operation.requestBody?.required ?? false } : undefined,
        idempotent: parameters.some((p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key'),
        inputs,
      });
    }
  }
  return planned;
}

/** What a plan needs from the test: ids and labels of the victim tenant, and how to build bodies. */
export interface Coverage {
  resourceKinds: ReadonlySet<string>;
  labelKeys: ReadonlySet<string>;
  bodies: ReadonlySet<string>;
}

/** What the test could not send: each line names the operation and the input. */
export function problemsOf(operations: readonly PlannedOperation[], coverage: Coverage): string[] {
  const problems: string[] = [];
  for (const op of operations) {
    if (op.body && !coverage.bodies.has(op.key)) problems.push(`${op.key}: takes a body and the test has no way to build one`);
    for (const input of op.inputs) {
      const where = `${op.key} ${input.in} ${input.path.join('.')}`;
      if ('resource' in input.role && !coverage.resourceKinds.has(input.role.resource)) {
        problems.push(`${where}: an id of kind "${input.role.resource}" and the victim tenant has none of that kind`);
      }
      if ('label' in input.role && !coverage.labelKeys.has(input.role.label)) {
        problems.push(`${where}: a label "${input.role.label}" the test has no victim values for`);
      }
    }
  }
  return problems;
}

/** The smallest value a schema accepts, near enough for a body the test then fills in. */
export function minimal(doc: OpenApiDocument, schema: JsonSchema | undefined): unknown {
  const s = resolve(doc, schema);
  if (s.enum?.length) return s.enum[0];
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'object': {
      const value: Record<string, unknown> = {};
      for (const name of s.required ?? []) value[name] = minimal(doc, s.properties?.[name]);
      return value;
    }
    case 'array':
      return s.minItems ? [minimal(doc, s.items)] : [];
    case 'integer':
    case 'number':
      return s.minimum ?? 1;
    case 'boolean':
      return false;
    default:
      return s.format === 'uuid' ? '00000000-0000-4000-8000-000000000000' : 'x';
  }
}

/**
 * A copy of `body` with `value` at `path`, building the objects and one-item arrays on the way
 * from the schema (required properties filled with their smallest values).
 */
export function inject(doc: OpenApiDocument, schema: JsonSchema, body: unknown, path: readonly string[], value: unknown): unknown {
  const [head, ...rest] = path;
  if (head === undefined) return value;
  const s = resolve(doc, schema);
  if (head === '[]') {
    const items = resolve(doc, s.items);
    const list = Array.isArray(body) && body.length > 0 ? [...body] : [minimal(doc, items)];
    list[0] = inject(doc, items, list[0], rest, value);
    return list;
  }
  const object = body && typeof body === 'object' && !Array.isArray(body) ? { ...(body as Record<string, unknown>) } : (minimal(doc, { ...s, type: 'object' }) as Record<string, unknown>);
  const property = resolve(doc, s.properties?.[head]);
  object[head] = inject(doc, property, object[head] ?? (rest.length > 0 ? minimal(doc, property) : undefined), rest, value);
  return object;
}
