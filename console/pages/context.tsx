/** What an agent sees: the exact `<memory>` block and system line `POST /v1/memory/context` returns for a query, and the facts it came from. */
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorNote } from '../ui.tsx';

interface ContextAnswer {
  system: string;
  messages: { role: string; content: string }[];
  factIds: string[];
  journal: { mode: string; degraded?: string };
}

export function ContextPage() {
  const [form, setForm] = useState({ query: '', mode: 'both', types: '' });
  const [answer, setAnswer] = useState<ContextAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  return (
    <section aria-labelledby="context-title">
      <h1 id="context-title">What an agent sees</h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setError(null);
          const types = form.types.split(',').map((t) => t.trim()).filter(Boolean);
          api<ContextAnswer>('POST', '/v1/memory/context', { query: form.query, mode: form.mode, ...(types.length > 0 ? { types } : {}) })
            .then(setAnswer)
            .catch(setError);
        }}
      >
        <label>
          Query
          <input type="search" required value={form.query} onInput={(e) => setForm({ ...form, query: (e.target as HTMLInputElement).value })} />
        </label>
        <label>
          Mode
          <select value={form.mode} onChange={(e) => setForm({ ...form, mode: (e.target as HTMLSelectElement).value })}>
            {['both', 'keyword', 'semantic', 'list'].map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>
        </label>
        <label>
          Types (comma-separated)
          <input value={form.types} onInput={(e) => setForm({ ...form, types: (e.target as HTMLInputElement).value })} />
        </label>
        <button type="submit">Show</button>
      </form>
      <ErrorNote error={error} />
      {answer && (
        <>
          {answer.journal.degraded && <p class="held">Degraded: {answer.journal.degraded}</p>}
          <h2>System</h2>
          <pre class="prompt">{answer.system}</pre>
          <h2>Messages</h2>
          {answer.messages.map((m) => (
            <figure>
              <figcaption>{m.role}</figcaption>
              <pre class="prompt">{m.content}</pre>
            </figure>
          ))}
          <h2>From these facts</h2>
          {answer.factIds.length === 0 ? (
            <p>No fact.</p>
          ) : (
            <ul>
              {answer.factIds.map((id) => (
                <li>
                  <a href={`#/facts/${encodeURIComponent(id)}`}>{id}</a>
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}
