/**
 * Erasures (tenant admins): request one — a fact, a person (participant or external id) or a
 * conversation — after typing its id again to confirm; watch it run; when a legal hold stops it,
 * the facts that block it are linked, and it can be resumed once they are released.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api.ts';
import { pollUntil } from '../poll.ts';
import { ErrorNote, when } from '../ui.tsx';

interface Erasure {
  id: string;
  status: 'pending' | 'running' | 'completed' | 'failed';
  target: { kind: 'fact'; factId: string } | { kind: 'subject'; subjectKind: string } | { kind: 'conversation' };
  requestedBy: string;
  factsErased: number;
  revisionsErased: number;
  embeddingsDeleted: number;
  error: { code: string; factIds?: string[] } | null;
  createdAt: string;
  finishedAt: string | null;
}

const KINDS = { fact: 'A fact (its id)', participant: 'A participant (their id)', external: 'An external person (their id)', conversation: 'A conversation (its thread id)' } as const;
type Kind = keyof typeof KINDS;

const selector = (kind: Kind, id: string) =>
  kind === 'fact' ? { factId: id } : kind === 'conversation' ? { conversationId: id } : { subject: { kind, id } };

const finished = (e: Erasure) => e.status === 'completed' || e.status === 'failed';

export function ErasuresPage() {
  const [kind, setKind] = useState<Kind>('participant');
  const [id, setId] = useState('');
  const [confirm, setConfirm] = useState('');
  const [current, setCurrent] = useState<Erasure | null>(null);
  const [history, setHistory] = useState<Erasure[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [stop, setStop] = useState<(() => void) | null>(null);
  useEffect(() => () => stop?.(), [stop]);

  const loadHistory = () => api<{ data: Erasure[] }>('GET', `/v1/memory/erasures${query({ limit: 20 })}`).then((page) => setHistory(page.data)).catch(setError);
  useEffect(() => {
    void loadHistory();
  }, []);

  const watch = (erasureId: string) => {
    stop?.();
    setStop(() =>
      pollUntil(
        () => api<Erasure>('GET', `/v1/memory/erasures/${encodeURIComponent(erasureId)}`),
        finished,
        (e) => {
          setCurrent(e);
          if (finished(e)) void loadHistory();
        },
        setError,
      ),
    );
  };

  const request = async () => {
    setError(null);
    try {
      const started = await api<{ id: string }>('POST', '/v1/memory/erasures', selector(kind, id.trim()));
      setConfirm('');
      watch(started.id);
    } catch (e) {
      setError(e);
    }
  };
  const resume = async (erasure: Erasure) => {
    setError(null);
    try {
      await api('POST', `/v1/memory/erasures/${encodeURIComponent(erasure.id)}/resume`, {});
      watch(erasure.id);
    } catch (e) {
      setError(e);
    }
  };

  const confirmed = id.trim() !== '' && confirm.trim() === id.trim();
  return (
    <section aria-labelledby="erasures-title">
      <h1 id="erasures-title">Erasures</h1>
      <p>An erasure removes the content and embeddings of every matching fact and revision, for good. Ids, versions and times stay.</p>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          if (confirmed) void request();
        }}
      >
        <label>
          What to erase
          <select name="kind" value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value as Kind)}>
            {Object.entries(KINDS).map(([value, label]) => (
              <option value={value}>{label}</option>
            ))}
          </select>
        </label>
        <label>
          Id
          <input name="id" value={id} onInput={(e) => setId((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          Type the id again to confirm
          <input name="confirm" value={confirm} onInput={(e) => setConfirm((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit" class="danger" disabled={!confirmed}>
          Erase
        </button>
      </form>
      <ErrorNote error={error} />
      {current && <ErasureView erasure={current} onResume={resume} />}
      <h2>Recent erasures</h2>
      {history.length === 0 ? (
        <p>None yet.</p>
      ) : (
        <table class="facts">
          <thead>
            <tr>
              <th scope="col">Requested</th>
              <th scope="col">Target</th>
              <th scope="col">Status</th>
              <th scope="col">Facts erased</th>
              <th scope="col">Action</th>
            </tr>
          </thead>
          <tbody>
            {history.map((e) => (
              <tr key={e.id}>
                <td>{when(e.createdAt)}</td>
                <td>{e.target.kind === 'subject' ? `a ${e.target.subjectKind}` : e.target.kind}</td>
                <td>{e.status}{e.error ? ` (${e.error.code})` : ''}</td>
                <td>{e.factsErased}</td>
                <td>
                  {e.status === 'failed' && (
                    <button type="button" onClick={() => void resume(e)}>
                      Resume
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function ErasureView({ erasure, onResume }: { erasure: Erasure; onResume: (e: Erasure) => void }) {
  return (
    <div class="erasure" role="status">
      <p>
        Erasure {erasure.status}: {erasure.factsErased} facts, {erasure.revisionsErased} revisions and {erasure.embeddingsDeleted} embeddings erased.
      </p>
      {erasure.error?.code === 'legal-hold' && (
        <div class="held">
          <p>Stopped: these facts are under legal hold. Lift the hold on each, then resume.</p>
          <ul>
            {(erasure.error.factIds ?? []).map((factId) => (
              <li>
                <a href={`#/facts/${encodeURIComponent(factId)}`}>{factId}</a>
              </li>
            ))}
          </ul>
          <button type="button" onClick={() => onResume(erasure)}>
            Resume
          </button>
        </div>
      )}
      {erasure.error && erasure.error.code !== 'legal-hold' && <p class="error">Failed: {erasure.error.code}</p>}
    </div>
  );
}
