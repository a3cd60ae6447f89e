// What the server and the dashboard see of the paths volunteers' links took. Three volunteers in Node
// (the worker runtime, real WebRTC over @roamhq/wrtc, on 127.0.0.1) in a ring of three, every pair
// linked; a real coturn is the server's TURN server. One volunteer may only relay
// (`iceTransportPolicy: 'relay'`, as behind a network where nothing else gets through), the other two
// take any candidate. Each reads its links' selected candidate pairs from getStats() and reports
// them: the API's worker rows and job summary, /metrics and the dashboard's worker table (headless
// Chromium) show the two links to the relaying volunteer relayed through TURN over UDP, and the link
// between the other two direct between host candidates.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { LinkPath, LinkSummary, WorkerRow } from '@tabfleet/protocol';
import { createNodeWebRtcTransport } from '@tabfleet/collective/webrtc-node';
import { connectBrowser, ensureBuilt, openPage, type OpenedPage } from '@tabfleet/headless';
import { parseSamples, sampleValue, startCoturn, startTestServer, waitFor, type Coturn, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';
import { SHOTS } from './apps-session';

const SECRET = 'link-paths-shared-secret-0123456789';
let coturn: Coturn | null = null;
let server: TestServer | null = null;
let browser: Browser | null = null;
const pages: OpenedPage[] = [];
const vols: ReturnType<typeof nodeVolunteer>[] = [];
before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  await ensureBuilt('apps', console.log);
  coturn = await startCoturn(SECRET);
  server = await startTestServer({ ice: { turn: [coturn.url], turnSecret: SECRET }, timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 60_000 } });
  browser = await connectBrowser();
});
after(async () => {
  for (const v of vols) v.runtime.stop();
  for (const p of pages) await p.close().catch(() => {});
  await browser?.close();
  await server?.stop();
  coturn?.stop();
});

test('links relayed through TURN and direct ones reach the API, /metrics and the dashboard\'s worker table', { timeout: 6 * 60_000 }, async () => {
  const s = server!;
  const job = await s.createJob({
    dataset: 'synthetic-blobs', preset: 'mlp-fashion', strategy: 'localsgd', H: 2, pacing: 'fixed',
    hyperparameters: { lr: 0.05, batchSize: 32 }, minWorkers: 3, maxWorkers: 3, targetSteps: 100_000, trust: 'trusted',
  });
  for (let i = 0; i < 3; i++) {
    const policy: RTCIceTransportPolicy = i === 0 ? 'relay' : 'all';
    vols.push(nodeVolunteer(s.url, (self, signaler, iceServers) => createNodeWebRtcTransport({
      self, signaler, connectTimeoutMs: 60_000, rtcConfig: () => ({ iceServers: iceServers(), iceTransportPolicy: policy }),
    }), { jobId: job.id }));
  }
  const read = async () => (await s.api(`/api/jobs/${job.id}`)).body as { job: { links: LinkSummary }; workers: WorkerRow[] };
  await waitFor('every member reports its two links', async () => {
    const { workers } = await read();
    return workers.length === 3 && workers.every((w) => w.links?.length === 2);
  }, 180_000, 250).catch((e: Error) => assert.fail(`${e.message}\nserver log:\n${s.logTail()}\ncoturn log:\n${coturn!.log().slice(-2000)}`));

  const relaying = vols[0].runtime.status.volunteerId!;
  const { job: summary, workers } = await read();
  const linksOf = (id: string) => workers.find((w) => w.volunteerId === id)!.links!;
  for (const l of linksOf(relaying)) {
    assert.equal(l.local, 'relay', JSON.stringify(l));
    assert.equal(l.relayProtocol, 'udp', JSON.stringify(l));
  }
  const others = workers.map((w) => w.volunteerId).filter((id) => id !== relaying);
  const between = (a: string, b: string): LinkPath => linksOf(a).find((l) => l.peer === b)!;
  for (const [a, b] of [[others[0], others[1]], [others[1], others[0]]]) {
    assert.deepEqual({ local: between(a, b).local, remote: between(a, b).remote }, { local: 'host', remote: 'host' }, `${a} → ${b}`);
  }
  for (const w of workers) for (const l of w.links!) assert.ok(l.rttMs === null || l.rttMs >= 0, JSON.stringify(l));
  assert.deepEqual(summary.links, {
    total: 3, direct: 1, relayed: 2, relayedShare: 2 / 3, byKind: { host: 1, srflx: 0, prflx: 0, relay: 2 }, relayProtocols: { udp: 2, tcp: 0, tls: 0 },
  });

  const samples = parseSamples(await (await fetch(`${s.url}/metrics`)).text());
  const gauge = (path: string) => sampleValue(samples, 'tabfleet_job_links', { job_id: job.id, path });
  assert.deepEqual([gauge('host'), gauge('srflx'), gauge('prflx'), gauge('relay')], [1, 0, 0, 2]);
  assert.equal(sampleValue(samples, 'tabfleet_job_relayed_links', { job_id: job.id, protocol: 'udp' }), 2);

  const dash = await openPage(browser!, `${s.url}/apps/dashboard/#token=test-token`, { log: (l) => /error|refused|fail/i.test(l) && console.log(l) });
  pages.push(dash);
  const d = dash.page;
  await d.waitForSelector('#jobs-view:not([hidden])');
  await d.evaluate((id) => {
    location.hash = `#/jobs/${id}`;
  }, job.id);
  await d.waitForSelector('#job-view:not([hidden])');
  // Each row: the volunteer id under its name, and its path cell.
  const cells = () => d.$$eval('#workers tbody tr',
    (rows) => rows.map((r) => [r.querySelector('td .muted')?.textContent ?? '', r.querySelector('[data-path]')?.textContent ?? ''] as [string, string]));
  await waitFor('the worker table shows every member\'s path', async () => (await cells()).filter(([, path]) => path !== '—' && path !== '').length === 3, 60_000, 250);
  const shown = new Map(await cells());
  assert.equal(shown.get(relaying), 'relayed (TURN over udp)');
  for (const id of others) assert.equal(shown.get(id), '1 direct (host), 1 relayed (TURN over udp)', id);
  assert.equal(await d.textContent('#link-summary'), 'Links: 3 between members, 2 relayed (67%): 2 over udp, 1 direct (1 host, 0 through NATs).');
  await d.screenshot({ path: `${SHOTS}/dashboard-link-paths.png`, fullPage: true });
});
