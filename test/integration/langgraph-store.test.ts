/**
 * MnemoStore (src/client/adapters/langgraph.ts) against LangGraph's own InMemoryStore: one seeded
 * random sequence of puts, overwrites, deletes, gets, searches and namespace listings runs on both,
 * and every answer must agree — values, keys, namespaces, and the order where LangGraph defines one
 * (listNamespaces: sorted). Then a LangGraph graph whose nodes remember through the store given to
 * them, across two threads, on the real API.
 */
import { Annotation, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { InMemoryStore, type Item, type SearchItem } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type MnemoClient } from '../../src/client/index.ts';
import { MnemoStore } from '../../src/client/adapters/langgraph.ts';
import { startTestApi, type TestApi } from '../helpers/api.ts';

/** mulberry32: a small seeded generator, so a failure replays with the same sequence. */
function seeded(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n: number) => Math.floor(next() * n), pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]! };
}

const SEED = 20261207;
const OPERATIONS = 520;
/** Nested 1–3 deep, with labels that a naive '/' join would confuse (['docs', 'a/b'] and ['docs', 'a', 'b']) and that need encoding. */
const NAMESPACES: string[][] = [
  ['users'],
  ['users', 'u1'],
  ['users', 'u1', 'prefs'],
  ['users', 'u2', 'prefs'],
  ['docs', 'a/b'],
  ['docs', 'a', 'b'],
  ['50%', 'x y'],
  ['prefs'],
];
const KEYS = ['k1', 'k2', 'k/3', 'ключ'];
const COLORS = ['red', 'green', 'blue'];
const WORDS = ['tea', 'coffee', 'cycling', 'chess'];
const PREFIXES: string[][] = [[], ['users'], ['users', 'u1'], ['docs'], ['docs', 'a'], ['50%'], ['prefs'], ['nothing']];
const MATCH_PATHS: string[][] = [['users'], ['*', 'u1'], ['prefs'], ['docs', '*'], ['*'], ['b'], ['users', '*', 'prefs']];
const FILTERS: (Record<string, unknown> | undefined)[] = [undefined, undefined, { color: 'red' }, { n: { $gte: 2 } }, { color: { $in: ['green', 'blue'] }, n: { $lt: 4 } }, { color: { $ne: 'red' } }];

const identity = (item: Item) => `${item.namespace.join(':')}|${item.key}`;
const view = (item: Item) => ({ namespace: item.namespace, key: item.key, value: item.value });
const sortedViews = (items: Item[]) => items.map(view).sort((a, b) => identity(a as Item).localeCompare(identity(b as Item)));

/**
 * InMemoryStore keeps a namespace listed after its last item is deleted, and a delete of a key it
 * never held creates the namespace (putOperation makes the map before it looks at the value).
 * PostgresStore and MnemoStore list the namespaces that hold items; the reference is made to list
 * those too by dropping its empty maps after each put. Its own code answers everything else.
 */
function pruneEmptyNamespaces(store: InMemoryStore) {
  const data = (store as unknown as { data: Map<string, Map<string, unknown>> }).data;
  for (const [namespace, items] of data) if (items.size === 0) data.delete(namespace);
}

