/**
 * A LangGraph graph whose long-term memory is Mnemo: thread 1 remembers a user's preference, a
 * second thread of the same user (a new conversation, no state of its own) recalls it. No language
 * model needed. Run: node --import tsx examples/langgraph/index.ts (README.md beside this file).
 */
import { Annotation, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { createClient } from 'mnemo/client';
import { MnemoStore } from 'mnemo/client/langgraph';

const baseUrl = process.env.MNEMO_URL ?? 'http://localhost:3000';
const token = process.env.MNEMO_TOKEN;
if (!token) {
  console.error('MNEMO_TOKEN is not set. Mint one: export MNEMO_TOKEN=$(npx mnemo token --tenant demo --sub you --role admin)');
  process.exit(1);
}

const client = createClient({ baseUrl, token });
// Every item of this store is a fact of type langgraph.item in this scope.
const store = new MnemoStore({ client, scope: { projectId: 'langgraph-example' } });

const State = Annotation.Root({
  userId: Annotation<string>,
  preference: Annotation<string | undefined>,
  recalled: Annotation<string | undefined>,
});

const graph = new StateGraph(State)
  .addNode('remember', async (state, config) => {
    if (state.preference) await config.store!.put(['users', state.userId], 'preference', { text: state.preference });
    return {};
  })
  .addNode('recall', async (state, config) => {
    const item = await config.store!.get(['users', state.userId], 'preference');
    return { recalled: item?.value.text as string | undefined };
  })
  .addEdge(START, 'remember')
  .addEdge('remember', 'recall')
  .addEdge('recall', END)
  .compile({ checkpointer: new MemorySaver(), store });

const preference = 'green tea, no sugar';
await graph.invoke({ userId: 'ada', preference }, { configurable: { thread_id: 'thread-1' } });
console.log(`thread-1 remembered for ada: ${preference}`);

const later = await graph.invoke({ userId: 'ada' }, { configurable: { thread_id: 'thread-2' } });
console.log(`thread-2 started without thread-1's state (preference in its state: ${later.preference ?? 'none'})`);

const [fact] = (await client.memory.facts.list({ type: store.type, projectId: 'langgraph-example', path: 'lg/users/ada/preference' })).data;
console.log(`in Mnemo: fact ${fact?.id}, version ${fact?.version} (each run's put is a new revision of the same fact)`);

if (later.recalled !== preference) {
  console.error(`expected to recall "${preference}", got ${JSON.stringify(later.recalled)}`);
  process.exit(1);
}
console.log(`recalled: ${later.recalled}`);
