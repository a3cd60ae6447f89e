// The contribute widget on other sites, in headless Chromium against the real server: two pages on
// other origins (each a tiny node:http server; the allowed one on localhost, another site than the
// server's 127.0.0.1) place <tabfleet-contribute>. The server allows one (--allow-origin). On the
// other the element says it is refused, and the browser will not show the frame there (CSP
// frame-ancestors). On the allowed one nothing connects before the visitor's click; after it the tab
// joins the job and commits syncs with a Node volunteer over WebRTC; Pause takes it out, and the syncs
// the Node volunteer commits alone after that are neither the tab's nor credited to it. Screenshots
// go to e2e/screenshots/embed-*.png.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, BrowserContext, Frame, Page } from 'playwright-core';
import { createNodeWebRtcTransport } from '@tabfleet/collective/webrtc-node';
import { connectBrowser, ensureBuilt } from '@tabfleet/headless';
import { SHOTS } from './apps-session';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import type { RuntimeStatus } from '@tabfleet/worker/runtime';
import { nodeVolunteer } from '@tabfleet/worker/testing';

/** A site owner's page: the two lines README.md gives them, pointing at the tabfleet server. */
async function startSite(host: string, serverUrl: () => string): Promise<{ origin: string; server: Server }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><html><head><title>a site</title></head><body>
      <h1>Help our research</h1>
      <script type="module" src="${serverUrl()}/embed/tabfleet.js"></script>
      <tabfleet-contribute server="${serverUrl()}"></tabfleet-contribute>
    </body></html>`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new Error('site has no TCP address');
  return { origin: `http://${host}:${addr.port}`, server };
}

let server: TestServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let allowed: { origin: string; server: Server };
let refused: { origin: string; server: Server };
const pageErrors: string[] = [];
const node: ReturnType<typeof nodeVolunteer>[] = [];

before(async () => {
  await ensureBuilt('apps', console.log);
  mkdirSync(SHOTS, { recursive: true });
  // The allowed site is another site, not only another origin (localhost against the server's
  // 127.0.0.1): the frame is a third-party one, with partitioned storage, as on the web.
  allowed = await startSite('localhost', () => server.url);
  refused = await startSite('127.0.0.1', () => server.url);
  server = await startTestServer({ allowOrigins: [allowed.origin], timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 } });
  browser = await connectBrowser();
  // One context and one page for the whole file: the visitor goes from one site to the other.
  context = await browser.newContext();
  page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.stack ?? e.message));
  page.on('console', (m) => /error|refused|fail/i.test(m.text()) && console.log(`[page ${m.type()}] ${m.text()}`));
});

after(async () => {
  for (const v of node) v.runtime.stop();
  await server?.stopJobs().catch(() => {});
  await context?.close().catch(() => {});
  await browser?.close();
  await server?.stop();
  for (const site of [allowed, refused]) await new Promise((r) => site?.server.close(r));
});

const elementState = () => page.getAttribute('tabfleet-contribute', 'data-state');
const frameAt = (p: Page, url: string): Frame | undefined => p.frames().find((f) => f.url().startsWith(url));

test('a site not allowed gets a clear refusal, and the browser will not frame the server for it', { timeout: 120_000 }, async () => {
  await page.goto(refused.origin);
  await waitFor('the element says it is refused', async () => (await elementState()) === 'refused', 30_000, 100);
  const message = (await page.textContent('tabfleet-contribute [part=message]')) ?? '';
  assert.match(message, /Contributing is not available here: the tabfleet server “127\.0\.0\.1:\d+” does not allow this site/);
  assert.ok(message.includes(`(${refused.origin})`) && message.includes(`--allow-origin ${refused.origin}`), message);
  assert.equal(await page.locator('tabfleet-contribute iframe').count(), 0);
  await page.screenshot({ path: join(SHOTS, 'embed-refused.png') });
  // The page puts the frame in by hand: CSP frame-ancestors keeps the server's page out of it.
  const frameUrl = `${server.url}/apps/embed/`;
  await page.evaluate((src) => new Promise((resolve) => {
    const f = Object.assign(document.createElement('iframe'), { src });
    f.addEventListener('load', resolve);
    document.body.append(f);
  }), frameUrl);
  const framed = frameAt(page, frameUrl);
  const loaded = framed ? await framed.evaluate(() => 'tabfleetEmbed' in window).catch(() => false) : false;
  assert.equal(loaded, false, 'the contribute frame must not load inside a site that is not allowed');
  assert.equal(server.io.engine.clientsCount, 0);
});