describe('MnemoStore, a LangGraph store on Mnemo', () => {
  let api: TestApi;
  let client: MnemoClient;
  let tenantId: string;

  beforeAll(async () => {
    // The worker runs erasures (in-process jobs, or BullMQ when the run has a Redis).
    api = await startTestApi({ worker: true });
    const tenant = await api.newTenant('langgraph');
    tenantId = tenant.tenantId;
    client = createClient({ baseUrl: api.baseUrl, token: tenant.admin });
  });
  afterAll(() => api?.close());

  it(`answers ${OPERATIONS} random operations as LangGraph's InMemoryStore does`, async () => {
    const random = seeded(SEED);
    const reference = new InMemoryStore();
    const store = new MnemoStore({ client, scope: { userId: 'lg-diff' } });
    const counts: Record<string, number> = {};
    const count = (what: string) => void (counts[what] = (counts[what] ?? 0) + 1);
    const live = new Set<string>();
    const unindexed = new Set<string>();

    for (let step = 0; step < OPERATIONS; step += 1) {
      const roll = random.next();
      const at = `step ${step} (seed ${SEED})`;
      if (roll < 0.34) {
        const namespace = random.pick(NAMESPACES);
        const key = random.pick(KEYS);
        const value = { n: random.int(6), color: random.pick(COLORS), text: `likes ${random.pick(WORDS)}`, step };
        const index = random.next() < 0.15 ? false : undefined;
        const id = `${namespace.join(':')}|${key}`;
        count(live.has(id) ? 'overwrite' : 'put');
        live.add(id);
        if (index === false) unindexed.add(id);
        else unindexed.delete(id);
        await reference.put(namespace, key, value, index);
        await store.put(namespace, key, value, index);
      } else if (roll < 0.46) {
        const namespace = random.pick(NAMESPACES);
        const key = random.pick(KEYS);
        const id = `${namespace.join(':')}|${key}`;
        count(live.has(id) ? 'delete' : 'delete (absent)');
        live.delete(id);
        await reference.delete(namespace, key);
        await store.delete(namespace, key);
        pruneEmptyNamespaces(reference);
      } else if (roll < 0.62) {
        const namespace = random.pick(NAMESPACES);
        const key = random.pick(KEYS);
        const expected = await reference.get(namespace, key);
        const actual = await store.get(namespace, key);
        count(expected ? 'get (hit)' : 'get (miss)');
        expect(actual && view(actual), at).toEqual(expected && view(expected));
        if (actual) expect(actual.updatedAt.getTime(), at).toBeGreaterThanOrEqual(actual.createdAt.getTime());
      } else if (roll < 0.84) {
        const prefix = random.pick(PREFIXES);
        const filter = random.pick(FILTERS);
        const limit = random.pick([1, 2, 3, 5, 10]);
        const offset = random.pick([0, 0, 1, 2, 4]);
        const query = random.next() < 0.2 ? random.pick(WORDS) : undefined;
        count(query ? 'search (query)' : 'search');
        const expectedAll = await reference.search(prefix, { filter, limit: 1000 });
        const expectedPage = await reference.search(prefix, { filter, limit, offset });
        const actualAll = await store.search(prefix, { filter, limit: 1000 });
        const actualPage = await store.search(prefix, { filter, limit, offset, query });
        // LangGraph defines no order for a search without a query (InMemoryStore: insertion order;
        // PostgresStore: created_at desc), so the whole answer compares as a set…
        expect(sortedViews(actualAll), at).toEqual(sortedViews(expectedAll));
        // …the page has InMemoryStore's size, and is the slice of MnemoStore's own order, newest first.
        expect(actualPage.length, at).toBe(expectedPage.length);
        for (let i = 1; i < actualAll.length; i += 1) expect(actualAll[i - 1]!.createdAt.getTime(), at).toBeGreaterThanOrEqual(actualAll[i]!.createdAt.getTime());
        if (!query) {
          expect(actualPage.map(view), at).toEqual(actualAll.slice(offset, offset + limit).map(view));
          expect(actualPage.every((item) => item.score === undefined), at).toBe(true);
        } else {
          // A query ranks, never hides: the page holds items of the answer, once each, scored ones first.
          const all = new Set(actualAll.map(identity));
          expect(actualPage.every((item) => all.has(identity(item))), at).toBe(true);
          expect(new Set(actualPage.map(identity)).size, at).toBe(actualPage.length);
          const firstUnscored = actualPage.findIndex((item) => item.score === undefined);
          if (firstUnscored >= 0) expect(actualPage.slice(firstUnscored).every((item) => item.score === undefined), at).toBe(true);
          if (offset === 0) checkRanking(actualAll, actualPage, query, unindexed, at);
        }
      } else {
        const conditions: { prefix?: string[]; suffix?: string[] } = {};
        if (random.next() < 0.5) conditions.prefix = random.pick(MATCH_PATHS);
        if (random.next() < 0.35) conditions.suffix = random.pick(MATCH_PATHS);
        const maxDepth = random.next() < 0.4 ? random.pick([1, 2, 3]) : undefined;
        const limit = random.pick([2, 5, 100]);
        const offset = random.pick([0, 0, 1, 3]);
        count('listNamespaces');
        const options = { ...conditions, maxDepth, limit, offset };
        // LangGraph orders namespaces (sorted by their joined labels): compared in order.
        expect(await store.listNamespaces(options), `${at} ${JSON.stringify(options)}`).toEqual(await reference.listNamespaces(options));
      }
    }

    const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
    console.log(`langgraph differential: ${total} operations`, counts);
    expect(total).toBe(OPERATIONS);
    // The sequence really exercised what it claims to.
    for (const what of ['put', 'overwrite', 'delete', 'get (hit)', 'get (miss)', 'search', 'search (query)', 'listNamespaces']) expect(counts[what], what).toBeGreaterThan(10);

    // The end state, whole: every item and every namespace.
    expect(sortedViews(await store.search([], { limit: 1000 }))).toEqual(sortedViews(await reference.search([], { limit: 1000 })));
    expect(await store.listNamespaces()).toEqual(await reference.listNamespaces());

    // Others see none of it: another tenant under its own token, and this tenant's store of another scope.
    const stranger = new MnemoStore({ client: createClient({ baseUrl: api.baseUrl, token: (await api.newTenant('langgraph-other')).admin }), scope: { userId: 'lg-diff' } });
    const tenantWide = new MnemoStore({ client });
    for (const other of [stranger, tenantWide]) {
      expect(await other.search([], { limit: 1000 })).toEqual([]);
      expect(await other.listNamespaces()).toEqual([]);
      for (const namespace of NAMESPACES) for (const key of KEYS) expect(await other.get(namespace, key)).toBeNull();
    }
  });

  /**
   * Mnemo's keyword search matches the query's word: the first page ranks (with a score) exactly the
   * items whose text holds it, as many as fit, except those put with `index: false`.
   */
  function checkRanking(all: SearchItem[], page: SearchItem[], word: string, unindexed: Set<string>, at: string) {
    const scored = page.filter((item) => item.score !== undefined);
    for (const item of scored) expect(item.value.text, at).toContain(word);
    const rankable = all.filter((item) => (item.value.text as string).includes(word) && !unindexed.has(identity(item)));
    expect(scored.length, at).toBe(Math.min(page.length, rankable.length));
  }

  it('keeps each overwrite as a revision of one fact, and concurrent puts of a key each apply once', async () => {
    const store = new MnemoStore({ client, scope: { userId: 'lg-revisions' } });
    await store.put(['users', 'ada'], 'prefs', { drink: 'tea' });
    const first = (await store.get(['users', 'ada'], 'prefs'))!;
    await store.put(['users', 'ada'], 'prefs', { drink: 'coffee' });
    const second = (await store.get(['users', 'ada'], 'prefs'))!;
    expect(second.value).toEqual({ drink: 'coffee' });
    expect(second.createdAt).toEqual(first.createdAt);
    expect(second.updatedAt.getTime()).toBeGreaterThan(first.updatedAt.getTime());

    const facts = (await client.memory.facts.list({ type: 'langgraph.item', userId: 'lg-revisions' })).data;
    expect(facts).toHaveLength(1);
    expect(facts[0]!.path).toBe('lg/users/ada/prefs');
    expect(facts[0]!.content).toEqual({ namespace: ['users', 'ada'], key: 'prefs', value: { drink: 'coffee' } });
    const revisions = (await client.memory.facts.revisions(facts[0]!.id)).data;
    expect(revisions.map((revision) => (revision.content as { value: unknown }).value)).toEqual([{ drink: 'coffee' }, { drink: 'tea' }]);

    // Five writers at once: each supersede names the version it read, a 409 reads again.
    await Promise.all([1, 2, 3, 4, 5].map((n) => new MnemoStore({ client, scope: { userId: 'lg-revisions' } }).put(['users', 'ada'], 'prefs', { drink: `cup ${n}` })));
    const after = await client.memory.facts.list({ type: 'langgraph.item', userId: 'lg-revisions' });
    expect(after.data).toHaveLength(1);
    expect(after.data[0]!.version).toBe(7);
    expect((await store.get(['users', 'ada'], 'prefs'))!.value.drink).toMatch(/^cup [1-5]$/);

    await store.delete(['users', 'ada'], 'prefs');
    expect(await store.get(['users', 'ada'], 'prefs')).toBeNull();
    expect((await client.memory.facts.list({ type: 'langgraph.item', userId: 'lg-revisions' })).data).toEqual([]);
  });

  it('refuses a ttl, and erasing the person of its scope removes every memory the store kept of them', async () => {
    const store = new MnemoStore({ client, scope: { projectId: 'lg-erasure', participantId: 'lg-erased' } });
    await expect(store.put(['notes'], 'n1', { text: 'kept a day' }, undefined, { ttl: 60 })).rejects.toThrow(/does not support ttl/);
    await store.put(['notes'], 'n1', { text: 'lives in Lyon' });
    await store.put(['notes'], 'n1', { text: 'moved to Porto' });
    await store.put(['notes', 'health'], 'n2', { text: 'allergic to nuts' });
    const kept = new MnemoStore({ client, scope: { projectId: 'lg-erasure', participantId: 'lg-kept' } });
    await kept.put(['notes'], 'n1', { text: 'someone else' });
    const ids = (await client.memory.facts.list({ type: 'langgraph.item', participantId: 'lg-erased' })).data.map((fact) => fact.id);
    expect(ids).toHaveLength(2);

    const { id } = await client.memory.erasures.request({ kind: 'participant', id: 'lg-erased' });
    const deadline = Date.now() + 30_000;
    let status = await client.memory.erasures.get(id);
    while (status.status !== 'completed' && status.status !== 'failed' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = await client.memory.erasures.get(id);
    }
    expect(status.status).toBe('completed');
    expect(await store.search([], { limit: 100 })).toEqual([]);
    expect(await store.listNamespaces()).toEqual([]);
    expect(await store.get(['notes'], 'n1')).toBeNull();
    for (const factId of ids) await expect(client.memory.facts.revisions(factId)).rejects.toMatchObject({ status: 404 });
    expect((await kept.get(['notes'], 'n1'))?.value).toEqual({ text: 'someone else' });
  });

  it('serves a LangGraph graph: what thread 1 remembers, thread 2 of the same user recalls', async () => {
    const State = Annotation.Root({
      userId: Annotation<string>,
      said: Annotation<string | undefined>,
      recalled: Annotation<string[]>,
    });
    const graph = new StateGraph(State)
      .addNode('remember', async (state, config) => {
        if (state.said) await config.store!.put(['users', state.userId, 'preferences'], 'drink', { text: state.said });
        return {};
      })
      .addNode('recall', async (state, config) => {
        const items = await config.store!.search(['users', state.userId, 'preferences']);
        return { recalled: items.map((item) => item.value.text as string) };
      })
      .addEdge(START, 'remember')
      .addEdge('remember', 'recall')
      .addEdge('recall', END)
      .compile({ checkpointer: new MemorySaver(), store: new MnemoStore({ client, scope: { projectId: 'lg-graph' } }) });

    const first = await graph.invoke({ userId: 'ada', said: 'Ada drinks green tea' }, { configurable: { thread_id: 'thread-1' } });
    expect(first.recalled).toEqual(['Ada drinks green tea']);
    const second = await graph.invoke({ userId: 'ada' }, { configurable: { thread_id: 'thread-2' } });
    expect(second.said).toBeUndefined(); // thread 2's state is its own…
    expect(second.recalled).toEqual(['Ada drinks green tea']); // …the memory is the user's
    const otherUser = await graph.invoke({ userId: 'bob' }, { configurable: { thread_id: 'thread-3' } });
    expect(otherUser.recalled).toEqual([]);

    // It lives in Mnemo, not in the process: a fact of the tenant, found by keyword too.
    const found = await client.memory.retrieve({ query: 'green tea', mode: 'keyword', scope: { projectId: 'lg-graph' } });
    expect(found.results.map((result) => (result.fact.content as { value: unknown }).value)).toEqual([{ text: 'Ada drinks green tea' }]);
    expect(found.results[0]!.fact.scope).toEqual({ tenantId, projectId: 'lg-graph' });
  });
});
