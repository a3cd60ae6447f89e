// What the e2e tests of the apps share: the built apps, a test server, the shared browser, pages that
// close when the file's tests end, and screenshots under e2e/screenshots/.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, type TestServer } from '@tabfleet/server/testing';
import { ensureBuilt, connectBrowser, openPage, type OpenedPage } from '@tabfleet/headless';

export const SHOTS = join(import.meta.dirname, 'screenshots');

export interface AppsSession {
  readonly server: TestServer;
  readonly browser: Browser;
  /** Opens a page (closed after the file's tests), logging its errors and refusals, or each line to `opts.log`. */
  open(url: string, opts?: Parameters<typeof openPage>[2]): Promise<OpenedPage>;
  shot(page: Page, name: string): Promise<Buffer>;
}

/** Registers before/after hooks; the session's fields are there once `before` has run. */
export function appsSession(): AppsSession {
  let server: TestServer | undefined;
  let browser: Browser | undefined;
  const opened: OpenedPage[] = [];
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    await ensureBuilt('apps', console.log);
    server = await startTestServer({ timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 } });
    browser = await connectBrowser();
  });
  after(async () => {
    for (const p of opened) await p.close().catch(() => {});
    await browser?.close();
    await server?.stop();
  });
  return {
    get server() {
      return server!;
    },
    get browser() {
      return browser!;
    },
    async open(url, opts) {
      const p = await openPage(browser!, url, { log: (l) => /error|refused|fail/i.test(l) && console.log(l), ...opts });
      opened.push(p);
      return p;
    },
    shot: (page, name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true }),
  };
}
