// Headless volunteers: N Chromium tabs (WebGPU; SwiftShader without a GPU) on a server's volunteer
// page, each having pressed Contribute. Used by `npm run workers` and `npm start`.
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from './chromium.mjs';
import type { RuntimeStatus } from '@tabfleet/worker/runtime';

export interface HeadlessWorkers {
  pages: Page[];
  statuses(): Promise<(RuntimeStatus | null)[]>;
  /** Closes the tabs (their pagehide tells the server) and the browser if we launched it. */
  stop(): Promise<void>;
}

export async function launchWorkers(opts: { serverUrl: string; count: number; browser?: Browser; job?: string; log?: (line: string) => void }): Promise<HeadlessWorkers> {
  const browser = opts.browser ?? (await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS }));
  const pages: Page[] = [];
  const url = `${opts.serverUrl}/apps/volunteer/${opts.job ? `?job=${encodeURIComponent(opts.job)}` : ''}`;
  for (let i = 0; i < opts.count; i++) {
    const page = await (await browser.newContext()).newPage();
    page.on('pageerror', (e) => opts.log?.(`[worker ${i}] page error: ${e.message}`));
    page.on('console', (m) => m.type() === 'error' && opts.log?.(`[worker ${i}] ${m.text()}`));
    await page.goto(url);
    const info = await page.evaluate(() => window.tabfleetVolunteer.ready);
    if (!info) throw new Error(`worker ${i}: no WebGPU in headless Chromium (${CHROMIUM_PATH}); is it started with --enable-unsafe-webgpu?`);
    await page.click('#contribute');
    opts.log?.(`[worker ${i}] contributing on ${info.description}`);
    pages.push(page);
  }
  return {
    pages,
    statuses: () => Promise.all(pages.map((p) => p.evaluate(() => window.tabfleetVolunteer.status()).catch(() => null))),
    async stop() {
      for (const p of pages) await p.close({ runBeforeUnload: true }).catch(() => {});
      if (!opts.browser) await browser.close().catch(() => {});
    },
  };
}

export function formatStatus(i: number, s: RuntimeStatus | null): string {
  if (!s) return `worker ${i}: gone`;
  const mb = (n: number) => (n / 1e6).toFixed(1);
  return `worker ${i}: ${s.state.padEnd(8)} job ${s.jobId ?? '-'}  step ${s.step}  syncs ${s.syncs}  ${s.samplesPerSec.toFixed(0)} samples/s  peers ${s.peers.length}`
    + `  sent ${mb(s.bytesSent)} MB  recv ${mb(s.bytesReceived)} MB${s.state === 'loading' && s.downloadedBytes ? `  downloaded ${mb(s.downloadedBytes)} MB` : ''}`
    + `${s.lastError ? `  error: ${s.lastError}` : ''}`;
}
