/**
 * `GET /docs`: the API reference, Swagger UI's, built in the browser from /openapi.json, with
 * "Try it out" sending real requests to this server ("Authorize" takes the bearer token once).
 *
 * Everything the page loads comes from this server: Swagger UI's bundle and stylesheet, read from
 * the installed swagger-ui-dist, so the page works where the browser has no internet (a laptop on
 * a train, a locked-down network), and its Content-Security-Policy keeps the page to this origin:
 * nothing is loaded from, or sent to, anywhere else. Swagger UI's one call out by default, the
 * validator badge sending the document to validator.swagger.io, is switched off.
 *
 * Swagger UI rather than Scalar: swagger-ui-dist is the two files the page uses, where Scalar's
 * standalone page came with ~300 packages (Vue and the rest) and 220 MB more node_modules.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import { Hono } from 'hono';
import type { AppEnv } from './app-env.ts';
import { htmlPage } from './html-page.ts';

export const DOCS_PATH = '/docs';

interface Asset {
  /** Where the page loads it from: the content's hash in the query, so a new version is never served from a stale cache. */
  src: string;
  contentType: string;
  body: Buffer;
  gzipped: Buffer;
}

const ASSET_FILES = {
  script: { file: 'swagger-ui-bundle.js', contentType: 'text/javascript; charset=utf-8' },
  style: { file: 'swagger-ui.css', contentType: 'text/css; charset=utf-8' },
} as const;

async function readAsset({ file, contentType }: (typeof ASSET_FILES)[keyof typeof ASSET_FILES]): Promise<Asset> {
  const body = await readFile(createRequire(import.meta.url).resolve(`swagger-ui-dist/${file}`));
  const version = createHash('sha256').update(body).digest('base64url').slice(0, 16);
  return { src: `${DOCS_PATH}/${file}?v=${version}`, contentType, body, gzipped: gzipSync(body) };
}

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

type Assets = { [name in keyof typeof ASSET_FILES]: Asset };

let assets: Promise<Assets> | undefined;

/** Read (and gzipped: ~1.9 MB → ~0.5 MB) on the first visit to /docs, then kept: most processes never serve it. */
function swaggerUi(): Promise<Assets> {
  assets ??= (async () => {
    const [script, style] = await Promise.all([readAsset(ASSET_FILES.script), readAsset(ASSET_FILES.style)]);
    return { script, style };
  })();
  return assets;
}

/** The page over `documentPath`, and the Content-Security-Policy that allows it and nothing else. */
function renderPage(documentPath: string, { script, style }: Assets) {
  const config = {
    url: documentPath,
    dom_id: '#swagger-ui',
    // On by default: the badge would have the browser send the document's URL to validator.swagger.io.
    validatorUrl: null,
    // The token pasted into "Authorize" survives a reload (kept in this origin's localStorage).
    persistAuthorization: true,
    displayOperationId: true,
    deepLinking: true,
  };
  // `<` escaped so nothing in the configuration can close the script element.
  const init = `window.ui = SwaggerUIBundle(${JSON.stringify(config).replace(/</g, '\\u003c')});`;
  const html = htmlPage({
    title: 'Mnemo API',
    head: [`<link rel="stylesheet" href="${style.src}">`],
    body: ['<div id="swagger-ui"></div>', `<script src="${script.src}"></script>`, `<script>${init}</script>`],
  });
  // The page's policy: its one inline script by its hash, the bundle and stylesheet from this
  // origin (Swagger UI sets styles through the DOM, which style-src does not govern), the
  // stylesheet's icons as data: URLs. `connect-src 'self'` holds the document's fetch and every
  // "Try it out" request to this server.
  const contentSecurityPolicy = [
    "default-src 'none'",
    `script-src 'self' ${sha256(init)}`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { html, contentSecurityPolicy };
}

/** `GET /docs` (the page) and the two files it loads; no token, like the document itself. */
export function docsRoutes(documentPath: string) {
  let page: ReturnType<typeof renderPage> | undefined;
  const routes = new Hono<AppEnv>().get(DOCS_PATH, async (c) => {
    const { html, contentSecurityPolicy } = (page ??= renderPage(documentPath, await swaggerUi()));
    return c.html(html, 200, {
      'Content-Security-Policy': contentSecurityPolicy,
      // Revalidated each visit: after an upgrade the page names the new files.
      'Cache-Control': 'no-cache',
    });
  });
  for (const name of ['script', 'style'] as const) {
    routes.get(`${DOCS_PATH}/${ASSET_FILES[name].file}`, async (c) => {
      const asset = (await swaggerUi())[name];
      const gzip = /\bgzip\b/.test(c.req.header('accept-encoding') ?? '');
      return c.body(new Uint8Array(gzip ? asset.gzipped : asset.body), 200, {
        'Content-Type': asset.contentType,
        'Cache-Control': 'public, max-age=31536000, immutable',
        'X-Content-Type-Options': 'nosniff',
        Vary: 'Accept-Encoding',
        ...(gzip ? { 'Content-Encoding': 'gzip' } : {}),
      });
    });
  }
  return routes;
}
