// Ring members of the collective test page (e2e/pages/collective.html) as headless Chromium tabs in
// lab hosts, one Chromium per host: the built page reaches them through Playwright's routing from a
// loopback static server (its origin is never reached over the network), and their signaling is
// relayed by the test, as the coordinator's `signal` event does. For link-level lab tests (ICE
// restart, TURN over TLS) that need no server.
import { chromium, type Browser, type Page } from 'playwright-core';
import type { InitOptions } from '@tabfleet/collective/testing';
import { builtDir, CHROMIUM_ARGS, CHROMIUM_PATH, ensureBuilt, FASHION_MNIST_DIR } from '@tabfleet/headless';
import type { LabHost, NetLab } from '@tabfleet/netlab';
import { startStaticServer } from '@tabfleet/server/static';

/** The pages' origin: a lab address nothing listens on; Playwright answers every request to it. */
const ORIGIN = 'http://203.0.113.200';

export interface LabCollectiveTabs {
  ids: string[];
  pages: Page[];
  /** Uncaught page errors, `id: error`. */
  errors: string[];
  close(): Promise<void>;
}

/** One tab per host, ids `tab0…`, each given `init(id)` (ICE servers and the like) with the ring of all. */
export async function openLabCollectiveTabs(
  lab: NetLab, hosts: LabHost[], init: (id: string) => Omit<InitOptions, 'self' | 'members'>, opts: { env?: NodeJS.ProcessEnv } = {},
): Promise<LabCollectiveTabs> {
  await ensureBuilt('pages', console.log);
  const web = await startStaticServer({ roots: [builtDir('pages')], datasetsDir: FASHION_MNIST_DIR });
  const ids = hosts.map((_, i) => `tab${i}`);
  const browsers: Browser[] = [];
  const pages: Page[] = [];
  const errors: string[] = [];
  const close = async () => {
    for (const b of browsers) await b.close().catch(() => {});
    await new Promise((r) => web.server.close(r));
  };
  try {
    for (const [i, host] of hosts.entries()) {
      const browser = await chromium.launch({
        executablePath: await lab.launcherIn(host, CHROMIUM_PATH), headless: true, ...(opts.env ? { env: opts.env } : {}),
        // mDNS-hidden host candidates (name.local) cannot be resolved in the lab.
        args: [...CHROMIUM_ARGS, '--disable-features=WebRtcHideLocalIpsWithMdns'],
      });
      browsers.push(browser);
      const context = await browser.newContext();
      await context.route(`${ORIGIN}/**`, async (route) => {
        const url = new URL(route.request().url());
        const res = await fetch(`${web.url}${url.pathname}${url.search}`);
        await route.fulfill({ status: res.status, headers: Object.fromEntries(res.headers), body: Buffer.from(await res.arrayBuffer()) });
      });
      const page = await context.newPage();
      page.on('pageerror', (e) => errors.push(`${ids[i]}: ${e.stack ?? e.message}`));
      pages.push(page);
    }
    for (const [i, page] of pages.entries()) {
      await page.exposeFunction('tabfleetSignalOut', async (to: string, data: unknown) => {
        const target = pages[ids.indexOf(to)];
        if (target) await target.evaluate(([from, d]) => window.tabfleetSignalIn(from as string, d), [ids[i], data] as const);
      });
      await page.goto(`${ORIGIN}/e2e/pages/collective.html`);
      await page.waitForFunction(() => typeof window.tabfleetCollective === 'object');
      await page.evaluate((o) => window.tabfleetCollective.init(o), { ...init(ids[i]), self: ids[i], members: ids });
    }
  } catch (e) {
    await close();
    throw e;
  }
  return { ids, pages, errors, close };
}
