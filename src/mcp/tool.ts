import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import type { Principal } from '../auth/permissions.ts';
import type { Db } from '../db/client.ts';
import { AppError } from '../foundation/app-error.ts';
import { databaseUnavailable } from '../db/errors.ts';
import { errorBody } from '../http/errors.ts';
import type { Logger } from '../foundation/log.ts';
import type { QueryEmbedder } from '../memory/retrieval/retrieve.ts';

/** What every tool call runs with: the caller (from the bearer token) and the services. */
export interface ToolContext {
  /** The primary: where writes go. */
  db: Db;
  /**
   * Runs a read where this caller's reads go: the replica once it has the caller's writes
   * (DATABASE_READ_URL, src/http/read-routing.ts), else the primary.
   */
  read: <T>(run: (db: Db) => Promise<T>) => Promise<T>;
  principal: Principal;
  logger: Logger;
  requestId: string;
  /** Search by meaning, when this runtime has embeddings. */
  embedder?: QueryEmbedder | undefined;
  /** After a remembered fact committed: its vector queued (once per call). */
  afterWrite: (tenantId: string) => Promise<void>;
}

/** One tool of the MCP server, its schemas built once: it registers itself on each request's server. */
export interface Tool {
  name: string;
  /** On a request's fresh server, its calls run as that request's caller. */
  register(server: McpServer, context: ToolContext): void;
}

/**
 * A tool for the servers of every request: made once (for the settings it depends on), never per
 * request, so each request's server shares its schemas. A zod schema built per request is kept
 * for good when it derives from one carrying OpenAPI metadata: zod-to-openapi's registry holds
 * whatever a `.refine`, `.optional`, `.min`, … of such a schema returns (issue 24: ~5 KB of every
 * MCP request). Objects, not shapes: of a shape the SDK makes an object on every registration.
 */
export function defineTool<Input extends z.ZodObject>(
  name: string,
  config: { title: string; description: string; inputSchema: Input; outputSchema: z.ZodObject; annotations: ToolAnnotations },
  call: (context: ToolContext, args: z.infer<Input>) => Promise<CallToolResult>,
): Tool {
  return {
    name,
    register(server, context) {
      // The SDK parsed `args` with `config.inputSchema`; its types cannot follow a schema that is a type parameter.
      server.registerTool<z.ZodObject, z.ZodObject>(name, config, (args) => runTool(context, name, () => call(context, args as z.infer<Input>)));
    },
  };
}

/**
 * Runs a tool's body and turns what it throws into a tool error result (`isError`), so the model
 * sees what went wrong and the HTTP exchange still succeeds. The text is the project's error
 * envelope; an unknown error is logged and answers `internal` without its message, as on /v1.
 * (Left to itself the SDK would put any error's message in the result.)
 */
export async function runTool(context: ToolContext, tool: string, body: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof AppError) return toolError(context, error);
    const unavailable = databaseUnavailable(error);
    if (unavailable) return toolError(context, unavailable);
    context.logger.error('unhandled error in MCP tool', { requestId: context.requestId, tool, error });
    return toolError(context, new AppError('internal', `Internal error; quote request id ${context.requestId}`));
  }
}

function toolError(context: ToolContext, error: AppError): CallToolResult {
  const body = errorBody(error.code, error.message, context.requestId, error.extra);
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
}
