/**
 * A fact: its content and provenance, the revision timeline with a diff between any two
 * versions and the fact as of a chosen time, and what a person may do to it — verify, supersede
 * (the JSON edited, `expectVersion` sent so a concurrent edit answers 409), legal hold, delete.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, type Claims, type Fact, query } from '../api.ts';
import { diffLines } from '../diff.ts';
import { canVerify, ErrorNote, heldBecause, when } from '../ui.tsx';

const pretty = (value: unknown) => JSON.stringify(value, null, 2);
const refs = (list: { type: string; id: string }[]) => (list.length === 0 ? '—' : list.map((r) => `${r.type}:${r.id}`).join(', '));

export function FactPage({ id, claims }: { id: string; claims: Claims }) {
  const [fact, setFact] = useState<Fact | null>(null);
  const [revisions, setRevisions] = useState<Fact[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [notFound, setNotFound] = useState(false);
  const [done, setDone] = useState<string | null>(null);
  const [compare, setCompare] = useState<{ from: number; to: number } | null>(null);
  const [picked, setPicked] = useState<{ from: number; to: number } | null>(null);
  const [asOf, setAsOf] = useState('');
  const [asOfFact, setAsOfFact] = useState<Fact | null | undefined>(undefined);
  const [editing, setEditing] = useState<string | null>(null);
  const [editError, setEditError] = useState<string | null>(null);
  const path = `/v1/memory/facts/${encodeURIComponent(id)}`;

  const load = async () => {
    try {
      const [current, history] = await Promise.all([api<Fact>('GET', path), api<{ data: Fact[] }>('GET', `${path}/revisions`)]);
      setFact(current);
      setRevisions(history.data);
      setNotFound(false);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) setNotFound(true);
      else setError(e);
    }
  };
  useEffect(() => {
    void load();
  }, [id]);

  if (notFound) {
    return (
      <section>
        <h1>Fact not found</h1>
        <p>There is no fact {id} that your token may read.</p>
        <a href="#/facts">Back to the facts</a>
      </section>
    );
  }
  if (!fact) return <ErrorNote error={error} />;

  const act = async (label: string, run: () => Promise<unknown>) => {
    setError(null);
    setDone(null);
    try {
      await run();
      setDone(label);
      await load();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) setNotFound(true);
      else setError(e);
    }
  };
  const expect = { expectVersion: fact.version };
  // The two versions to compare: as picked, else the oldest against the current one.
  const range = picked ?? { from: revisions[revisions.length - 1]?.version ?? fact.version, to: fact.version };
  const mayVerify = canVerify(claims.role) && fact.trust !== 'verified';

  return (
    <section aria-labelledby="fact-title">
      <h1 id="fact-title">
        {fact.type} <small>v{fact.version}</small>
      </h1>
      {fact.review && (
        <p class="held">
          Held for review: an agent remembered text that reads like an instruction ({heldBecause(fact.reviewReason)}). No search returns it until a
          person verifies it.
        </p>
      )}
      {done && <p role="status">{done}.</p>}
      <ErrorNote error={error} />
      <h2>Content</h2>
      <pre class="json">{pretty(fact.content)}</pre>
      <h2>Provenance</h2>
      <dl class="provenance">
        <dt>Id</dt>
        <dd>{fact.id}</dd>
        <dt>Scope</dt>
        <dd>{pretty(fact.scope)}</dd>
        <dt>Trust</dt>
        <dd>{fact.trust}</dd>
        <dt>Asserted by</dt>
        <dd>
          {fact.assertedBy.kind}:{fact.assertedBy.id}
        </dd>
        <dt>Verified by</dt>
        <dd>{fact.verifiedBy ? `${fact.verifiedBy.kind}:${fact.verifiedBy.id} at ${when(fact.verifiedAt)}` : '—'}</dd>
        <dt>Derived from</dt>
        <dd>{refs(fact.derivedFrom)}</dd>
        <dt>Merged from</dt>
        <dd>{refs(fact.mergedFrom)}</dd>
        <dt>Subjects</dt>
        <dd>{fact.subjects.length === 0 ? '—' : fact.subjects.map((s) => `${s.kind}:${s.id}`).join(', ')}</dd>
        <dt>Valid</dt>
        <dd>
          {when(fact.validFrom)} – {when(fact.validUntil)}
        </dd>
        <dt>Observed</dt>
        <dd>{when(fact.observedAt)}</dd>
        <dt>Retention</dt>
        <dd>
          {fact.retention.legalHold ? 'legal hold; ' : ''}
          {fact.expiresAt ? `expires ${when(fact.expiresAt)}` : 'kept'}
        </dd>
      </dl>

      <h2>Actions</h2>
      <div class="actions">
        {mayVerify && (
          <button type="button" onClick={() => void act('Verified', () => api('POST', `${path}/verify`, expect))}>
            Verify
          </button>
        )}
        <button type="button" onClick={() => setEditing(pretty(fact.content))}>
          Supersede…
        </button>
        <button
          type="button"
          onClick={() =>
            void act(fact.retention.legalHold ? 'Legal hold lifted' : 'Legal hold set', () =>
              api('POST', `${path}/supersede`, { content: fact.content, retention: { ...retentionOf(fact), legalHold: !fact.retention.legalHold }, ...expect }),
            )
          }
        >
          {fact.retention.legalHold ? 'Lift legal hold' : 'Set legal hold'}
        </button>
        <button type="button" class="danger" onClick={() => void act('Deleted', () => api('DELETE', `${path}${query(expect)}`))}>
          Delete
        </button>
      </div>
      {editing !== null && (
        <form
          class="supersede"
          onSubmit={(e) => {
            e.preventDefault();
            let content: unknown;
            try {
              content = JSON.parse(editing);
            } catch (parseError) {
              setEditError(`Not JSON: ${(parseError as Error).message}`);
              return;
            }
            setEditError(null);
            void act('Superseded', async () => {
              try {
                await api('POST', `${path}/supersede`, { content, ...expect });
                setEditing(null);
              } catch (e) {
                if (e instanceof ApiError && (e.status === 400 || e.status === 409)) {
                  setEditError(e.status === 409 ? `Someone changed this fact since you opened it (now version ${String(e.body.currentVersion ?? '?')}). Reload it before editing.` : e.message);
                  return;
                }
                throw e;
              }
            });
          }}
        >
          <label for="supersede-content">New content (JSON)</label>
          <textarea id="supersede-content" rows={10} value={editing} aria-describedby="supersede-error" onInput={(e) => setEditing((e.target as HTMLTextAreaElement).value)} />
          <p id="supersede-error" role="alert" class="error">
            {editError ?? ''}
          </p>
          <button type="submit">Save as version {fact.version + 1}</button>
          <button type="button" onClick={() => setEditing(null)}>
            Cancel
          </button>
        </form>
      )}

      <h2>Revisions</h2>
      <ol class="timeline">
        {revisions.map((r) => (
          <li key={r.version}>
            <strong>v{r.version}</strong> {when(r.recordedAt)} · {r.trust}
            {r.invalidationReason ? ` · ${r.invalidationReason}` : ''}
          </li>
        ))}
      </ol>
      {revisions.length > 1 && (
        <form
          class="actions"
          onSubmit={(e) => {
            e.preventDefault();
            setCompare(range);
          }}
        >
          {(['from', 'to'] as const).map((end) => (
            <label>
              {end === 'from' ? 'Compare version' : 'with version'}
              <select name={`compare-${end}`} value={String(range[end])} onChange={(e) => setPicked({ ...range, [end]: Number((e.target as HTMLSelectElement).value) })}>
                {revisions.map((r) => (
                  <option value={String(r.version)}>v{r.version}</option>
                ))}
              </select>
            </label>
          ))}
          <button type="submit">Compare</button>
        </form>
      )}
      {compare && <Diff revisions={revisions} versions={[compare.from, compare.to]} />}

      <h2>As of</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!asOf) return;
          api<Fact>('GET', `${path}${query({ asOf: new Date(asOf).toISOString() })}`)
            .then(setAsOfFact)
            .catch((e: unknown) => (e instanceof ApiError && e.status === 404 ? setAsOfFact(null) : setError(e)));
        }}
      >
        <label>
          Time
          <input type="datetime-local" step="1" value={asOf} onInput={(e) => setAsOf((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">Show</button>
      </form>
      {asOfFact === null && <p>The fact did not exist then.</p>}
      {asOfFact && (
        <div class="as-of">
          <p>
            Version {asOfFact.version}, recorded {when(asOfFact.recordedAt)}:
          </p>
          <pre class="json">{pretty(asOfFact.content)}</pre>
        </div>
      )}
    </section>
  );
}

const retentionOf = (fact: Fact) => (fact.retention.keepUntil ? { keepUntil: fact.retention.keepUntil } : fact.retention.keepDays ? { keepDays: fact.retention.keepDays } : {});

function Diff({ revisions, versions: [from, to] }: { revisions: Fact[]; versions: [number, number] }) {
  const a = revisions.find((r) => r.version === from);
  const b = revisions.find((r) => r.version === to);
  if (!a || !b) return null;
  const view = (r: Fact) => pretty({ content: r.content, trust: r.trust, retention: r.retention, subjects: r.subjects, validFrom: r.validFrom, validUntil: r.validUntil });
  return (
    <figure class="diff">
      <figcaption>
        v{from} → v{to}
      </figcaption>
      <pre>
        {diffLines(view(a), view(b)).map((line) => (
          <span class={line.kind}>
            {line.kind === 'added' ? '+ ' : line.kind === 'removed' ? '- ' : '  '}
            {line.text}
            {'\n'}
          </span>
        ))}
      </pre>
    </figure>
  );
}
