/**
 * Episodes: the coverage report (`GET /v1/memory/report`): how many episodes there are, how many
 * consolidations point at them, and the ones no consolidation has merged yet, each linked to its
 * fact; or the same report run in the background (`POST /v1/memory/reports`), watched until done.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api.ts';
import { pollUntil } from '../poll.ts';
import { ErrorNote } from '../ui.tsx';

interface EpisodicFile {
  path: string;
  episode_id?: string;
  memory_kind?: string;
  fact_id?: string;
}
interface Coverage {
  episodic_count: number;
  merged_from_refs: number;
  unmerged_count: number;
  unmerged: EpisodicFile[];
  warnings?: string[];
}
interface ReportStatus {
  id: string;
  status: 'pending' | 'running' | 'completed' | 'failed';
  progress: { done: number; total: number | null };
  result: Coverage | null;
  error: string | null;
}

export function EpisodesPage() {
  const [prefix, setPrefix] = useState('');
  const [report, setReport] = useState<Coverage | null>(null);
  const [job, setJob] = useState<ReportStatus | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [stop, setStop] = useState<(() => void) | null>(null);
  useEffect(() => () => stop?.(), [stop]);

  const load = () => {
    setError(null);
    api<Coverage>('GET', `/v1/memory/report${query({ episodesPrefix: prefix, limit: 100 })}`).then(setReport).catch(setError);
  };
  useEffect(load, []);

  const runInBackground = async () => {
    setError(null);
    try {
      const started = await api<{ id: string }>('POST', '/v1/memory/reports', { ...(prefix ? { episodesPrefix: prefix } : {}), limit: 100 });
      stop?.();
      setStop(() =>
        pollUntil(
          () => api<ReportStatus>('GET', `/v1/memory/reports/${encodeURIComponent(started.id)}`),
          (s) => s.status === 'completed' || s.status === 'failed',
          setJob,
          setError,
        ),
      );
    } catch (e) {
      setError(e);
    }
  };

  const shown = job?.result ?? report;
  return (
    <section aria-labelledby="episodes-title">
      <h1 id="episodes-title">Episodes</h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          load();
        }}
      >
        <label>
          Episodes prefix
          <input name="episodesPrefix" placeholder="episodes/" value={prefix} onInput={(e) => setPrefix((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">Report</button>
        <button type="button" onClick={() => void runInBackground()}>
          Run in the background
        </button>
      </form>
      <ErrorNote error={error} />
      {job && (
        <p role="status">
          Background report {job.status}
          {job.status === 'running' || job.status === 'pending' ? ` (${job.progress.done}${job.progress.total === null ? '' : ` of ${job.progress.total}`})` : ''}
          {job.error ? `: ${job.error}` : ''}
        </p>
      )}
      {shown && (
        <>
          <dl class="provenance">
            <dt>Episodes</dt>
            <dd class="count-episodes">{shown.episodic_count}</dd>
            <dt>Consolidation references</dt>
            <dd>{shown.merged_from_refs}</dd>
            <dt>Not yet consolidated</dt>
            <dd class="count-unmerged">{shown.unmerged_count}</dd>
          </dl>
          {shown.warnings?.map((w) => (
            <p class="held">{w}</p>
          ))}
          <h2>Not yet consolidated</h2>
          {shown.unmerged.length === 0 ? (
            <p>Every episode is consolidated.</p>
          ) : (
            <ul class="unmerged">
              {shown.unmerged.map((file) => (
                <li>
                  {file.fact_id ? <a href={`#/facts/${encodeURIComponent(file.fact_id)}`}>{file.episode_id ?? file.path}</a> : (file.episode_id ?? file.path)}
                  {file.path && file.episode_id ? <small> {file.path}</small> : null}
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}
