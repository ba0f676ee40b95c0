/**
 * `GET /console` (DESIGN §12): the browser app for the people who look after a tenant's memory,
 * served by the API itself, embedded mode included.
 *
 * - **Built from the project's sources when first asked for**, in memory: esbuild bundles
 *   `console/main.tsx` (Preact) and its stylesheet in about a tenth of a second, once per
 *   process. Nothing is built on install and no build output is shipped, so `npm start`, the
 *   Docker image and a clone all serve the same sources with no extra step
 *   (docs/decisions/0109-console.md).
 * - **Nothing from elsewhere**: the page loads its one script and one stylesheet from this
 *   origin, and its Content-Security-Policy forbids everything else — no inline script or style,
 *   no other origin for anything, no frames, no forms posted anywhere.
 * - **No token here**: the page and its files are public, like /docs. Everything the app shows
 *   comes from the public `/v1` routes, called by the browser with the signed-in user's bearer
 *   token, so it can never do more than that token may.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { type Context, Hono } from 'hono';
import type { AppEnv } from './app-env.ts';
import { htmlPage } from './html-page.ts';

export const CONSOLE_PATH = '/console';

const ENTRY = fileURLToPath(new URL('../../console/main.tsx', import.meta.url));

interface Asset {
  /** Where the page loads it from: the content's hash in the name, so a new build is never served from a stale cache. */
  path: string;
  contentType: string;
  body: Uint8Array;
  gzipped: Uint8Array;
}

export interface ConsoleBuild {
  script: Asset;
  style: Asset;
  html: string;
}

const asset = (name: string, extension: string, contentType: string, body: Uint8Array): Asset => {
  const version = createHash('sha256').update(body).digest('base64url').slice(0, 12);
  return { path: `${CONSOLE_PATH}/${name}.${version}.${extension}`, contentType, body, gzipped: gzipSync(body, { level: 9 }) };
};

/** The bundle, its stylesheet and the page that loads them. */
export async function buildConsole(): Promise<ConsoleBuild> {
  const result = await build({
    entryPoints: [ENTRY],
    bundle: true,
    write: false,
    outdir: 'out',
    format: 'esm',
    target: 'es2022',
    minify: true,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'none',
    logLevel: 'silent',
  });
  const js = result.outputFiles.find((f) => f.path.endsWith('.js'));
  const css = result.outputFiles.find((f) => f.path.endsWith('.css'));
  if (!js || !css) throw new Error('console build: the bundle or its stylesheet is missing');
  const script = asset('app', 'js', 'text/javascript; charset=utf-8', js.contents);
  const style = asset('app', 'css', 'text/css; charset=utf-8', css.contents);
  const html = htmlPage({
    title: 'Mnemo console',
    head: [`<link rel="stylesheet" href="${style.path}">`, `<script type="module" src="${script.path}"></script>`],
    body: ['<noscript>The Mnemo console needs JavaScript.</noscript>', '<div id="app"></div>'],
  });
  return { script, style, html };
}

/**
 * The page's policy: its script and stylesheet from this origin and nothing inline, the API on
 * this origin, images only as data: URLs (none is used; a fact's content is text, never markup).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

let built: Promise<ConsoleBuild> | undefined;
/** Built on the first visit, then kept: most processes never serve it. A failed build is tried again next time. */
function consoleBuild(): Promise<ConsoleBuild> {
  built ??= buildConsole().catch((error: unknown) => {
    built = undefined;
    throw error;
  });
  return built;
}

const SECURITY_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
} as const;

/** `GET /console` (the page) and the two files it loads. */
export function consoleRoutes() {
  const routes = new Hono<AppEnv>();
  const page = async (c: Context<AppEnv>) => {
    const { html } = await consoleBuild();
    return c.html(html, 200, {
      ...SECURITY_HEADERS,
      'Content-Security-Policy': CONSOLE_CSP,
      // Revalidated each visit: after an upgrade the page names the new files.
      'Cache-Control': 'no-cache',
    });
  };
  routes.get(CONSOLE_PATH, page);
  routes.get(`${CONSOLE_PATH}/`, page);
  routes.get(`${CONSOLE_PATH}/:file{app\\.[A-Za-z0-9_-]+\\.(js|css)}`, async (c) => {
    const { script, style } = await consoleBuild();
    const found = [script, style].find((a) => a.path === c.req.path);
    if (!found) return c.notFound();
    const gzip = /\bgzip\b/.test(c.req.header('accept-encoding') ?? '');
    return c.body(new Uint8Array(gzip ? found.gzipped : found.body), 200, {
      ...SECURITY_HEADERS,
      'Content-Type': found.contentType,
      'Cache-Control': 'public, max-age=31536000, immutable',
      Vary: 'Accept-Encoding',
      ...(gzip ? { 'Content-Encoding': 'gzip' } : {}),
    });
  });
  return routes;
}
