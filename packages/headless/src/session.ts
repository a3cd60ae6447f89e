// Browser plumbing for tests and benchmarks: the shared headless Chromium (or a private one when a
// file runs on its own), the built pages on a static server, and pages whose errors are collected.
import { startStaticServer } from '@tabfleet/server/static';
import { chromium, type Browser, type Page } from 'playwright-core';
import { builtDir, ensureBuilt, FASHION_MNIST_DIR } from './build';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from './chromium.mjs';

/** The test runner's shared browser (TABFLEET_BROWSER_WS), else a new headless Chromium. */
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

/** `initScript` runs in the page before its own scripts (a test's fault or attacker injection). */
export async function openPage(browser: Browser, url: string, opts: { log?: (line: string) => void; initScript?: () => void } = {}): Promise<OpenedPage> {
  const context = await browser.newContext();
  if (opts.initScript) await context.addInitScript(opts.initScript);
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.stack ?? e.message));
  page.on('console', (m) => opts.log?.(`[page ${m.type()}] ${m.text()}`));
  await page.goto(url);
  return { page, errors, close: () => context.close() };
}

/**
 * A browser and the built test pages and apps (`/e2e/pages/…`, `/bench/pages/…`, `/apps/…`) on a
 * loopback static server, torn down in one call.
 */
export async function browserSession(): Promise<{ browser: Browser; baseUrl: string; close(): Promise<void> }> {
  await ensureBuilt('pages', console.log);
  await ensureBuilt('apps', console.log);
  const [browser, web] = await Promise.all([connectBrowser(), startStaticServer({ roots: [builtDir('pages'), builtDir('apps')], datasetsDir: FASHION_MNIST_DIR })]);
  return {
    browser,
    baseUrl: web.url,
    async close() {
      await new Promise((r) => web.server.close(r));
      await browser.close();
    },
  };
}
