// The volunteer page uses the ICE servers the server sends with the job: two headless Chromium tabs
// on a server with a TURN server (a real coturn in REST-API mode) train a ring job through coturn,
// which allocates a relay under each tab's own username ("<expiry>:<volunteer id>"): it does so only
// for the credentials the page handed its RTCPeerConnections (simple-peer's `config`). On loopback
// the host candidates connect within milliseconds and Chromium then stops gathering before its relay
// phase, so the tabs' RTCPeerConnection is wrapped to gather relay candidates only (as behind a
// network where nothing but the relay gets through); the ICE servers are still the page's. The tabs
// read their links' selected candidate pairs from Chromium's getStats() and report them: the server
// sees every link relayed through TURN over UDP. Only 127.0.0.1.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCoturn, startTestServer, waitFor, type Coturn, type TestServer } from '@tabfleet/server/testing';
import { ensureBuilt, connectBrowser, openPage, type OpenedPage } from '@tabfleet/headless';
import type { Browser } from 'playwright-core';
import type { LinkSummary, WorkerRow } from '@tabfleet/protocol';

const SECRET = 'tabs-turn-shared-secret-0123456789';
let coturn: Coturn;
let server: TestServer;
let browser: Browser;
const tabs: OpenedPage[] = [];
before(async () => {
  await ensureBuilt('apps', console.log);
  coturn = await startCoturn(SECRET);
  server = await startTestServer({ ice: { turn: [coturn.url], turnSecret: SECRET }, timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 } });
  browser = await connectBrowser();
});
after(async () => {
  for (const t of tabs) await t.close().catch(() => {});
  await browser?.close();
  await server?.stop();
  coturn?.stop();
});

test('volunteer tabs open their links with the TURN credentials the server issued them', { timeout: 8 * 60_000 }, async () => {
  const job = await server.createJob({
    preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 2, maxWorkers: 2, targetSteps: 10_000, trust: 'trusted',
  });
  for (let i = 0; i < 2; i++) {
    const tab = await openPage(browser, `${server.url}/apps/volunteer/`, {
      log: (l) => /error|fail|refused/i.test(l) && console.log(`[tab ${i}] ${l}`),
      // No named function inside: the script is sent as its source text, and tsx would wrap a named one in a helper the page lacks.
      initScript: () => {
        const Native = RTCPeerConnection;
        (window as { RTCPeerConnection: unknown }).RTCPeerConnection = function (config?: RTCConfiguration) {
          return new Native({ ...config, iceTransportPolicy: 'relay' });
        };
        window.RTCPeerConnection.prototype = Native.prototype;
      },
    });
    tabs.push(tab);
    await tab.page.evaluate(() => window.tabfleetVolunteer.ready);
    await tab.page.click('#contribute');
  }
  const rounds = async () => (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { mode: string; outcome: string }[];
  await waitFor('two ring syncs commit', async () => (await rounds()).filter((r) => r.mode === 'ring' && r.outcome === 'committed').length >= 2, 6 * 60_000, 1000)
    .catch((e: Error) => assert.fail(`${e.message}\nserver log:\n${server.logTail()}\ncoturn log:\n${coturn.log().slice(-3000)}`));
  assert.deepEqual((await rounds()).filter((r) => r.mode === 'star'), [], 'no star round: the ring went through the relay');
  for (const t of tabs) {
    const id = (await t.page.evaluate(() => window.tabfleetVolunteer.status()))?.volunteerId;
    assert.ok(id, 'the tab has a volunteer id');
    await waitFor(`coturn allocates a relay for ${id}`, () => new RegExp(`user <\\d+:${id}>: incoming packet ALLOCATE processed, success`).test(coturn.log()), 60_000, 250)
      .catch((e: Error) => assert.fail(`${e.message}\ncoturn log:\n${coturn.log().slice(-3000)}`));
  }
  // What Chromium's getStats() said of the tabs' links, as the server keeps it.
  await waitFor('both tabs report their link', async () => ((await server.api(`/api/jobs/${job.id}`)).body.workers as WorkerRow[]).every((w) => w.links?.length === 1), 60_000, 250);
  const { job: summary, workers } = (await server.api(`/api/jobs/${job.id}`)).body as { job: { links: LinkSummary }; workers: WorkerRow[] };
  for (const w of workers) {
    const [l] = w.links!;
    assert.deepEqual({ local: l.local, relayProtocol: l.relayProtocol }, { local: 'relay', relayProtocol: 'udp' }, JSON.stringify(l));
    assert.ok(l.rttMs === null || l.rttMs >= 0, JSON.stringify(l));
  }
  assert.deepEqual([summary.links.total, summary.links.relayed, summary.links.relayProtocols.udp], [1, 1, 1]);
  assert.ok(!server.logTail(10_000).includes(SECRET));
});
