// What the next tests build on: the test process reaches a server inside the lab through a portal, and
// headless Chromium launched inside a home (Playwright through `launcherIn`) loads a page from a public
// host, which sees the home router's WAN address.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { NetLab, type LabHost } from './index';
import { addressOf, startProbe, type ProbeServer } from './testing/index';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
let lab: NetLab;
let server: LabHost;
let http: ProbeServer;

before(async () => {
  lab = await NetLab.create();
  server = await lab.publicHost('server');
  http = await startProbe(lab, server, ['http-echo', '8080']);
});

after(() => lab?.close());

test('a portal lets the test process reach a server inside the lab over 127.0.0.1', async () => {
  const portal = await lab.portal(server, server.address, 8080);
  const res = await fetch(`http://127.0.0.1:${portal.port}/from-the-test`);
  assert.equal(res.status, 200);
  // The relay runs in the server's namespace, so the server sees its own address, not the test's.
  assert.equal(addressOf(await res.text()), server.address);
  assert.ok(http.lines.some((l) => l.url === '/from-the-test'));
});

test('headless Chromium launched inside a home loads a public page and is seen at the WAN address', async () => {
  const home = await lab.home('h1', { nat: 'symmetric' });
  const tab = await home.host('tab1');
  const browser = await chromium.launch({
    executablePath: await lab.launcherIn(tab, CHROMIUM),
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  try {
    const page = await browser.newPage();
    await page.goto(`http://${server.address}:8080/from-a-tab`);
    assert.equal(addressOf(await page.textContent('body')), home.wanAddress);
    assert.ok(http.lines.some((l) => l.url === '/from-a-tab' && addressOf(l.http) === home.wanAddress));
  } finally {
    await browser.close();
  }
});
