// A volunteer tab in a home: one headless Chromium per tab, running inside the home host's namespace
// (netlab's launcher), with the volunteer page of the lab server open and Contribute pressed.
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from '@tabfleet/headless';
import type { LabHost, NetLab } from '@tabfleet/netlab';
import { keepPeerConnections } from './link-types';

export interface LabTab {
  host: LabHost;
  label: string;
  browser: Browser;
  page: Page;
  /** Uncaught page errors so far. */
  errors: string[];
  volunteerId(): Promise<string | undefined>;
  /** Bytes it sent over its peer links and to the server in star rounds (its runtime's count). */
  bytesSent(): Promise<number>;
  close(): Promise<void>;
}

/** `label` names the tab in `log`'s lines (its home). */
export async function openLabTab(lab: NetLab, host: LabHost, serverUrl: string, label: string, log: (line: string) => void = () => {}): Promise<LabTab> {
  const browser = await chromium.launch({
    executablePath: await lab.launcherIn(host, CHROMIUM_PATH),
    headless: true,
    args: [
      ...CHROMIUM_ARGS,
      // mDNS-hidden host candidates (name.local) cannot be resolved in the lab.
      '--disable-features=WebRtcHideLocalIpsWithMdns',
      // WebGPU needs a secure context and http://203.0.113.x is not one. Until the lab serves HTTPS
      // with a test CA (another piece of issue 36), Chromium is told to treat this origin as secure.
      `--unsafely-treat-insecure-origin-as-secure=${serverUrl}`,
    ],
  });
  try {
    const context = await browser.newContext();
    await context.addInitScript(keepPeerConnections);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.stack ?? e.message));
    page.on('console', (m) => log(`[${label} ${m.type()}] ${m.text()}`));
    await page.goto(`${serverUrl}/apps/volunteer/`);
    await page.evaluate(() => window.tabfleetVolunteer.ready);
    await page.click('#contribute');
    return {
      host, label, browser, page, errors,
      volunteerId: async () => (await page.evaluate(() => window.tabfleetVolunteer.status()))?.volunteerId ?? undefined,
      bytesSent: async () => (await page.evaluate(() => window.tabfleetVolunteer.status()))?.bytesSent ?? 0,
      close: () => browser.close(),
    };
  } catch (e) {
    await browser.close();
    throw e;
  }
}
