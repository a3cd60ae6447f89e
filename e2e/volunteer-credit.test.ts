// What a new volunteer and a researcher see around one finished job, in real pages: the volunteer
// page says which server, which job and what it costs before Contribute; a display name is checked
// and kept; the server-counted credit shows after contributing and on a later visit; the public
// contributor page lists both tabs without a token; the dashboard's job list shows the job's accuracy,
// its page has no Stop button and keeps both workers' rows. Screenshots go to /tmp/ui-shots/.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { connectBrowser, ensureBuilt, openPage, type OpenedPage } from '@tabfleet/headless';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';

const SHOTS = process.env.TABFLEET_SHOTS ?? '/tmp/ui-shots';
let server: TestServer;
let browser: Browser;
const opened: OpenedPage[] = [];
before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  await ensureBuilt('apps', console.log);
  server = await startTestServer({ name: 'e2e lab', operator: 'the tabfleet tests', timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 } });
  browser = await connectBrowser();
});
after(async () => {
  for (const p of opened) await p.close().catch(() => {});
  await browser?.close();
  await server?.stop();
});

const shot = (page: Page, name: string) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
async function open(url: string): Promise<OpenedPage> {
  const p = await openPage(browser, url, { log: (l) => /error|refused|fail/i.test(l) && console.log(l) });
  opened.push(p);
  return p;
}
const figure = (page: Page, key: string) => page.textContent(`[data-figure="${key}"]`).then((t) => t ?? '');

test('volunteer page, credit, contributor page and a finished job on the dashboard', { timeout: 10 * 60_000 }, async () => {
  const job = await server.createJob({
    // Fixed H: the credit below is 6 syncs of 8 steps.
    name: 'credit e2e', preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 8, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 2, maxWorkers: 2, targetSteps: 48, checkpointEvery: 2,
  });

  // Before Contribute: server, job, and what the tab will use.
  const ada = await open(`${server.url}/apps/volunteer/`);
  const a = ada.page;
  await a.evaluate(() => window.tabfleetVolunteer.ready);
  await waitFor('the plan names the job', async () => (await a.textContent('#next-job'))?.includes('credit e2e'), 15_000, 100);
  assert.match((await a.textContent('#server')) ?? '', /Server e2e lab, run by the tabfleet tests/);
  assert.match(await a.textContent('#next-job') ?? '', /Pressing Contribute joins credit e2e: mlp-fashion on fashion-mnist, localsgd, 0 of up to 2 volunteers/);
  assert.match(await figure(a, 'GPU'), /SwiftShader|Google|Vulkan/i);
  assert.equal(await figure(a, 'model in GPU memory'), '814.1 kB');
  assert.match(await figure(a, 'sent per sync'), /^about 814\.1 kB \(estimate\)/);

  // A name the server would refuse is refused here first; a good one is kept.
  await a.fill('#display-name', '<b>Ada</b>');
  await a.click('#name-form button');
  assert.match((await a.textContent('#name-status')) ?? '', /Not saved: letters, digits/);
  await a.fill('#display-name', 'Ada E2E');
  await a.click('#name-form button');
  assert.match((await a.textContent('#name-status')) ?? '', /Saved: you appear as “Ada E2E”/);
  await shot(a, 'volunteer-before-contributing');

  await a.click('#contribute');
  const bob = await open(`${server.url}/apps/volunteer/`);
  await bob.page.evaluate(() => window.tabfleetVolunteer.ready);
  await bob.page.click('#contribute');
  await waitFor('the job is done', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 8 * 60_000, 1000);

  // The volunteer's own totals, as the server counted them: 6 syncs of 8 steps of 32 examples.
  await waitFor('the credit shows', async () => (await figure(a, 'syncs')) === '6', 20_000, 250);
  assert.equal(await figure(a, 'training examples'), '1,536');
  assert.equal(await figure(a, 'shown as'), 'Ada E2E');
  assert.ok(await a.isVisible('#contributors-link'));
  await shot(a, 'volunteer-after-contributing');
  // A later visit from this browser: same id, same totals, the name still filled in.
  await a.reload();
  await waitFor('the credit shows again', async () => (await figure(a, 'syncs')) === '6', 15_000, 250);
  assert.equal(await a.inputValue('#display-name'), 'Ada E2E');
  assert.match(await a.textContent('#next-job') ?? '', /No job needs volunteers right now/);

  // The public contributor page, from a browser with no token.
  const pub = await open(`${server.url}/apps/volunteer/contributors.html?job=${job.id}`);
  await pub.page.waitForSelector('#contributors tbody tr td:nth-child(2)');
  const rows = await pub.page.$$eval('#contributors tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim())));
  assert.equal(rows.length, 2, JSON.stringify(rows));
  assert.deepEqual(rows.map((r) => [r[2], r[3]]), [['1,536', '6'], ['1,536', '6']]);
  assert.ok(rows.some((r) => r[1] === 'Ada E2E'));
  assert.ok(rows.some((r) => /^volunteer [0-9a-f]{8}$/.test(r[1] ?? '')), 'the unnamed tab is shown by a short id');
  await shot(pub.page, 'contributors-page');

  // The dashboard: accuracy in the list, no Stop button and two departed rows on the job page.
  const summary = (await server.api(`/api/jobs/${job.id}`)).body.job;
  assert.ok(summary.latestAccuracy > 0.5, `evaluated (${summary.latestAccuracy})`);
  const dash = await open(`${server.url}/apps/dashboard/?token=test-token`);
  const d = dash.page;
  await d.waitForSelector(`#jobs tr[data-job="${job.id}"]`);
  assert.equal(await d.textContent(`#jobs tr[data-job="${job.id}"] [data-accuracy]`), `${(100 * summary.latestAccuracy).toFixed(2)}%`);
  await shot(d, 'dashboard-job-list');
  await d.click(`#jobs tr[data-job="${job.id}"] a`);
  await d.waitForSelector('#job-view:not([hidden])');
  await waitFor('the worker rows', async () => (await d.$$('#workers tbody tr[data-state="left"]')).length === 2, 10_000, 100);
  assert.equal(await d.isVisible('#stop'), false, 'a finished job has no Stop button');
  assert.match(await figure(d, 'bytes on the wire (all workers)'), /^\d+(\.\d+)? (kB|MB)$/);
  const sent = await d.$$eval('#workers tbody tr td[data-sent]', (tds) => tds.map((td) => td.textContent));
  assert.ok(sent.every((t) => /^\d+(\.\d+)? (kB|MB)$/.test(t ?? '') && !/^0(\.0)? MB$/.test(t ?? '')), `sizes in units that fit: ${sent}`);
  await shot(d, 'dashboard-finished-job');
  for (const p of [ada, bob, pub, dash]) assert.deepEqual(p.errors, []);
});
