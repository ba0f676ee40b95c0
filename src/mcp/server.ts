/**
 * The MCP server (DESIGN §7): MCP over streamable HTTP at `POST /mcp`, authenticated by the same
 * bearer token as /v1, with the memory tools.
 *
 * Stateless on purpose: the API runs as any number of nodes behind a load balancer, and an MCP
 * session kept in one node's memory would break as soon as the balancer sent the session's next
 * request elsewhere. So no `Mcp-Session-Id` is issued, every POST gets a fresh server and
 * transport, and the caller is re-authenticated from its own token on every request. Answers
 * are plain JSON (no SSE stream): every tool answers in one response. For the same reason there
 * is no GET stream for server-initiated messages and no session to DELETE: both answer 405.
 *
 * Errors before the MCP exchange starts (token, method, body size) use the project's error
 * envelope; errors inside it (malformed JSON-RPC, Accept or Content-Type headers, unknown
 * protocol version) are the SDK transport's JSON-RPC error responses, which MCP clients expect.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { TokenVerifier } from '../auth/verify.ts';
import type { Db } from '../db/client.ts';
import { AppError } from '../foundation/app-error.ts';
import { authenticate, principalOf } from '../http/auth.ts';
import type { AppEnv } from '../http/app-env.ts';
import { errorBody, respondWithError } from '../http/errors.ts';
import { primaryReads, type ReadRouting } from '../http/read-routing.ts';
import { openApiInfo } from '../http/openapi.ts';
import type { Logger } from '../foundation/log.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import { DEFAULT_REMEMBER_SETTINGS, type RememberSettings } from '../foundation/remember-settings.ts';
import type { QueryEmbedder } from '../memory/retrieval/retrieve.ts';
import { kindgiRemember } from './kindgi-remember.ts';
import { kiwiMemoryReport } from './kiwi-memory-report.ts';
import { memoryRetrieve } from './memory-retrieve.ts';
import type { Tool, ToolContext } from './tool.ts';

export const MCP_PATH = '/mcp';

/**
 * Every tool the server offers, built once for the settings they depend on (the route's), never
 * per request. A new tool: one file exporting a `Tool` (or a function of the settings making one), one line here.
 */
export const mcpTools = (settings: RememberSettings): Tool[] => [kindgiRemember(settings), memoryRetrieve(settings), kiwiMemoryReport];

/**
 * What the SDK's server would build anew for each request, one Ajv instance with its
 * meta-schemas (2 ms of CPU): it validates answers to server-initiated elicitation, which a
 * stateless server never sends, so one serves every request.
 */
const jsonSchemaValidator = new AjvJsonSchemaValidator();

/** A server with `tools`, bound to one caller: built per request (see above). */
export function createMcpServer(tools: readonly Tool[], context: ToolContext): McpServer {
  const server = new McpServer({ name: 'mnemo', version: openApiInfo.info.version }, { capabilities: { tools: {} }, jsonSchemaValidator });
  for (const tool of tools) tool.register(server, context);
  return server;
}

export interface McpRouteDependencies {
  db: Db;
  /**
   * Where the tools' reads go (a replica, with read-your-writes); default the primary. A call is
   * a POST, so once it answers the caller's write position is remembered (rememberWrites): a
   * recall right after a remember, on any node, sees it.
   */
  reads?: ReadRouting | undefined;
  verifyToken: TokenVerifier;
  logger: Logger;
  /** The same bound as /v1 bodies. */
  maxBodyBytes: number;
  /** Counts tool calls in their class's rate limits (src/http/rate-limit.ts), once the caller is known. */
  rateLimit?: MiddlewareHandler<AppEnv> | undefined;
  /** Search by meaning for `memory_retrieve`, when this runtime has embeddings. */
  embedder?: QueryEmbedder | undefined;
  /** What `kindgi_remember` writes, and where (MNEMO_MCP_*); absent, the defaults. */
  remember?: RememberSettings | undefined;
  /** Queues a remembered fact's vector after its commit; absent, the reconciler does. */
  dispatch?: Dispatcher | undefined;
}

/** `POST /mcp`, and 405 for every other method. */
export function mcpRoutes({
  db,
  reads = primaryReads(db),
  verifyToken,
  logger,
  maxBodyBytes,
  rateLimit = (_c, next) => next(),
  embedder,
  remember: settings = DEFAULT_REMEMBER_SETTINGS,
  dispatch,
}: McpRouteDependencies) {
  const routes = new Hono<AppEnv>();
  const tools = mcpTools(settings);
  const afterWrite = async (tenantId: string) => dispatch?.embedding(tenantId);

  routes.post(
    MCP_PATH,
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: (c) => respondWithError(c, new AppError('payload-too-large', `Request body is larger than ${maxBodyBytes / 1024 / 1024} MiB`)),
    }),
    challengeOnUnauthenticated(),
    authenticate(verifyToken),
    rateLimit,
    async (c) => {
      const requestId = c.get('requestId');
      const principal = principalOf(c);
      const read = <T>(run: (readDb: Db) => Promise<T>) => reads.read(principal, run);
      const server = createMcpServer(tools, { db, read, principal, logger, requestId, embedder, afterWrite });
      server.server.onerror = (error) => logger.warn('MCP request refused', { requestId, error: error.message });
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
        maxRequestBodySize: maxBodyBytes,
      });
      try {
        await server.connect(transport);
        // JSON responses are complete once handleRequest resolves, so closing afterwards loses nothing.
        const response = await transport.handleRequest(c.req.raw);
        // Through the context, so the headers middleware set (X-Request-Id) are kept.
        return c.newResponse(response.body, response);
      } finally {
        await server.close();
      }
    },
  );

  routes.all(MCP_PATH, (c) => {
    c.header('Allow', 'POST');
    // The wire contract has no code of its own for a refused method; the status says it.
    return c.json(
      errorBody('bad-input', `${c.req.method} ${MCP_PATH} is not supported: this MCP server is stateless (no SSE stream, no sessions); use POST`, c.get('requestId')),
      405,
    );
  });

  return routes;
}

/**
 * A 401 from /mcp says how to authenticate (RFC 6750 §3, as the MCP authorization spec asks):
 * `Bearer realm="mnemo"`, with `error="invalid_token"` when a credential was sent but refused.
 */
function challengeOnUnauthenticated(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (c.res.status !== 401) return;
    const presented = c.req.header('authorization') !== undefined;
    c.res.headers.set('WWW-Authenticate', presented ? 'Bearer realm="mnemo", error="invalid_token"' : 'Bearer realm="mnemo"');
  };
}
