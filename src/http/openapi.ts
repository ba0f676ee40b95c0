import { z } from '@hono/zod-openapi';
import { errorCodes } from '../errors.ts';

export const ErrorSchema = z
  .object({
    error: z
      .object({
        code: z.enum(errorCodes),
        message: z.string(),
        requestId: z.string(),
        details: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
        currentVersion: z.number().int().optional(),
      })
      .catchall(z.unknown()),
  })
  .openapi('Error');

/** A JSON body or response of `schema`, for createRoute. */
export const json = <T extends z.ZodType>(schema: T, description: string) => ({
  content: { 'application/json': { schema } },
  description,
});

/** Every /v1 route takes the bearer token. */
export const bearerAuth = [{ bearer: [] }];

const error = (description: string) => json(ErrorSchema, description);

/** The error answers every /v1 route may give (DESIGN §7), spread into each route's responses. */
export const errorResponses = {
  400: error('bad-input: the request breaks a rule; `details` names each field'),
  401: error('unauthenticated: missing, malformed, expired or wrongly signed token'),
  403: error('permission-denied or scope-mismatch'),
  404: error('fact-not-found: no such fact, or not visible to you'),
  409: error('fact-changed (with currentVersion), legal-hold or idempotency-in-flight'),
  413: error('payload-too-large: body over 1 MiB'),
  422: error('idempotency-key-reused'),
  429: error('rate-limited: over the caller\'s or the tenant\'s limit for this kind of request; Retry-After says when to try again'),
  500: error('internal: logged with the request id'),
  503: error('unavailable: the database is restarting or unreachable, or a statement ran past its timeout; nothing was committed, retry after Retry-After'),
} as const;

export const openApiInfo = {
  openapi: '3.1.0',
  info: {
    title: 'Mnemo',
    version: '0.1.0',
    description: 'Multi-tenant memory for AI agents: facts with revisions, trust and retention.',
  },
};

/** A self-contained page (no CDN, no scripts from elsewhere) that lists the API from /openapi.json. */
export const docsPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mnemo API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h2{margin-top:2rem;border-bottom:1px solid #ddd}code,pre{font:13px ui-monospace,monospace}
pre{background:#f6f6f6;padding:.75rem;overflow:auto}.m{display:inline-block;min-width:4.5rem;font-weight:bold}
details{margin:.5rem 0}summary{cursor:pointer}
</style></head>
<body><h1>Mnemo API</h1><p>Machine-readable: <a href="/openapi.json">/openapi.json</a>. Every <code>/v1</code> route takes <code>Authorization: Bearer &lt;JWT&gt;</code>.</p>
<div id="routes">Loading…</div>
<script>
fetch('/openapi.json').then(r => r.json()).then(spec => {
  const esc = s => String(s).replace(/[&<>]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));
  const out = [];
  for (const [path, ops] of Object.entries(spec.paths)) for (const [method, op] of Object.entries(ops)) {
    out.push('<details><summary><span class="m">' + method.toUpperCase() + '</span> <code>' + esc(path) + '</code> — ' + esc(op.summary || '') + '</summary><pre>' + esc(JSON.stringify({parameters: op.parameters, requestBody: op.requestBody, responses: op.responses}, null, 2)) + '</pre></details>');
  }
  out.push('<h2>Schemas</h2><pre>' + esc(JSON.stringify(spec.components && spec.components.schemas, null, 2)) + '</pre>');
  document.getElementById('routes').innerHTML = out.join('');
});
</script></body></html>`;
