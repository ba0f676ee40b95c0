/**
 * `MnemoStore`: a LangGraph.js store (`BaseStore` of `@langchain/langgraph-checkpoint`) whose items
 * are Mnemo facts, so a graph compiled with `store: new MnemoStore({ client })` keeps its long-term
 * memories in Mnemo: revisions, trust, tenant isolation under a token, retention and erasure
 * (docs/guide/langgraph.md, decision 0107).
 *
 * One item is one fact of the store's `type` in the store's exact `scope`:
 * - `path`: `lg/` + each namespace label percent-encoded + `/` + the key percent-encoded, so a `/`
 *   inside a label or key cannot make two items share a path;
 * - `content`: `{ namespace, key, value }` (+ `index` when the put gave one);
 * - a put of an existing key supersedes its fact (same id, the old value stays a revision), a
 *   delete (`value: null`) deletes it; `createdAt` is the fact's, `updatedAt` its revision's
 *   `recordedAt`.
 *
 * LangGraph is an optional peer dependency: it is loaded here, not imported statically, so that a
 * project without it gets one line saying what to install (./peer.ts).
 */
import type { Item, ListNamespacesOperation, MatchCondition, Operation, OperationResults, PutOperation, SearchItem, SearchOperation } from '@langchain/langgraph-checkpoint';
import { type Fact, FactChangedError, FactNotFoundError, type MnemoClient, type WriteFactInput } from '../index.ts';
import { importPeer } from './peer.ts';

const { BaseStore, validateNamespace } = await importPeer('langgraph', '@langchain/langgraph-checkpoint', () => import('@langchain/langgraph-checkpoint'));

/** Where the store's items live: Mnemo scope keys (DESIGN §4); `{}` is tenant-wide. */
export type MnemoStoreScope = Partial<Record<'orgId' | 'projectId' | 'userId' | 'participantId' | 'threadId' | 'sessionId', string>>;

export interface MnemoStoreOptions {
  client: MnemoClient;
  /** The scope every item is written in and read from, matched exactly. Default `{}` (tenant-wide). */
  scope?: MnemoStoreScope;
  /** The fact type of the items. Default `langgraph.item`. */
  type?: string;
  /** Retention of every item written (DESIGN §4), e.g. `{ keepDays: 30 }`. Default: the tenant's. */
  retention?: WriteFactInput['retention'];
}

/** What an item's fact holds. */
interface ItemContent {
  namespace: string[];
  key: string;
  value: Record<string, unknown>;
  /** The put's `index`, kept so that `index: false` keeps the item out of a query's ranking. */
  index?: false | string[];
}

const PATH_ROOT = 'lg';
/** The list route's largest page (DESIGN §4). */
const PAGE = 100;
/** Candidates a query asks Mnemo's retrieval for: its largest answer (DESIGN §5). */
const RANKED = 100;
/** A put that keeps meeting a concurrent change gives up after this many reads. */
const PUT_ATTEMPTS = 5;

const encode = (label: string) => encodeURIComponent(label);
/** The path of every item under a namespace (prefix), ending in `/`. */
const namespacePath = (namespace: readonly string[]) => [PATH_ROOT, ...namespace.map(encode)].join('/') + '/';
const itemPath = (namespace: readonly string[], key: string) => namespacePath(namespace) + encode(key);
/** LangGraph's own separator: labels cannot contain ':' (validateNamespace), so the join is unambiguous. */
const joined = (namespace: readonly string[]) => namespace.join(':');

interface StoredItem extends Item {
  factId: string;
  version: number;
  indexed: boolean;
}

export class MnemoStore extends BaseStore {
  readonly client: MnemoClient;
  readonly scope: MnemoStoreScope;
  readonly type: string;
  readonly retention: WriteFactInput['retention'];

  constructor(options: MnemoStoreOptions) {
    super();
    this.client = options.client;
    this.scope = { ...options.scope };
    this.type = options.type ?? 'langgraph.item';
    this.retention = options.retention;
  }

  /**
   * BaseStore's put, refusing PostgresStore's `{ ttl }`: an item that outlives the time it was
   * given would be a silent surprise. Mnemo keeps items by the store's `retention` (whole days).
   */
  override async put(namespace: string[], key: string, value: Record<string, any>, index?: false | string[], options?: { ttl?: number }): Promise<void> {
    if (options?.ttl !== undefined) throw new Error('MnemoStore does not support ttl: give the store a retention instead, new MnemoStore({ client, retention: { keepDays } })');
    return super.put(namespace, key, value, index);
  }

