/**
 * The AI SDK with Mnemo's tools: one `generateText` call remembers a preference, a second (a new
 * conversation) recalls it. Offline by default: the model is a scripted stand-in (the AI SDK's own
 * test model) that calls the tools as a real model would; the tools and Mnemo are real. Run:
 * node --import tsx examples/ai-sdk/index.ts (README.md beside this file).
 */
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { mnemoTools } from 'mnemo/client/ai-sdk';

const baseUrl = process.env.MNEMO_URL ?? 'http://localhost:3000';
const token = process.env.MNEMO_TOKEN;
if (!token) {
  console.error('MNEMO_TOKEN is not set. Mint one: export MNEMO_TOKEN=$(npx mnemo token --tenant demo --sub you --role admin)');
  process.exit(1);
}
const tools = mnemoTools({ baseUrl, token });

/** A stand-in for a real model (e.g. openai('gpt-5') from @ai-sdk/openai): it calls one tool, then answers. */
function standIn(toolName: string, input: Record<string, unknown>, answer: string) {
  const usage = { inputTokens: { total: 0, noCache: 0, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 0, text: 0, reasoning: undefined } };
  return new MockLanguageModelV4({
    doGenerate: [
      { content: [{ type: 'tool-call', toolCallId: 'call-1', toolName, input: JSON.stringify(input) }], finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] },
      { content: [{ type: 'text', text: answer }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] },
    ],
  });
}

const preference = 'Prefers short answers with an example';
const first = await generateText({
  model: standIn('remember', { text: preference, type: 'preference', key: 'answer-style' }, 'Noted.'),
  tools,
  stopWhen: stepCountIs(3),
  prompt: 'Keep your answers short, with an example.',
});
const remembered = first.steps.flatMap((step) => step.toolResults)[0]?.output as { factId: string; version: number } | undefined;
console.log(`remembered: ${preference} (fact ${remembered?.factId}, version ${remembered?.version})`);

const second = await generateText({
  model: standIn('recall', { query: 'how does the user like answers' }, 'Short, with an example.'),
  tools,
  stopWhen: stepCountIs(3),
  prompt: 'How should you answer me?',
});
const block = String(second.steps.flatMap((step) => step.toolResults)[0]?.output ?? '');
console.log(`the model was given: ${block.slice(0, 120)}…`);
if (!block.includes(preference)) {
  console.error('expected the <memory> block to hold the preference');
  process.exit(1);
}
console.log(`recalled: ${preference}`);
