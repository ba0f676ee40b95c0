/**
 * The Mnemo console (DESIGN §12; docs/guide/console.md): a page per task of the people who look
 * after a tenant's memory, over the public /v1 API with their own token. Routes live in the
 * fragment (`#/facts`, `#/facts/<id>`, …), so the server serves one page and no path leaks
 * anything to logs.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { type Claims, currentClaims, signIn, signOut, takeTokenFromFragment } from './api.ts';
import { ContextPage } from './pages/context.tsx';
import { EpisodesPage } from './pages/episodes.tsx';
import { ErasuresPage } from './pages/erasures.tsx';
import { FactPage } from './pages/fact.tsx';
import { FactsPage } from './pages/facts.tsx';
import { ReviewPage } from './pages/review.tsx';
import { StatusPage } from './pages/status.tsx';
import './style.css';

/** The pages, and whether only a tenant admin's token may use them (the API answers 403 otherwise). */
const PAGES = [
  { path: 'facts', label: 'Facts', adminOnly: false },
  { path: 'review', label: 'Review queue', adminOnly: false },
  { path: 'context', label: 'What an agent sees', adminOnly: false },
  { path: 'episodes', label: 'Episodes', adminOnly: false },
  { path: 'erasures', label: 'Erasures', adminOnly: true },
  { path: 'status', label: 'Status', adminOnly: true },
] as const;

function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

function SignIn({ onSignedIn }: { onSignedIn: (claims: Claims) => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  return (
    <main class="sign-in">
      <h1>Mnemo console</h1>
      <p>Paste a bearer token. It is kept in this tab only (sessionStorage) and sent only to this server.</p>
      <label for="token">Token</label>
      <textarea id="token" rows={4} value={token} onInput={(e) => setToken((e.target as HTMLTextAreaElement).value)} />
      {error && <p role="alert" class="error">{error}</p>}
      <button
        type="button"
        onClick={() => {
          try {
            onSignedIn(signIn(token));
          } catch (e) {
            setError((e as Error).message);
          }
        }}
      >
        Sign in
      </button>
    </main>
  );
}

function App() {
  const [claims, setClaims] = useState<Claims | null>(currentClaims);
  const route = useRoute();
  if (!claims) return <SignIn onSignedIn={setClaims} />;
  const [page = 'facts', id] = route;
  return (
    <>
      <header>
        <nav aria-label="Console">
          <strong>Mnemo</strong>
          {PAGES.filter((p) => !p.adminOnly || claims.role === 'admin').map((p) => (
            <a href={`#/${p.path}`} aria-current={page === p.path ? 'page' : undefined}>
              {p.label}
            </a>
          ))}
        </nav>
        <span class="who">
          {claims.sub} · {claims.role} · tenant {claims.tid}{' '}
          <button
            type="button"
            onClick={() => {
              signOut();
              setClaims(null);
            }}
          >
            Sign out
          </button>
        </span>
      </header>
      <main>
        {page === 'facts' && id ? (
          <FactPage id={id} claims={claims} />
        ) : page === 'review' ? (
          <ReviewPage claims={claims} />
        ) : page === 'context' ? (
          <ContextPage />
        ) : page === 'episodes' ? (
          <EpisodesPage />
        ) : page === 'erasures' ? (
          <ErasuresPage />
        ) : page === 'status' ? (
          <StatusPage />
        ) : (
          <FactsPage />
        )}
      </main>
    </>
  );
}

takeTokenFromFragment();
render(<App />, document.getElementById('app')!);
