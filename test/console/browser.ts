/**
 * A real browser for the console's tests: Debian's `chromium` (installed by .ci/run when missing;
 * CHROMIUM_PATH overrides), driven by playwright-core, which downloads no browser. Each page
 * records what a test must see nothing of: CSP violations, requests to another origin, script
 * errors and dialogs (an injected `alert` would open one).
 */
import { existsSync } from 'node:fs';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = () => existsSync(CHROMIUM);

export function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

export interface Watched {
  page: Page;
  context: BrowserContext;
  cspViolations: string[];
  otherOrigins: string[];
  pageErrors: string[];
  dialogs: string[];
}

export async function watchedPage(browser: Browser, origin: string): Promise<Watched> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const watched: Watched = { page, context, cspViolations: [], otherOrigins: [], pageErrors: [], dialogs: [] };
  await page.exposeFunction('__mnemoCspViolation', (text: string) => watched.cspViolations.push(text));
  // A string: this file is type-checked without the DOM's types.
  await page.addInitScript(`document.addEventListener('securitypolicyviolation', (e) => window.__mnemoCspViolation(e.violatedDirective + ' ' + e.blockedURI));`);
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(origin) && !url.startsWith('data:')) watched.otherOrigins.push(url);
  });
  page.on('pageerror', (error) => watched.pageErrors.push(error.message));
  page.on('dialog', (dialog) => {
    watched.dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  return watched;
}

/** Signs in by pasting the token, as a person does. */
export async function signIn(page: Page, origin: string, token: string): Promise<void> {
  await page.goto(`${origin}/console`);
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Facts', level: 1 }).waitFor();
}