test('on an allowed site it asks first, trains the job after the click, and Pause stops its work', { timeout: 10 * 60_000 }, async () => {
  const job = await server.createJob({
    name: 'widget job', trust: 'trusted', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 4, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 1, maxWorkers: 2, targetSteps: 1_000_000, checkpointEvery: 1, evalEverySteps: 1_000_000,
  });
  const rounds = async () => (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { seq: number; outcome: string; members: string[]; startedAt: number }[];

  await page.goto(allowed.origin);
  await waitFor('the element shows the frame', async () => (await elementState()) === 'ready', 30_000, 100);
  const frameUrl = `${server.url}/apps/embed/`;
  await waitFor('the frame has loaded', async () => (await frameAt(page, frameUrl)?.evaluate(() => 'tabfleetEmbed' in window).catch(() => false)) === true, 30_000, 100);
  const frame = frameAt(page, frameUrl)!;
  // Before the click: what it would join, and nothing running, on the page or at the server.
  await waitFor('the frame names the job a click joins', async () => /Pressing Contribute joins widget job/.test((await frame.textContent('#next-job')) ?? ''), 30_000, 100);
  assert.match((await frame.textContent('#consent')) ?? '', /Nothing runs before/);
  assert.equal(await frame.evaluate(() => window.tabfleetEmbed.started()), false, 'no engine worker before the click');
  assert.equal(await frame.evaluate(() => window.tabfleetEmbed.clientId()), null, 'no id before the click');
  assert.equal(server.io.engine.clientsCount, 0, 'no Socket.IO connection before the click');
  assert.equal((await server.api(`/api/jobs/${job.id}`)).body.workers.length, 0);

  await page.screenshot({ path: join(SHOTS, 'embed-before-click.png') });
  await frame.click('#contribute');
  const status = () => frame.evaluate(() => window.tabfleetEmbed.status()) as Promise<RuntimeStatus>;
  await waitFor('the tab is a member of the job', async () => (await status())?.jobId === job.id && (await status()).volunteerId !== null, 120_000, 250);
  const tab = (await status()).volunteerId!;
  assert.equal(await frame.evaluate(() => window.tabfleetEmbed.backend()), 'webgpu', 'WebGPU in the frame on the server origin');
  const memberSyncs = async () => (await rounds()).filter((r) => r.outcome === 'committed' && r.members.includes(tab));
  await waitFor('the job commits syncs with the tab', async () => (await memberSyncs()).length >= 2, 240_000, 500);

  // A second member, a Node volunteer over real WebRTC: syncs now exchange bytes with the tab.
  node.push(nodeVolunteer(server.url, (self, signaler) => createNodeWebRtcTransport({ self, signaler }), { jobId: job.id }));
  await waitFor('the tab and the Node volunteer commit syncs together', async () => (await memberSyncs()).filter((r) => r.members.length === 2).length >= 2, 240_000, 500);
  const shown = (await frame.textContent('#stats')) ?? '';
  assert.match(shown, new RegExp(`widget job \\(${job.id}\\)`));
  assert.doesNotMatch(await frame.textContent('[data-figure="sent / received"]') ?? '', /^0 B/);
  assert.ok((await status()).bytesSent > 0 && (await status()).bytesReceived > 0);
  await page.screenshot({ path: join(SHOTS, 'embed-contributing.png') });

  // Pause: the tab leaves the job and holds; the Node volunteer goes on alone.
  await frame.click('#pause');
  await waitFor('the tab is paused', async () => (await status()).state === 'paused', 30_000, 100);
  assert.match((await frame.textContent('#headline')) ?? '', /^Paused\. Nothing is running\./);
  const atPause = await status();
  // Syncs begun after the pause: one begun before it may still commit the tab's finished work with it.
  const pausedAt = Date.now();
  const later = async () => (await rounds()).filter((r) => r.outcome === 'committed' && r.startedAt > pausedAt);
  await waitFor('the Node volunteer commits three syncs alone', async () => (await later()).length >= 3, 240_000, 500);
  assert.ok((await later()).every((r) => !r.members.includes(tab)), `a sync begun after the pause has the tab as a member: ${JSON.stringify(await later())}`);
  const now = await status();
  assert.equal(now.state, 'paused');
  assert.equal(now.step, atPause.step, 'no steps while paused');
  assert.equal(now.syncs, atPause.syncs, 'no syncs while paused');
  // The server credits this browser with exactly the syncs it was a member of, all before the pause.
  const clientId = await frame.evaluate(() => window.tabfleetEmbed.clientId());
  // The id lives in the frame's (the server origin's) storage where the browser gives a third-party
  // frame any, else for this visit, which the frame says.
  const stored = await frame.evaluate(() => {
    try {
      return window.localStorage.getItem('tabfleet-client-id');
    } catch {
      return 'denied';
    }
  });
  if (stored === 'denied') assert.ok(await frame.isVisible('#visit-only'), 'the frame says the credit is for this visit');
  else assert.equal(stored, clientId);
  const credited = async () => (await server.api('/api/public/credit', { method: 'POST', json: { clientId } })).body.credit?.syncs ?? 0;
  const mine = await memberSyncs();
  assert.ok(mine.every((r) => r.seq <= pausedAt));
  await waitFor('the credit counts the syncs the tab was in', async () => (await credited()) === mine.length, 60_000, 250);
  assert.equal(now.lastError, null);
  assert.deepEqual(pageErrors, []);
});
