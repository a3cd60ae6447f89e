// N headless Chromium tabs as ring members (the test page e2e/pages/collective.html), for the in-browser collective
// test and the allreduce benchmark. Signaling is relayed here, between ring neighbours only, as the
// coordinator's `signal` event does ({ to, data } in, { from, data } out); a barrier lets every tab
// start a timed run together.
import type { Browser } from 'playwright-core';
import type { InitOptions } from '@tabfleet/collective/testing';
import { openPage, type OpenedPage } from './index';

export interface CollectiveTabs {
  ids: string[];
  tabs: OpenedPage[];
  /** Signals relayed and refused (a refused one would be a bug: only neighbours signal). */
  signals: { relayed: number; refused: number };
  /** Uncaught errors of every tab. */
  errors(): string[];
  close(): Promise<void>;
}

export async function openCollectiveTabs(
  browser: Browser,
  url: string,
  n: number,
  opts: Omit<InitOptions, 'self' | 'members'> & { log?: (line: string) => void },
): Promise<CollectiveTabs> {
  const ids = Array.from({ length: n }, (_, i) => `tab${i}`);
  const tabs: OpenedPage[] = [];
  try {
    for (const id of ids) tabs.push(await openPage(browser, url, { log: (l) => opts.log?.(`${id} ${l}`) }));
  } catch (e) {
    await Promise.all(tabs.map((t) => t.close()));
    throw e;
  }
  const signals = { relayed: 0, refused: 0 };
  const queues = ids.map(() => Promise.resolve());
  const neighbours = (a: number, b: number) => n > 1 && ((a - b + n) % n === 1 || (b - a + n) % n === 1);
  let waiting: (() => void)[] = [];

  await Promise.all(tabs.map(async ({ page }, i) => {
    await page.exposeFunction('tabfleetSignalOut', (to: string, data: unknown) => {
      const j = ids.indexOf(to);
      if (j < 0 || !neighbours(i, j)) {
        signals.refused++;
        return;
      }
      signals.relayed++;
      // In order per receiving tab, like a socket.
      queues[j] = queues[j]
        .then(() => tabs[j].page.evaluate(([from, d]) => window.tabfleetSignalIn(from as string, d), [ids[i], data] as const))
        .catch((e: Error) => opts.log?.(`signal ${ids[i]} → ${to} not delivered: ${e.message}`));
    });
    await page.exposeFunction('tabfleetBarrier', () => new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (waiting.length === n) {
        const all = waiting;
        waiting = [];
        for (const r of all) r();
      }
    }));
    await page.waitForFunction(() => typeof window.tabfleetCollective === 'object');
    const { log: _log, ...init } = opts;
    await page.evaluate((o) => window.tabfleetCollective.init(o), { ...init, self: ids[i], members: ids });
  }));

  return {
    ids,
    tabs,
    signals,
    errors: () => tabs.flatMap((t, i) => t.errors.map((e) => `${ids[i]}: ${e}`)),
    async close() {
      await Promise.all(tabs.map(async (t) => {
        await t.page.evaluate(() => window.tabfleetCollective.close()).catch(() => {});
        await t.close();
      }));
    },
  };
}
