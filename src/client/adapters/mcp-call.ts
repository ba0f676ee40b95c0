/**
 * One of Mnemo's MCP tools called over HTTP (`POST /mcp`, JSON-RPC `tools/call`, stateless): what
 * the AI SDK and OpenAI Agents SDK tools run, so that an agent's memory written through a framework
 * behaves exactly as through MCP — the scope and trust the server gives an agent (`unverified`, in
 * the token's MCP scope), text that reads like an instruction held for review, the same type and
 * key replacing, recall as the `<memory>` block (DESIGN §7). One implementation, on the server.
 */
import type { MnemoConnection } from '../index.ts';

/** What a tool answered: its structured result and its text. */
export interface McpToolAnswer {
  structured: Record<string, unknown> | undefined;
  text: string;
}

let nextId = 1;

export async function callMnemoTool(connection: MnemoConnection, name: string, args: Record<string, unknown>): Promise<McpToolAnswer> {
  const token = typeof connection.token === 'function' ? await connection.token() : connection.token;
  const id = nextId++;
  const response = await (connection.fetch ?? fetch)(new URL('/mcp', connection.baseUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
  });
  const body = await response.text();
  if (!response.ok) throw new Error(`Mnemo ${name}: HTTP ${response.status}: ${errorMessage(body)}`);
  const message = parseAnswer(body, response.headers.get('content-type') ?? '', id);
  if (message.error) throw new Error(`Mnemo ${name}: ${message.error.message}`);
  const result = message.result ?? {};
  const text = (result.content ?? []).filter((part) => part.type === 'text').map((part) => part.text ?? '').join('\n');
  if (result.isError) throw new Error(`Mnemo ${name}: ${text}`);
  return { structured: result.structuredContent, text };
}

interface JsonRpcAnswer {
  id?: number;
  result?: { content?: { type: string; text?: string }[]; structuredContent?: Record<string, unknown>; isError?: boolean };
  error?: { message: string };
}

/** The JSON-RPC answer: the body itself, or the event of a server-sent stream that answers `id`. */
function parseAnswer(body: string, contentType: string, id: number): JsonRpcAnswer {
  if (!contentType.includes('text/event-stream')) return JSON.parse(body) as JsonRpcAnswer;
  for (const line of body.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const message = JSON.parse(line.slice('data:'.length)) as JsonRpcAnswer;
    if (message.id === id) return message;
  }
  throw new Error('Mnemo /mcp: the stream ended without an answer');
}

function errorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } };
    return parsed.error?.message ?? body.slice(0, 200);
  } catch {
    return body.slice(0, 200);
  }
}
