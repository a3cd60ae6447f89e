// A volunteer tab in a home: one headless Chromium per tab, running inside the home host's namespace
// (netlab's launcher), with the volunteer page of the lab server open over https and Contribute pressed.
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from '@tabfleet/headless';
import type { LabHost, NetLab } from '@tabfleet/netlab';
import { keepPeerConnections } from './link-types';
import type { LabServer } from './lab-server';
import type { LabTls } from './lab-tls';

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

/**
 * A headless Chromium inside `host`'s namespace that reaches the lab server as a user's browser would:
 * its name mapped to the server's address (the lab has no DNS), the test CA trusted through the NSS
 * database in the HOME it runs with. The https page is a secure context, so WebGPU is there.
 */
export function launchLabChromium(lab: NetLab, host: LabHost, server: LabServer, tls: LabTls): Promise<Browser> {
  return lab.launcherIn(host, CHROMIUM_PATH).then((executablePath) => chromium.launch({
    executablePath,
    headless: true,
    env: { ...process.env, HOME: tls.home },
    args: [
      ...CHROMIUM_ARGS,
      `--host-resolver-rules=MAP ${tls.name} ${server.host.address}`,
      // mDNS-hidden host candidates (name.local) cannot be resolved in the lab.
      '--disable-features=WebRtcHideLocalIpsWithMdns',
    ],
  }));
}

/** `label` names the tab in `log`'s lines (its home). */
export async function openLabTab(lab: NetLab, host: LabHost, server: LabServer, tls: LabTls, label: string, log: (line: string) => void = () => {}): Promise<LabTab> {
  const browser = await launchLabChromium(lab, host, server, tls);
  try {
    const context = await browser.newContext();
    await context.addInitScript(keepPeerConnections);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.stack ?? e.message));
    page.on('console', (m) => log(`[${label} ${m.type()}] ${m.text()}`));
    await page.goto(`${server.url}/apps/volunteer/`);
    // A certificate the browser did not trust would have failed the navigation; WebGPU needs the secure context.
    if (!(await page.evaluate(() => window.isSecureContext))) throw new Error(`${label}: ${server.url} is not a secure context`);
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
