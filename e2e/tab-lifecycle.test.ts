// The tab lifecycle in headless Chromium, through the real server and WebRTC: what the browser does to
// a volunteer tab behind its back. Tab A is a steady member; tab B is a real tab in a window of its
// own (driven over raw CDP, so the browser hides and freezes it for real) and goes through each event:
// hidden (keeps training, says so), frozen (leaves at once, rejoins on resume), on battery (leaves
// unless allowed, rejoins when plugged in), its GPU device lost (recreates it and rejoins) and closed
// (leaves at once). After each, the server heard of it within seconds, not at a timeout, and B
// contributes again; A's rounds go on throughout. Back from frozen, B loads the job's model from A
// (tab to tab over WebRTC, checked against the agreed digest), not from the server.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectBrowser, ensureBuilt, openCdpWindow, openPage, type CdpTab, type CdpWindow, type OpenedPage } from '@tabfleet/headless';
import { parseSamples, sampleValue, startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import type { RuntimeStatus } from '@tabfleet/worker/runtime';
import type { Browser } from 'playwright-core';

/** Headless Chromium has a battery that is always charging: this one the test can unplug. */
const FAKE_BATTERY = `(() => {
  const battery = new EventTarget();
  Object.assign(battery, { charging: true, level: 0.5, chargingTime: 0, dischargingTime: Infinity });
  Object.defineProperty(Navigator.prototype, 'getBattery', { configurable: true, value: () => Promise.resolve(battery) });
  window.setCharging = (charging) => { battery.charging = charging; battery.dispatchEvent(new Event('chargingchange')); };
})()`;

/** The server must hear of a departure well before any timeout (rounds time out after 20 s here). */
const NOTICE_MS = 5_000;

let server: TestServer;
let browser: Browser;
let bWindow: CdpWindow;
let a: OpenedPage;
let b: CdpTab;
let other: CdpTab;
let jobId: string;
const logs: { at: number; line: string }[] = [];

const statusOf = (tab: CdpTab) => tab.evaluate<RuntimeStatus>('window.tabfleetVolunteer.status()');
const seq = async () => (await server.api(`/api/jobs/${jobId}`)).body.job.seq as number;
/** Models the job's members loaded, by source (server, peer), as /metrics counts them. */
const modelLoads = async (source: string) => sampleValue(parseSamples((await server.api('/metrics')).text), 'tabfleet_job_model_loads_total', { job_id: jobId, source });

/** When the server logged that `volunteerId` left with a reason matching `why`, after `since`. */
function leftAt(volunteerId: string, why: RegExp, since: number): number | null {
  return logs.find((l) => l.at >= since && l.line.includes(`${volunteerId} left (`) && why.test(l.line))?.at ?? null;
}

/** B is back: a member again, committing syncs of the job. */
async function rejoins(what: string): Promise<void> {
  const before = (await statusOf(b)).syncs;
  await waitFor(`B rejoins after ${what} and commits syncs`, async () => {
    const s = await statusOf(b);
    return s.jobId === jobId && s.syncs >= before + 2;
  }, 120_000, 250);
  const s = await statusOf(b);
  assert.deepEqual(s.held, []);
  assert.equal(s.lastError, null, `B's last error: ${s.lastError}`);
}

before(async () => {
  await ensureBuilt('apps', console.log);
  server = await startTestServer({ log: (line) => logs.push({ at: Date.now(), line }), timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 60_000 } });
  browser = await connectBrowser();
  jobId = (await server.createJob({
    name: 'lifecycle', trust: 'trusted', strategy: 'localsgd', H: 4, hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 1, maxWorkers: 2, targetSteps: 1_000_000, checkpointEvery: 1, evalEverySteps: 1_000_000,
  })).id;
  a = await openPage(browser, `${server.url}/apps/volunteer/`);
  await a.page.evaluate(() => window.tabfleetVolunteer.ready);
  await a.page.click('#contribute');
  bWindow = await openCdpWindow(browser);
  b = await bWindow.open(`${server.url}/apps/volunteer/`, { initScript: FAKE_BATTERY, log: (l) => /error|fail|lost/i.test(l) && console.log(`B ${l}`) });
  await b.evaluate('window.tabfleetVolunteer.ready.then(() => window.tabfleetVolunteer.start())');
  await waitFor('both tabs commit syncs', async () => (await statusOf(b)).syncs >= 2 && (await a.page.evaluate(() => window.tabfleetVolunteer.status()?.syncs ?? 0)) >= 2, 120_000, 250);
});

after(async () => {
  await server?.api(`/api/jobs/${jobId}/stop`, { method: 'POST' }).catch(() => {});
  await bWindow?.close();
  await a?.close();
  await browser?.close();
  await server?.stop();
});