  /**
   * Runs the operations one after another, in order (as LangGraph's PostgresStore does): a get after
   * a put in the same batch sees the put.
   */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) {
      if ('namespace' in op) validateNamespace(op.namespace, { allowReservedRoot: true });
      if ('namespacePrefix' in op) results.push(await this.searchItems(op));
      else if ('value' in op) results.push(await this.putItem(op));
      else if ('key' in op) results.push(await this.getItem(op.namespace, op.key));
      else if ('matchConditions' in op || 'maxDepth' in op || 'limit' in op) results.push(await this.listNamespacesOf(op as ListNamespacesOperation));
      else throw new Error(`MnemoStore: unsupported operation ${JSON.stringify(op)}`);
    }
    return results as OperationResults<Op>;
  }

  private async getItem(namespace: string[], key: string): Promise<Item | null> {
    const [current] = await this.factsAt(namespace, key);
    return current ? publicItem(current) : null;
  }

  /**
   * Writes, supersedes or deletes the item's fact. Reading then writing races with another writer;
   * the supersede and delete carry `expectVersion`, and a 409 fact-changed (or a fact deleted
   * meanwhile) reads again. Two first writes of one key at once both create a fact: reads take the
   * newest, and the next put or delete of the key removes the others.
   */
  private async putItem(op: PutOperation): Promise<void> {
    const content: ItemContent | undefined =
      op.value === null ? undefined : { namespace: [...op.namespace], key: op.key, value: op.value, ...(op.index !== undefined && { index: op.index }) };
    let lastConflict: unknown;
    for (let attempt = 0; attempt < PUT_ATTEMPTS; attempt += 1) {
      const [current, ...duplicates] = await this.factsAt(op.namespace, op.key);
      try {
        for (const extra of duplicates) await this.deleteFact(extra);
        if (content === undefined) {
          if (current) await this.deleteFact(current);
        } else if (current) {
          await this.client.memory.facts.supersede(current.factId, { content, expectVersion: current.version, ...(this.retention && { retention: this.retention }) });
        } else {
          await this.client.memory.facts.write({
            type: this.type,
            scope: this.scope,
            path: itemPath(op.namespace, op.key),
            content,
            ...(this.retention && { retention: this.retention }),
          });
        }
        return;
      } catch (error) {
        if (!(error instanceof FactChangedError || error instanceof FactNotFoundError)) throw error;
        lastConflict = error;
      }
    }
    throw lastConflict;
  }

  private async deleteFact(item: StoredItem): Promise<void> {
    try {
      await this.client.memory.facts.delete(item.factId, { expectVersion: item.version });
    } catch (error) {
      // Deleted by someone else since we read it: what this delete wanted.
      if (!(error instanceof FactNotFoundError)) throw error;
    }
  }

  /**
   * Without a query: the items under the prefix that pass the filter, newest first (by createdAt,
   * as PostgresStore orders), then by path. With a query: the ones Mnemo's retrieval ranks (its
   * default mode, keyword + meaning), with their score, then the rest in that order with no score,
   * as InMemoryStore lists items it has no vector for after the scored ones. A query ranks, it never
   * hides an item.
   */
  private async searchItems(op: SearchOperation): Promise<SearchItem[]> {
    const offset = op.offset ?? 0;
    const limit = op.limit ?? 10;
    const prefix = op.namespacePrefix;
    const candidates = (await this.storedItems())
      .filter((item) => prefix.every((label, i) => item.namespace[i] === label))
      .filter((item) => matchesFilter(item.value, op.filter))
      .sort(newestFirst);
    let ordered: SearchItem[] = candidates.map((item) => ({ ...publicItem(item), score: undefined }));
    if (op.query) {
      const byId = new Map(candidates.map((item) => [item.factId, item]));
      const { results } = await this.client.memory.retrieve({ query: op.query, type: this.type, scope: this.scope, limit: RANKED });
      const ranked: SearchItem[] = [];
      const seen = new Set<string>();
      for (const { fact, score } of results) {
        const item = byId.get(fact.id);
        if (!item || !item.indexed || seen.has(item.factId)) continue;
        seen.add(item.factId);
        ranked.push({ ...publicItem(item), score: score ?? undefined });
      }
      ordered = [...ranked, ...candidates.filter((item) => !seen.has(item.factId)).map((item) => ({ ...publicItem(item), score: undefined }))];
    }
    return ordered.slice(offset, offset + limit);
  }

  /**
   * The namespaces that hold an item, filtered, cut to `maxDepth` (and then deduplicated), sorted as
   * InMemoryStore sorts them (their ':'-joined text, localeCompare) and paged.
   */
  private async listNamespacesOf(op: ListNamespacesOperation): Promise<string[][]> {
    const distinct = new Map<string, string[]>();
    for (const item of await this.storedItems()) distinct.set(joined(item.namespace), item.namespace);
    let namespaces = [...distinct.values()].filter((namespace) => (op.matchConditions ?? []).every((condition) => matches(condition, namespace)));
    if (op.maxDepth !== undefined) {
      const cut = new Map<string, string[]>();
      for (const namespace of namespaces) cut.set(joined(namespace.slice(0, op.maxDepth)), namespace.slice(0, op.maxDepth));
      namespaces = [...cut.values()];
    }
    namespaces.sort((a, b) => joined(a).localeCompare(joined(b)));
    const offset = op.offset ?? 0;
    return namespaces.slice(offset, offset + (op.limit ?? namespaces.length));
  }

  /** The facts holding one item, newest revision first (normally one). */
  private async factsAt(namespace: string[], key: string): Promise<StoredItem[]> {
    const path = itemPath(namespace, key);
    const found = await this.pages({ path });
    return found.filter((item) => item.key === key && joined(item.namespace) === joined(namespace)).sort(latestRevisionFirst);
  }

  /** Every item of the store: its type and exact scope, page by page. */
  private storedItems(): Promise<StoredItem[]> {
    return this.pages({});
  }

  private async pages(filters: { path?: string }): Promise<StoredItem[]> {
    const items: StoredItem[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.client.memory.facts.list({ type: this.type, ...this.scope, ...filters, limit: PAGE, cursor });
      for (const fact of page.data) {
        const item = this.itemOf(fact);
        if (item) items.push(item);
      }
      cursor = page.hasMore && page.nextCursor ? page.nextCursor : undefined;
    } while (cursor);
    return items;
  }

  /**
   * The item a fact holds, or undefined for a fact that is not one of this store's: another scope
   * (the list's scope keys match facts that set more keys), or content or a path that is not an
   * item's (written by hand under the store's type).
   */
  private itemOf(fact: Fact): StoredItem | undefined {
    const { tenantId: _tenant, ...scope } = fact.scope as Record<string, unknown>;
    if (!sameScope(scope, this.scope)) return undefined;
    const content = fact.content as Partial<ItemContent> | null;
    if (!content || typeof content !== 'object' || typeof content.key !== 'string' || !Array.isArray(content.namespace)) return undefined;
    if (!content.namespace.every((label) => typeof label === 'string')) return undefined;
    if (!content.value || typeof content.value !== 'object' || Array.isArray(content.value)) return undefined;
    if (fact.path !== itemPath(content.namespace, content.key)) return undefined;
    return {
      namespace: content.namespace,
      key: content.key,
      value: content.value,
      createdAt: new Date(fact.createdAt),
      updatedAt: new Date(fact.recordedAt),
      factId: fact.id,
      version: fact.version,
      indexed: content.index !== false,
    };
  }
}

