import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll } from 'vitest';
import { startTestApi, type TestApi } from './api.ts';

/** The official MCP SDK's client, connected to the API at `baseUrl` with this bearer token (close it after). */
export async function connectMcp(baseUrl: string, token: string): Promise<Client> {
  const client = new Client({ name: 'mnemo-test', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

/** MCP clients a test file connects as it goes and closes all at once in its `afterAll`. */
export function mcpClients() {
  const open: Client[] = [];
  return {
    async connect(baseUrl: string, token: string): Promise<Client> {
      const client = await connectMcp(baseUrl, token);
      open.push(client);
      return client;
    },
    async closeAll(): Promise<void> {
      await Promise.all(open.splice(0).map((client) => client.close()));
    },
  };
}

/**
 * The real app and the MCP clients of a test file, for its lifetime: the app started before its
 * tests; after them the clients closed, then the app. Call it in the file's top `describe`.
 */
export function mcpTestApi(options?: Parameters<typeof startTestApi>[0]) {
  const clients = mcpClients();
  let started: TestApi | undefined;
  beforeAll(async () => {
    started = await startTestApi(options);
  });
  afterAll(async () => {
    await clients.closeAll();
    await started?.close();
  });
  const api = (): TestApi => {
    if (!started) throw new Error('mcpTestApi: the app starts in beforeAll; use it inside a test');
    return started;
  };
  /** A client connected with this bearer token to the file's app, or to another app at `baseUrl`. */
  const connect = (token: string, baseUrl?: string): Promise<Client> => clients.connect(baseUrl ?? api().baseUrl, token);
  return { api, connect };
}