test('a hidden tab keeps training and says so: the page and the worker table show it', { timeout: 180_000 }, async () => {
  other = await bWindow.open('about:blank'); // the window's new front tab hides B, as a volunteer switching tabs would
  assert.equal(await b.evaluate('document.visibilityState'), 'hidden');
  const id = (await statusOf(b)).volunteerId!;
  await waitFor('the worker table shows B as a background tab', async () => {
    const { workers } = (await server.api(`/api/jobs/${jobId}`)).body as { workers: { volunteerId: string; hidden: boolean }[] };
    return workers.some((w) => w.volunteerId === id && w.hidden);
  }, NOTICE_MS, 100);
  assert.match(await b.evaluate<string>('document.querySelector("#stats").textContent'), /in the background: the browser may slow it down or freeze it/);
  const syncs = (await statusOf(b)).syncs;
  await waitFor('B commits syncs while hidden', async () => (await statusOf(b)).syncs >= syncs + 2, 60_000, 250);
  await b.bringToFront();
  await waitFor('the page says B is visible again', async () => !(await statusOf(b)).hidden, NOTICE_MS, 100);
});

test('a frozen tab leaves the job at once, the others go on, and it rejoins when resumed', { timeout: 240_000 }, async () => {
  await other.bringToFront();
  const id = (await statusOf(b)).volunteerId!;
  const frozenAt = Date.now();
  await b.setLifecycleState('frozen');
  await waitFor('the server hears B left because it froze', async () => leftAt(id, /the browser froze the tab/, frozenAt) !== null, NOTICE_MS, 50);
  // While B is frozen A commits syncs alone.
  const seqFrozen = await seq();
  await waitFor('A commits syncs alone while B is frozen', async () => (await seq()) >= seqFrozen + 2, 60_000, 250);
  const fromPeer = () => modelLoads('peer');
  const peerLoadsBefore = await fromPeer();
  await b.setLifecycleState('active');
  await b.bringToFront();
  await rejoins('resume');
  // B loaded the job's model from A, tab to tab over WebRTC (A holds it; the server checked its digest).
  // (More than once when a sync committed while it loaded, and it loaded the next one too.)
  assert.ok((await fromPeer()) >= peerLoadsBefore + 1, `${await fromPeer()} loads from a peer, ${peerLoadsBefore} before B's rejoin`);
});

test('on battery a tab leaves the job unless allowed, and rejoins when plugged in', { timeout: 240_000 }, async () => {
  const id = (await statusOf(b)).volunteerId!;
  const unplugged = Date.now();
  await b.evaluate('window.setCharging(false)');
  await waitFor('the server hears B left on battery', async () => leftAt(id, /the device went on battery power/, unplugged) !== null, NOTICE_MS, 50);
  assert.deepEqual((await statusOf(b)).held, ['on battery']);
  assert.match(await b.evaluate<string>('document.querySelector("#headline").textContent'), /^Paused while this device runs on battery/);
  await b.evaluate('window.setCharging(true)');
  await rejoins('plugging in');
  // Allowed on battery: unplugging changes nothing.
  await b.evaluate('document.querySelector("#allow-battery").click()');
  await b.evaluate('window.setCharging(false)');
  await sleep(1_000);
  assert.deepEqual((await statusOf(b)).held, []);
  assert.equal((await statusOf(b)).jobId, jobId);
});

test('the pause button leaves the job at once and Resume rejoins it', { timeout: 240_000 }, async () => {
  const id = (await statusOf(b)).volunteerId!;
  const pausedAt = Date.now();
  await b.evaluate('document.querySelector("#pause").click()');
  await waitFor('the server hears B left, paused', async () => leftAt(id, /\(paused\)/, pausedAt) !== null, NOTICE_MS, 50);
  assert.equal(await b.evaluate('document.querySelector("#headline").textContent'), 'Paused. Nothing is running.');
  await sleep(1_500);
  assert.equal((await statusOf(b)).jobId, null, 'a paused tab is offered no work');
  await b.evaluate('document.querySelector("#pause").click()');
  await rejoins('resume');
});

test('a lost GPU device: the tab leaves, recreates the device and rejoins with the job\'s model', { timeout: 240_000 }, async () => {
  const id = (await statusOf(b)).volunteerId!;
  const lostAt = Date.now();
  await b.evaluate('window.tabfleetVolunteer.loseDevice()');
  await waitFor('the server hears B lost its GPU device', async () => leftAt(id, /GPU device lost \(destroyed/, lostAt) !== null, NOTICE_MS, 50);
  await rejoins('recreating its device');
});

test('a closed tab tells the server as it goes', { timeout: 60_000 }, async () => {
  const id = (await statusOf(b)).volunteerId!;
  const closedAt = Date.now();
  await b.close();
  // Its pagehide sends `leave`; on a loaded machine the renderer may be gone before that leaves the
  // socket, and then the server sees the connection close: either way at once, not at a timeout.
  await waitFor('the server hears B left', async () => leftAt(id, /\(pagehide\)|\(disconnected \(/, closedAt) !== null, NOTICE_MS, 50);
  const seqClosed = await seq();
  await waitFor('A goes on alone', async () => (await seq()) >= seqClosed + 2, 60_000, 250);
});
