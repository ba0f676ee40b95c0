/**
 * The OpenAI Agents SDK with Mnemo's /mcp as the agent's MCP server: the agent remembers a fact
 * with `kindgi_remember` and recalls it with `memory_retrieve`, tools the SDK lists from Mnemo.
 * Offline by default: the model is a scripted stand-in implementing the SDK's Model interface; the
 * SDK, its MCP client and Mnemo are real. Run: node --import tsx examples/openai-agents/index.ts.
 */
import { Agent, type AgentOutputItem, type Model, type ModelResponse, run, setTracingDisabled, Usage } from '@openai/agents';
import { mnemoMcpServer } from 'mnemo/client/openai-agents';

const baseUrl = process.env.MNEMO_URL ?? 'http://localhost:3000';
const token = process.env.MNEMO_TOKEN;
if (!token) {
  console.error('MNEMO_TOKEN is not set. Mint one: export MNEMO_TOKEN=$(npx mnemo token --tenant demo --sub you --role admin)');
  process.exit(1);
}
// Offline: no traces sent to OpenAI.
setTracingDisabled(true);

/** A stand-in for a real model (leave `model` out and set OPENAI_API_KEY for one): answers each turn from a script. */
class StandIn implements Model {
  private turn = 0;
  constructor(private readonly script: AgentOutputItem[][]) {}
  async getResponse(): Promise<ModelResponse> {
    return { usage: new Usage(), output: this.script[this.turn++] ?? [] };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('the stand-in does not stream');
  }
}
const call = (name: string, args: Record<string, unknown>): AgentOutputItem => ({ type: 'function_call', callId: `call-${name}`, name, arguments: JSON.stringify(args), status: 'completed' });

const fact = 'The team stand-up is at 9:30 on weekdays';
const server = mnemoMcpServer({ baseUrl, token });
await server.connect();
try {
  console.log(`Mnemo's MCP tools: ${(await server.listTools()).map((t) => t.name).join(', ')}`);
  const model = new StandIn([
    [call('kindgi_remember', { type: 'fact', text: fact })],
    [call('memory_retrieve', { query: 'when is the stand-up' })],
    [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'At 9:30 on weekdays.' }] }],
  ]);
  const agent = new Agent({ name: 'assistant', instructions: 'Remember what matters; recall before answering.', model, mcpServers: [server] });
  const result = await run(agent, 'Our stand-up is at 9:30 on weekdays. When is it?');
  const outputs = result.newItems.filter((item) => item.type === 'tool_call_output_item').map((item) => JSON.stringify(item.output));
  console.log(`remembered: ${fact}`);
  console.log(`agent answered: ${result.finalOutput}`);
  if (!outputs[1]?.includes(fact)) {
    console.error('expected memory_retrieve to return the fact');
    process.exit(1);
  }
  console.log(`recalled: ${fact}`);
} finally {
  await server.close();
}
