/**
 * `GET /docs`: the API reference, Scalar's, built in the browser from /openapi.json, with "try it"
 * sending real requests to this server (the bearer scheme preselected: paste a token).
 *
 * Scalar's page loads its bundle from a public CDN unless told otherwise. This server serves the
 * bundle itself, from the installed @scalar/api-reference, so the page works where the browser
 * has no internet (a laptop on a train, a locked-down network), and its Content-Security-Policy
 * keeps the page to this origin: nothing is loaded from, or sent to, anywhere else.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import { Scalar } from '@scalar/hono-api-reference';
import { Hono, type MiddlewareHandler } from 'hono';
import type { AppEnv } from './app-env.ts';

export const DOCS_PATH = '/docs';
const BUNDLE_PATH = `${DOCS_PATH}/scalar.js`;

interface Bundle {
  /** Where the page loads it from: the content's hash in the query, so a new version is never served from a stale cache. */
  src: string;
  body: Buffer;
  gzipped: Buffer;
}

let bundle: Promise<Bundle> | undefined;

/** Read (and gzipped: ~3.5 MB → ~1 MB) on the first visit to /docs, then kept: most processes never serve it. */
function scalarBundle(): Promise<Bundle> {
  bundle ??= (async () => {
    const body = await readFile(createRequire(import.meta.url).resolve('@scalar/api-reference/browser/standalone.js'));
    const version = createHash('sha256').update(body).digest('base64url').slice(0, 16);
    return { src: `${BUNDLE_PATH}?v=${version}`, body, gzipped: gzipSync(body) };
  })();
  return bundle;
}

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/**
 * The page's policy, from the page itself: its one inline script (Scalar's configuration) by its
 * hash, the bundle from this origin. Styles may be inline: Scalar injects its own as it renders.
 * `connect-src 'self'` holds the document's fetch and every "try it" request to this server.
 */
const contentSecurityPolicy: MiddlewareHandler<AppEnv> = async (c, next) => {
  await next();
  if (!c.res.ok) return;
  const html = await c.res.clone().text();
  const inlineScripts = [...html.matchAll(/<script(?![^>]*\ssrc=)[^>]*>([\s\S]*?)<\/script>/g)].map(([, body]) => sha256(body!));
  c.res.headers.set(
    'Content-Security-Policy',
    [
      "default-src 'none'",
      `script-src 'self' ${inlineScripts.join(' ')}`,
      "style-src 'self' 'unsafe-inline'",
      "img-src 'self' data: blob:",
      "font-src 'self' data:",
      "connect-src 'self'",
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'",
    ].join('; '),
  );
};

/** `GET /docs` (the page) and the bundle it loads; no token, like the document itself. */
export function docsRoutes(documentPath: string) {
  return new Hono<AppEnv>()
    .get(
      DOCS_PATH,
      contentSecurityPolicy,
      Scalar<AppEnv>(async () => ({
        pageTitle: 'Mnemo API',
        url: documentPath,
        cdn: (await scalarBundle()).src,
        // The one scheme every route takes: "try it" asks for the token up front.
        authentication: { preferredSecurityScheme: 'bearer' },
        showOperationId: true,
        // Each of these would reach Scalar's own servers: fonts, usage reports, its AI agent, and
        // the toolbar's sharing and hosting (shown on localhost).
        showDeveloperTools: 'never',
        withDefaultFonts: false,
        telemetry: false,
        agent: { disabled: true },
      })),
    )
    .get(BUNDLE_PATH, async (c) => {
      const { body, gzipped } = await scalarBundle();
      const gzip = /\bgzip\b/.test(c.req.header('accept-encoding') ?? '');
      return c.body(new Uint8Array(gzip ? gzipped : body), 200, {
        'Content-Type': 'text/javascript; charset=utf-8',
        'Cache-Control': 'public, max-age=31536000, immutable',
        'X-Content-Type-Options': 'nosniff',
        Vary: 'Accept-Encoding',
        ...(gzip ? { 'Content-Encoding': 'gzip' } : {}),
      });
    });
}
