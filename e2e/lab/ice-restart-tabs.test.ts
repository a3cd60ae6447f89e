// ICE restart in Chromium: two tabs, each its own headless Chromium in a host behind its own
// endpoint-independent NAT in the network lab, link up through coturn (STUN/TURN) as ring members of
// the collective test page (e2e/pages/collective.html, served to them through Playwright's routing from
// a loopback static server; signaling relayed by this test, as the coordinator's `signal` event does).
// One router then drops everything it forwards until both tabs see their link down and a restart
// tried; once it forwards again the link comes back, and an allreduce over it is exact. Needs root.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { builtDir, CHROMIUM_ARGS, CHROMIUM_PATH, ensureBuilt, FASHION_MNIST_DIR } from '@tabfleet/headless';
import { NetLab, type Home } from '@tabfleet/netlab';
import { startCoturn, turnCredentials, waitFor, type Coturn } from '@tabfleet/server/testing';
import { startStaticServer } from '@tabfleet/server/static';

const SECRET = 'ice-restart-tabs-secret-0123456789';
/** The pages' origin: never reached over the network, Playwright answers every request to it. */
const ORIGIN = 'http://203.0.113.200';
const IDS = ['tab0', 'tab1'];
let lab: NetLab;
let coturn: Coturn;
let web: Awaited<ReturnType<typeof startStaticServer>>;
let homes: Home[];
const browsers: Browser[] = [];
const pages: Page[] = [];
const errors: string[] = [];

before(async () => {
  await ensureBuilt('pages', console.log);
  web = await startStaticServer({ roots: [builtDir('pages')], datasetsDir: FASHION_MNIST_DIR });
  lab = await NetLab.create();
  const turnHost = await lab.publicHost('turn');
  coturn = await startCoturn(SECRET, { listenIp: turnHost.address, port: 3478, spawn: (argv) => lab.spawn(turnHost, argv) });
  homes = [await lab.home('a', { nat: 'eim' }), await lab.home('b', { nat: 'eim' })];
  for (const [i, home] of homes.entries()) {
    const browser = await chromium.launch({
      executablePath: await lab.launcherIn(await home.host('t1'), CHROMIUM_PATH), headless: true,
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
    page.on('pageerror', (e) => errors.push(`${IDS[i]}: ${e.stack ?? e.message}`));
    pages.push(page);
  }
  for (const [i, page] of pages.entries()) {
    await page.exposeFunction('tabfleetSignalOut', (_to: string, data: unknown) => pages[1 - i].evaluate(([from, d]) => window.tabfleetSignalIn(from as string, d), [IDS[i], data] as const));
    await page.goto(`${ORIGIN}/e2e/pages/collective.html`);
    await page.waitForFunction(() => typeof window.tabfleetCollective === 'object');
    const iceServers = [{ urls: [coturn.stunUrl, coturn.url], ...turnCredentials(SECRET, IDS[i], Math.floor(Date.now() / 1000) + 3600) }];
    await page.evaluate((o) => window.tabfleetCollective.init(o), { self: IDS[i], members: IDS, jobId: 'ice-restart', round: 1, deadlineMs: 240_000, iceServers, iceRestartBoundMs: 240_000 });
  }
});
after(async () => {
  for (const b of browsers) await b.close().catch(() => {});
  coturn?.stop();
  await lab?.close();
  await new Promise((r) => web?.server.close(r));
});

const allreduce = () => Promise.all(pages.map((p) => p.evaluate(() => window.tabfleetCollective.allreduceCheck({ len: 65_536, seed: 3, dtype: 'f32', op: 'sum', range: 1000 }))));
const links = () => Promise.all(pages.map((p) => p.evaluate(() => Object.values(window.tabfleetCollective.iceRestarts())[0])));

test('a tab\'s link that went down comes back through an ICE restart, and carries an exact allreduce', { timeout: 8 * 60_000 }, async () => {
  await Promise.all(pages.map((p) => p.evaluate(() => window.tabfleetCollective.connect())));
  for (const r of await allreduce()) assert.equal(r.mismatches, 0);
  await lab.exec(homes[0], ['nft', '-f', '-'], { input: 'table ip outage {\n chain hold {\n  type filter hook forward priority -10; policy drop;\n }\n}\n' });
  await waitFor('both tabs see the link down and a restart tried', async () => (await links()).every((l) => l?.down && l.restarts >= 1), 180_000, 250)
    .catch(async (e: Error) => assert.fail(`${e.message}: ${JSON.stringify(await links())}`));
  await lab.exec(homes[0], ['nft', 'delete', 'table', 'ip', 'outage']);
  await waitFor('the link is back at both tabs', async () => (await links()).every((l) => l && !l.down && l.recoveries >= 1), 180_000, 250)
    .catch(async (e: Error) => assert.fail(`${e.message}: ${JSON.stringify(await links())}`));
  for (const r of await allreduce()) assert.equal(r.mismatches, 0);
  const stats = await Promise.all(pages.map((p) => p.evaluate(() => window.tabfleetCollective.stats())));
  for (const s of stats) assert.ok(s.links.every((l) => l.open), JSON.stringify(s.links));
  assert.deepEqual(errors, []);
});
