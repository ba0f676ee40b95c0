import { type OpenAPIHono, z } from '@hono/zod-openapi';
import { errorCodes } from '../foundation/app-error.ts';

export const ErrorSchema = z
  .object({
    error: z
      .object({
        code: z.enum(errorCodes),
        message: z.string(),
        requestId: z.string(),
        details: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
        currentVersion: z.number().int().optional(),
      })
      .catchall(z.unknown()),
  })
  .openapi('Error');

/** A JSON body or response of `schema`, for createRoute. */
export const json = <T extends z.ZodType>(schema: T, description: string) => ({
  content: { 'application/json': { schema } },
  description,
});

/** Every /v1 route takes the bearer token. */
export const bearerAuth = [{ bearer: [] }];

const retryAfter = (when: string) => ({
  'Retry-After': { description: `Seconds to wait before retrying ${when}`, schema: { type: 'integer' as const, minimum: 0 } },
});

/**
 * What every route behind the bearer token can answer besides its success (DESIGN §7): its input
 * is validated, its token checked, its rate limits counted (src/http/rate-limit.ts), and any
 * statement can meet a restarting database.
 */
const everyRouteMay = {
  400: 'bad-input: the request breaks a rule; `details` names each field',
  401: 'unauthenticated: the bearer token is missing, malformed, expired or wrongly signed',
  429: "rate-limited: over the caller's or the tenant's limit for this kind of request; `Retry-After` says when to try again",
  500: 'internal: an unexpected failure, logged with the request id',
  503: "unavailable: the database is restarting or unreachable, a statement ran past its timeout, or the token issuer's keys could not be fetched; nothing was committed, so retrying is safe",
} as const;

type CommonStatus = keyof typeof everyRouteMay;
/** The statuses only some routes give: each route names those its own rules produce. */
type OwnStatus = 403 | 404 | 409 | 413 | 422 | 501;

/**
 * A route's error answers, to spread into its responses: the five every route may give, and the
 * ones its own rules add (`own`), each described as it happens on that route. A description given
 * for one of the five is appended to the common one (e.g. another reason for 503 on this route).
 * All of them carry the error envelope.
 */
export function errorResponses<Own extends Partial<Record<CommonStatus | OwnStatus, string>>>(own: Own = {} as Own) {
  const statuses = [...new Set([...Object.keys(everyRouteMay), ...Object.keys(own)].map(Number))].sort((a, b) => a - b);
  const responses: Record<number, ReturnType<typeof json<typeof ErrorSchema>> & { headers?: ReturnType<typeof retryAfter> }> = {};
  for (const status of statuses) {
    const common = everyRouteMay[status as CommonStatus];
    const ownText = own[status as keyof Own] as string | undefined;
    const description = common && ownText ? `${common}. Here also: ${ownText}` : (common ?? ownText)!;
    responses[status] = {
      ...json(ErrorSchema, description),
      ...(status === 429 ? { headers: retryAfter('(the window of the limit that ran out)') } : {}),
      ...(status === 503 ? { headers: retryAfter('(when the database is the cause)') } : {}),
    };
  }
  return responses as Record<CommonStatus | (keyof Own & number), (typeof responses)[number]>;
}

/** Reasons several routes share, for their `errorResponses`. */
/** The header of every POST that replays its first answer (DESIGN §7). */
export const idempotencyKeyHeader = z.object({
  'idempotency-key': z.string().optional().openapi({ description: 'Replays the first response for 24 h (DESIGN §7)' }),
});

export const because = {
  bodyOver1MiB: 'payload-too-large: the body is over 1 MiB',
  idempotencyInFlight: 'idempotency-in-flight: the first request with this Idempotency-Key is still running',
  idempotencyKeyReused: 'idempotency-key-reused: this Idempotency-Key was first sent with another body',
  erasureInProgress: 'erasure-in-progress: a person or conversation this write names is being erased',
  tenantAdminsOnly: 'permission-denied: for tenant admins only',
  scopeMismatch: 'scope-mismatch: `scope.tenantId` is not your own tenant',
  factNotFound: 'fact-not-found: no such fact, or not one you can see',
} as const;

export const openApiInfo = {
  openapi: '3.1.0',
  info: {
    title: 'Mnemo',
    version: '0.1.0',
    description: [
      'Multi-tenant memory for AI agents: facts with revisions, trust and retention; keyword, semantic and hybrid retrieval; episodic coverage.',
      '',
      'Every `/v1` and `/api/kiwi` route, and `POST /mcp`, takes `Authorization: Bearer <JWT>`. Every error is `{"error": {"code", "message", "requestId", …}}`, ' +
        'its `code` one of a closed list mapped to one status each; every response carries `X-Request-Id`. ' +
        'A POST that writes honours `Idempotency-Key` (the first response is replayed for 24 h).',
    ].join('\n'),
  },
  tags: [
    { name: 'facts', description: 'Typed facts with revisions, trust and retention' },
    { name: 'retrieval', description: 'Search by keyword, by meaning or both, and the `<memory>` block for a model' },
    { name: 'episodes', description: 'Coverage reports: which episodes no consolidated fact has merged yet' },
    { name: 'lifecycle', description: "Erasure of a fact, a person's data or a conversation (tenant admins)" },
    { name: 'mcp', description: 'The memory tools over the Model Context Protocol' },
    { name: 'operations', description: 'Probes for load balancers and orchestrators, without a token' },
  ],
};

