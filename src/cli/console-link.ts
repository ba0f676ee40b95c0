/**
 * `mnemo token --console`: a link that signs the console in. The token rides in the URL's
 * fragment, which the browser never sends to a server or puts in a Referer; the console moves it
 * into the tab's sessionStorage and out of the address bar as it starts (console/api.ts).
 */
import { UsageError } from './args.ts';

/** The console's sign-in link for a token, on the API at `base` (its path kept, for an API behind a prefix). */
export function consoleLink(base: string, token: string): string {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new UsageError(`--console-url must be a URL such as http://localhost:3000, not ${JSON.stringify(base)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--console-url must be an http or https URL');
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}/console#token=${encodeURIComponent(token)}`;
}