function publicItem({ namespace, key, value, createdAt, updatedAt }: StoredItem): Item {
  return { namespace, key, value, createdAt, updatedAt };
}

function sameScope(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const keysA = Object.keys(a).filter((key) => a[key] != null);
  const keysB = Object.keys(b).filter((key) => b[key] != null);
  return keysA.length === keysB.length && keysA.every((key) => a[key] === b[key]);
}

const newestFirst = (a: StoredItem, b: StoredItem) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.factId < b.factId ? 1 : a.factId > b.factId ? -1 : 0);
const latestRevisionFirst = (a: StoredItem, b: StoredItem) => b.updatedAt.getTime() - a.updatedAt.getTime() || newestFirst(a, b);

/** LangGraph's namespace match: a prefix or suffix of labels, `*` matching any one label. */
function matches({ matchType, path }: MatchCondition, namespace: string[]): boolean {
  if (path.length > namespace.length) return false;
  const start = matchType === 'prefix' ? 0 : namespace.length - path.length;
  return path.every((label, i) => label === '*' || namespace[start + i] === label);
}

const OPERATORS = new Set(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin']);

/**
 * LangGraph's filter (InMemoryStore's compareValues): each top-level field equals the filter's
 * value (`===`), or passes its operators.
 */
function matchesFilter(value: Record<string, unknown>, filter: Record<string, unknown> | undefined): boolean {
  return Object.entries(filter ?? {}).every(([field, wanted]) => compare(value[field], wanted));
}

function compare(actual: unknown, wanted: unknown): boolean {
  if (typeof wanted !== 'object' || wanted === null || !Object.keys(wanted).every((key) => OPERATORS.has(key))) return actual === wanted;
  return Object.entries(wanted as Record<string, unknown>).every(([operator, operand]) => {
    switch (operator) {
      case '$eq':
        return actual === operand;
      case '$ne':
        return actual !== operand;
      case '$gt':
        return Number(actual) > Number(operand);
      case '$gte':
        return Number(actual) >= Number(operand);
      case '$lt':
        return Number(actual) < Number(operand);
      case '$lte':
        return Number(actual) <= Number(operand);
      case '$in':
        return Array.isArray(operand) && operand.includes(actual);
      default: // $nin
        return !Array.isArray(operand) || !operand.includes(actual);
    }
  });
}