// --- POST /mcp -------------------------------------------------------------------------------
// Served by src/mcp/server.ts (a plain Hono route: the SDK's transport reads the request), and
// described here so the document has every route a client calls.

const JsonRpcIdSchema = z.union([z.string(), z.number().int()]).openapi({ description: 'Chosen by the client; the response echoes it' });

const JsonRpcMessageSchema = z
  .object({
    jsonrpc: z.literal('2.0'),
    id: JsonRpcIdSchema.optional().openapi({ description: 'Absent in a notification, which is answered 202 without a body' }),
    method: z.string().openapi({ example: 'tools/call', description: '`initialize`, `tools/list`, `tools/call`, `ping`, or a notification' }),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .openapi('JsonRpcRequest', {
    example: {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'memory_retrieve', arguments: { query: 'deploy window' } },
    },
  });

const JsonRpcResponseSchema = z
  .object({
    jsonrpc: z.literal('2.0'),
    id: JsonRpcIdSchema.nullable(),
    result: z.record(z.string(), z.unknown()).optional().openapi({ description: "The method's result; a tool's answer is in `content` (with `isError` when it refused)" }),
    error: z
      .object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() })
      .optional()
      .openapi({ description: 'A JSON-RPC error: -32700 parse error, -32600 invalid request, -32601 unknown method, -32602 invalid params, -32000 transport' }),
  })
  .openapi('JsonRpcResponse');

const jsonRpc = (description: string) => json(JsonRpcResponseSchema, description);
const refusedMethod = {
  405: {
    ...json(ErrorSchema, 'This MCP server is stateless: no SSE stream, no session to end; use POST'),
    headers: { Allow: { description: 'POST', schema: { type: 'string' as const } } },
  },
};

/**
 * Describes `POST /mcp` (and the GET and DELETE an MCP client may try, which answer 405) in the
 * app's document. `path` is src/mcp/server.ts's, handed in by src/app.ts: http/ imports nothing of mcp/.
 */
export function describeMcp(registry: OpenAPIHono['openAPIRegistry'], path: string): void {
  registry.registerPath({
    method: 'post',
    path,
    operationId: 'callMcp',
    tags: ['mcp'],
    security: bearerAuth,
    summary: 'MCP over streamable HTTP: the memory tools for an agent runtime',
    description: [
      'The Model Context Protocol (streamable HTTP transport, stateless): send one JSON-RPC message, or a batch, and get the answer as JSON in the response ' +
        '(never an SSE stream). No `Mcp-Session-Id` is issued; each request is authenticated by its own bearer token, the same as `/v1`.',
      '',
      'Send `Accept: application/json, text/event-stream` and `Content-Type: application/json`. Start with `initialize`, then `tools/list` and `tools/call`. Tools:',
      '- `kindgi_remember`: write a fact',
      '- `memory_retrieve`: find facts by keyword, by meaning or both',
      '- `kiwi_memory_report`: the coverage report, KiwiFS shape',
      '',
      'A tool that refuses (say, a permission) answers 200 with `isError` in its result. Tool calls count in the same rate limits as the `/v1` routes they stand for.',
    ].join('\n'),
    request: {
      body: {
        required: true,
        description: 'A JSON-RPC 2.0 message, or a batch of them',
        content: { 'application/json': { schema: z.union([JsonRpcMessageSchema, z.array(JsonRpcMessageSchema).min(1)]) } },
      },
    },
    responses: {
      200: jsonRpc('The JSON-RPC response (an array for a batch)'),
      202: { description: 'Only notifications or responses were sent: accepted, nothing to answer' },
      400: jsonRpc('A JSON-RPC error: the body is not JSON or not JSON-RPC, or the protocol version is not supported'),
      401: {
        ...json(ErrorSchema, everyRouteMay[401]),
        headers: {
          'WWW-Authenticate': {
            description: '`Bearer realm="mnemo"`, with `error="invalid_token"` when a credential was sent but refused (RFC 6750 §3)',
            schema: { type: 'string' as const },
          },
        },
      },
      406: jsonRpc('`Accept` does not list both application/json and text/event-stream'),
      413: json(ErrorSchema, because.bodyOver1MiB),
      415: jsonRpc('`Content-Type` is not application/json'),
      429: { ...json(ErrorSchema, everyRouteMay[429]), headers: retryAfter('(the window of the limit that ran out)') },
      500: json(ErrorSchema, everyRouteMay[500]),
      503: { ...json(ErrorSchema, everyRouteMay[503]), headers: retryAfter('(when the database is the cause)') },
    },
  });
  for (const [method, operationId] of [
    ['get', 'openMcpStream'],
    ['delete', 'endMcpSession'],
  ] as const) {
    registry.registerPath({
      method,
      path,
      operationId,
      tags: ['mcp'],
      summary: method === 'get' ? 'No SSE stream: answers 405' : 'No session to end: answers 405',
      responses: refusedMethod,
    });
  }
}
