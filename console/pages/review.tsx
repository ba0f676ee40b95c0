/**
 * The review queue: the facts held for review (`review: "pending"`: an agent remembered text that
 * reads like an instruction), each released (verified) or deleted, one by one or selected
 * together. Plain checkboxes and buttons, so it works with the keyboard alone.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, type Claims, type Fact, query } from '../api.ts';
import { canVerify, ErrorNote, heldBecause, preview, when } from '../ui.tsx';

export function ReviewPage({ claims }: { claims: Claims }) {
  const [held, setHeld] = useState<Fact[] | null>(null);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [error, setError] = useState<unknown>(null);
  const [status, setStatus] = useState<string | null>(null);

  const load = async () => {
    try {
      const page = await api<{ data: Fact[] }>('GET', `/v1/memory/facts${query({ review: 'pending', limit: 100 })}`);
      setHeld(page.data);
      setSelected((before) => new Set([...before].filter((id) => page.data.some((f) => f.id === id))));
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    void load();
  }, []);

  const apply = async (action: 'release' | 'delete', facts: Fact[]) => {
    setError(null);
    let done = 0;
    for (const fact of facts) {
      const path = `/v1/memory/facts/${encodeURIComponent(fact.id)}`;
      try {
        if (action === 'release') await api('POST', `${path}/verify`, { expectVersion: fact.version });
        else await api('DELETE', `${path}${query({ expectVersion: fact.version })}`);
        done++;
      } catch (e) {
        setError(e);
        break;
      }
    }
    setStatus(`${action === 'release' ? 'Released' : 'Deleted'} ${done} of ${facts.length}.`);
    await load();
  };

  if (!held) return <ErrorNote error={error} />;
  const mayRelease = canVerify(claims.role);
  const chosen = held.filter((f) => selected.has(f.id));
  const toggle = (id: string) => setSelected((before) => {
    const next = new Set(before);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    return next;
  });

  return (
    <section aria-labelledby="review-title">
      <h1 id="review-title">Review queue</h1>
      <p>
        Facts held because an agent remembered text that reads like an instruction. No search returns them until a person other than the one who
        asserted them releases them.
      </p>
      {status && <p role="status">{status}</p>}
      <ErrorNote error={error} />
      {held.length === 0 ? (
        <p>Nothing is held for review.</p>
      ) : (
        <>
          <div class="actions">
            {mayRelease && (
              <button type="button" disabled={chosen.length === 0} onClick={() => void apply('release', chosen)}>
                Release selected ({chosen.length})
              </button>
            )}
            <button type="button" class="danger" disabled={chosen.length === 0} onClick={() => void apply('delete', chosen)}>
              Delete selected ({chosen.length})
            </button>
          </div>
          <ul class="queue">
            {held.map((fact) => (
              <li key={fact.id}>
                <input type="checkbox" id={`pick-${fact.id}`} checked={selected.has(fact.id)} onChange={() => toggle(fact.id)} />
                <label for={`pick-${fact.id}`}>
                  <span class="preview">{preview(fact.content, 300)}</span>
                  <small>
                    {fact.type} · remembered by {fact.assertedBy.kind}:{fact.assertedBy.id} · {when(fact.createdAt)} · <span class="reason">{heldBecause(fact.reviewReason)}</span>
                  </small>
                </label>
                <a href={`#/facts/${encodeURIComponent(fact.id)}`}>Open</a>
                {mayRelease && (
                  <button type="button" onClick={() => void apply('release', [fact])}>
                    Release
                  </button>
                )}
                <button type="button" class="danger" onClick={() => void apply('delete', [fact])}>
                  Delete
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
