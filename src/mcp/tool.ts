import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Principal } from '../auth/permissions.ts';
import type { Db } from '../db/client.ts';
import { AppError } from '../errors.ts';
import { databaseUnavailable } from '../db/errors.ts';
import { errorBody } from '../http/errors.ts';
import type { Logger } from '../log.ts';
import type { RememberSettings } from '../memory/remember-settings.ts';
import type { QueryEmbedder } from '../memory/retrieve.ts';

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
  remember: {
    settings: RememberSettings;
    /** After a remembered fact committed: its vector queued (once per call). */
    afterWrite: (tenantId: string) => Promise<void>;
  };
}

/** One tool of the MCP server: registers itself, with its schemas, on a fresh server. */
export type ToolRegistration = (server: McpServer, context: ToolContext) => void;

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
