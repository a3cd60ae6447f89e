// Browser-test plumbing: the shared headless Chromium (or a private one when a test file runs on its
// own), a Vite dev server for the pages, and pages whose errors fail the test.
import { chromium, type Browser, type Page } from 'playwright-core';
import { ensureBuilt } from './build';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from './shared-browser.mjs';
import { startStaticServer } from './static-server';

export async function connectBrowser(): Promise<Browser> {
  const ws = process.env.TABFLEET_BROWSER_WS;
  if (ws) return chromium.connect(ws);
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS });
}

export interface OpenedPage {
  page: Page;
  /** Uncaught page errors so far (a test asserts this is empty). */
  errors: string[];
  close(): Promise<void>;
}

export async function openPage(browser: Browser, url: string, opts: { log?: (line: string) => void } = {}): Promise<OpenedPage> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.stack ?? e.message));
  page.on('console', (m) => opts.log?.(`[page ${m.type()}] ${m.text()}`));
  await page.goto(url);
  return { page, errors, close: () => context.close() };
}

/** Starts everything a browser test needs and tears it down in one call. */
export async function browserSession(): Promise<{ browser: Browser; baseUrl: string; close(): Promise<void> }> {
  await ensureBuilt(console.log);
  const [browser, web] = await Promise.all([connectBrowser(), startStaticServer()]);
  return {
    browser,
    baseUrl: web.url,
    async close() {
      await new Promise((r) => web.server.close(r));
      await browser.close();
    },
  };
}
