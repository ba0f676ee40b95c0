/**
 * `GET /console` as a client sees it (DESIGN §12): the page and its two files with no token, a
 * Content-Security-Policy that allows this origin's script and stylesheet and nothing else, no
 * inline script, files named by their content and cached for good, and the bundle within its
 * budget (≤ 150 KB of JavaScript gzipped). The pages themselves are tested in a real browser
 * (npm run test:console).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConsole, CONSOLE_CSP } from '../../src/http/console.ts';
import { startTestApi, type TestApi } from '../helpers/api.ts';

const BUDGET_GZIPPED = 150 * 1024;

describe('GET /console', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi();
  });
  afterAll(() => api.close());

  it('serves the page with no token, under a CSP that allows only this origin, and no inline script', async () => {
    for (const path of ['/console', '/console/']) {
      const page = await fetch(`${api.baseUrl}${path}`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toContain('text/html');
      expect(page.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      expect(page.headers.get('x-content-type-options')).toBe('nosniff');
      const html = await page.text();
      const scripts = [...html.matchAll(/<script\b[^>]*>/g)].map((m) => m[0]);
      expect(scripts).toHaveLength(1);
      expect(scripts[0]).toMatch(/src="\/console\/app\.[\w-]+\.js"/);
      expect(html).not.toMatch(/<script\b[^>]*>[^<]+<\/script>/);
      expect(html).not.toMatch(/https?:\/\//);
    }
    expect(CONSOLE_CSP).toContain("default-src 'none'");
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
  });

  it('serves its script and stylesheet by content hash, gzipped when asked, cached for good; any other name is 404', async () => {
    const html = await (await fetch(`${api.baseUrl}/console`)).text();
    const files = [...html.matchAll(/(?:src|href)="(\/console\/app\.[\w-]+\.(?:js|css))"/g)].map((m) => m[1]!);
    expect(files).toHaveLength(2);
    for (const file of files) {
      const gzipped = await fetch(`${api.baseUrl}${file}`, { headers: { 'accept-encoding': 'gzip' } });
      expect(gzipped.status).toBe(200);
      expect(gzipped.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(gzipped.headers.get('content-type')).toMatch(file.endsWith('.js') ? /^text\/javascript/ : /^text\/css/);
      expect((await gzipped.arrayBuffer()).byteLength).toBeGreaterThan(0);
    }
    for (const wrong of ['/console/app.0000000000.js', '/console/app.js', '/console/other.css']) {
      expect((await fetch(`${api.baseUrl}${wrong}`)).status, wrong).toBe(404);
    }
  });

  it('keeps the bundle within 150 KB of JavaScript, gzipped', async () => {
    const { script } = await buildConsole();
    console.log(`console bundle: ${script.body.byteLength} bytes, ${script.gzipped.byteLength} gzipped`);
    expect(script.gzipped.byteLength).toBeLessThanOrEqual(BUDGET_GZIPPED);
  });
});
