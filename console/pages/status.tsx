/**
 * Status (tenant admins): which search this deployment has — the line the server prints at start,
 * rebuilt from `GET /v1/memory/embeddings` — and each embedding model in use with its backlog.
 */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorNote } from '../ui.tsx';

interface EmbeddingStatus {
  configured: { model: string; endpoint: string } | null;
  models: { model: string; dims: number; state: 'backfilling' | 'active'; live: number; embedded: number; backlog: number }[];
}

export function StatusPage() {
  const [status, setStatus] = useState<EmbeddingStatus | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    api<EmbeddingStatus>('GET', '/v1/memory/embeddings').then(setStatus).catch(setError);
  }, []);
  return (
    <section aria-labelledby="status-title">
      <h1 id="status-title">Status</h1>
      <ErrorNote error={error} />
      {status && (
        <>
          <p class="search-line">
            {status.configured
              ? `Memory search: keyword and by meaning (${status.configured.model} at ${status.configured.endpoint})`
              : 'Memory search: keyword (KINDGI_MEMORY_EMBEDDINGS turns on search by meaning)'}
          </p>
          <h2>Embedding models</h2>
          {status.models.length === 0 ? (
            <p>No model has embedded anything yet.</p>
          ) : (
            <table class="facts">
              <thead>
                <tr>
                  <th scope="col">Model</th>
                  <th scope="col">Dimensions</th>
                  <th scope="col">State</th>
                  <th scope="col">Live facts</th>
                  <th scope="col">Embedded</th>
                  <th scope="col">Backlog</th>
                </tr>
              </thead>
              <tbody>
                {status.models.map((m) => (
                  <tr key={m.model}>
                    <td>{m.model}</td>
                    <td>{m.dims}</td>
                    <td>{m.state}</td>
                    <td>{m.live}</td>
                    <td>{m.embedded}</td>
                    <td>{m.backlog}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}
