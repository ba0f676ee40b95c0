/**
 * Facts: the list with every filter `GET /v1/memory/facts` takes and cursor paging, or a search
 * through `POST /v1/memory/retrieve` in any mode, with each result's score.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, type Fact, query } from '../api.ts';
import { ErrorNote, preview, when } from '../ui.tsx';

const SCOPE_KEYS = ['orgId', 'projectId', 'userId', 'participantId', 'threadId', 'sessionId'] as const;
type Filters = Record<'types' | 'trust' | 'memoryKind' | 'review' | 'validAt' | 'asOf' | (typeof SCOPE_KEYS)[number], string>;
const EMPTY: Filters = { types: '', trust: '', memoryKind: '', review: '', validAt: '', asOf: '', orgId: '', projectId: '', userId: '', participantId: '', threadId: '', sessionId: '' };

interface Row {
  fact: Fact;
  score: number | null;
}

const isoOrEmpty = (local: string) => (local ? new Date(local).toISOString() : '');
/** "a, b," → ["a", "b"]: the list route takes them comma-separated, retrieve as an array. */
const typesOf = (text: string) => text.split(',').map((t) => t.trim()).filter(Boolean);

export function FactsPage() {
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [search, setSearch] = useState({ text: '', mode: 'both' });
  const [rows, setRows] = useState<Row[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [searched, setSearched] = useState(false);

  const list = async (after: string | null) => {
    setError(null);
    try {
      const page = await api<{ data: Fact[]; hasMore: boolean; nextCursor: string | null }>(
        'GET',
        `/v1/memory/facts${query({ ...filters, types: typesOf(filters.types).join(','), validAt: isoOrEmpty(filters.validAt), asOf: isoOrEmpty(filters.asOf), limit: 100, cursor: after })}`,
      );
      setRows((before) => [...(after && before ? before : []), ...page.data.map((fact) => ({ fact, score: null }))]);
      setCursor(page.hasMore ? page.nextCursor : null);
      setSearched(false);
    } catch (e) {
      setError(e);
    }
  };

  const retrieve = async () => {
    setError(null);
    const scope = Object.fromEntries(SCOPE_KEYS.flatMap((key) => (filters[key] ? [[key, filters[key]]] : [])));
    const types = typesOf(filters.types);
    try {
      const answer = await api<{ results: Row[] }>('POST', '/v1/memory/retrieve', {
        query: search.text,
        mode: search.mode,
        limit: 100,
        ...(types.length > 0 ? { types } : {}),
        ...(Object.keys(scope).length > 0 ? { scope } : {}),
        ...(filters.trust ? { trust: filters.trust } : {}),
        ...(filters.memoryKind ? { memoryKind: filters.memoryKind } : {}),
        ...(filters.validAt ? { validAt: isoOrEmpty(filters.validAt) } : {}),
      });
      setRows(answer.results);
      setCursor(null);
      setSearched(true);
    } catch (e) {
      setError(e);
    }
  };

  useEffect(() => {
    void list(null);
  }, []);

  const field = (key: keyof Filters, label: string, type = 'text') => (
    <label>
      {label}
      <input type={type} name={key} value={filters[key]} onInput={(e) => setFilters({ ...filters, [key]: (e.target as HTMLInputElement).value })} />
    </label>
  );
  const choice = (key: keyof Filters, label: string, options: string[]) => (
    <label>
      {label}
      <select name={key} value={filters[key]} onChange={(e) => setFilters({ ...filters, [key]: (e.target as HTMLSelectElement).value })}>
        <option value="">any</option>
        {options.map((o) => (
          <option value={o}>{o}</option>
        ))}
      </select>
    </label>
  );

  return (
    <section aria-labelledby="facts-title">
      <h1 id="facts-title">Facts</h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          void (search.text.trim() ? retrieve() : list(null));
        }}
      >
        {field('types', 'Types (comma-separated)')}
        {SCOPE_KEYS.map((key) => field(key, key))}
        {choice('trust', 'Trust', ['asserted', 'unverified', 'verified'])}
        {choice('memoryKind', 'Memory kind', ['episodic', 'semantic', 'consolidation', 'working'])}
        {choice('review', 'Review', ['pending'])}
        {field('validAt', 'Valid at', 'datetime-local')}
        {field('asOf', 'As of', 'datetime-local')}
        <label>
          Search
          <input type="search" name="query" value={search.text} onInput={(e) => setSearch({ ...search, text: (e.target as HTMLInputElement).value })} />
        </label>
        <label>
          Mode
          <select name="mode" value={search.mode} onChange={(e) => setSearch({ ...search, mode: (e.target as HTMLSelectElement).value })}>
            {['both', 'keyword', 'semantic', 'list'].map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>
        </label>
        <button type="submit">{search.text.trim() ? 'Search' : 'List'}</button>
      </form>
      <ErrorNote error={error} />
      {rows && (
        <table class="facts">
          <caption>{searched ? `${rows.length} results` : `${rows.length} facts${cursor ? ' (more below)' : ''}`}</caption>
          <thead>
            <tr>
              <th scope="col">Type</th>
              <th scope="col">Content</th>
              <th scope="col">Trust</th>
              <th scope="col">Asserted by</th>
              <th scope="col">Created</th>
              {searched && <th scope="col">Score</th>}
            </tr>
          </thead>
          <tbody>
            {rows.map(({ fact, score }) => (
              <tr key={fact.id}>
                <td>
                  <a href={`#/facts/${encodeURIComponent(fact.id)}`}>{fact.type}</a>
                  {fact.review && <span class="badge">held</span>}
                </td>
                <td class="preview">{preview(fact.content)}</td>
                <td>{fact.trust}</td>
                <td>
                  {fact.assertedBy.kind}:{fact.assertedBy.id}
                </td>
                <td>{when(fact.createdAt)}</td>
                {searched && <td>{score === null ? '—' : score.toFixed(4)}</td>}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {cursor && (
        <button type="button" onClick={() => void list(cursor)}>
          More
        </button>
      )}
    </section>
  );
}
