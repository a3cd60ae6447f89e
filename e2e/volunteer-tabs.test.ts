// The real path end to end: the real server, three headless Chromium tabs on the volunteer page
// (the Contribute button), WebGPU in each tab's Web Worker, WebRTC links between every two tabs
// signaled through the server. The job trains, and after every sync all tabs hold identical parameters.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { ensureBuilt, connectBrowser, openPage, type OpenedPage } from '@tabfleet/headless';
import type { Browser } from 'playwright-core';

let server: TestServer;
let browser: Browser;
const tabs: OpenedPage[] = [];
before(async () => {
  await ensureBuilt('apps', console.log);
  // Every sync replicates a unit, so redundant recompute runs in the tabs' engine workers.
  server = await startTestServer({ timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 }, replicationRate: { probation: 1, trusted: 1 } });
  browser = await connectBrowser();
});
after(async () => {
  for (const t of tabs) await t.close().catch(() => {});
  await browser?.close();
  await server?.stop();
});

test('three volunteer tabs train one job over WebRTC with identical parameters after every sync', { timeout: 10 * 60_000 }, async () => {
  const counter = async (name: string) => Number(new RegExp(`^tabfleet_${name}_total (\\d+)$`, 'm').exec((await server.api('/metrics')).text)?.[1] ?? 0);
  const validatedBefore = await counter('rounds_validated');
  const agreedBefore = await counter('replicas_agreed');
  const job = await server.createJob({
    preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 8, hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 3, maxWorkers: 3, targetSteps: 64, checkpointEvery: 4,
  });
  for (let i = 0; i < 3; i++) {
    const tab = await openPage(browser, `${server.url}/apps/volunteer/`, { log: (l) => /error|fail|refused/i.test(l) && console.log(`[tab ${i}] ${l}`) });
    tabs.push(tab);
    const info = await tab.page.evaluate(() => window.tabfleetVolunteer.ready);
    assert.equal(info?.kind, 'webgpu');
    await tab.page.click('#contribute');
  }
  await waitFor('the job is done', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 8 * 60_000, 1000);
  const done = (await server.api(`/api/jobs/${job.id}`)).body.job;
  // Auto pacing (the default): the server picks each sync's H from the tabs' paces and the exchange
  // times, members stop at the round's budget, and the syncs before the target are cut to end on it.
  assert.equal(done.spec.pacing, 'auto');
  assert.equal(done.step, 64);
  const rounds = (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { outcome: string; detail: string; members: string[]; mode: string }[];
  const committed = rounds.filter((r) => r.outcome === 'committed');
  assert.ok(committed.length >= 3 && committed.length === done.seq, `${committed.length} syncs`);
  // An untrusted job (the default): robust group averaging over all-to-all WebRTC links.
  assert.ok(committed.every((r) => r.mode === 'group' && r.members.length === 3), 'group rounds over WebRTC, all three tabs');
  assert.ok(committed.every((r) => /^[0-9a-f]{16}$/.test(r.detail)), `one checksum per sync: ${committed.map((r) => r.detail).join(' ')}`);
  // Every group round had parts recomputed by validators (Group.validate over the same links) before it committed.
  const validated = (await counter('rounds_validated')) - validatedBefore;
  assert.ok(validated >= committed.length, `${validated} rounds validated`);
  // Units recomputed on a second model in another tab's engine worker agreed with their originals.
  const agreed = (await counter('replicas_agreed')) - agreedBefore;
  assert.ok(agreed >= 3, `${agreed} replicated units agreed`);
  assert.equal(await counter('replicas_disagreed'), 0);
  for (const t of tabs) {
    const s = await t.page.evaluate(() => window.tabfleetVolunteer.status());
    assert.equal(s?.syncs, committed.length);
    assert.ok((s?.bytesSent ?? 0) > committed.length * 500_000, 'model deltas went over the data channels');
    assert.equal(s?.lastError, null);
    assert.deepEqual(t.errors, []);
  }
  const metrics = (await server.api(`/api/jobs/${job.id}/metrics`)).body.points as { accuracy: number | null }[];
  const acc = metrics.filter((p) => p.accuracy !== null).at(-1)?.accuracy ?? 0;
  console.log(`3 tabs, 64 steps of auto-paced LocalSGD in ${committed.length} syncs: test accuracy ${(100 * acc).toFixed(2)}%`);
  assert.ok(acc > 0.7, `the model learned (${acc})`);
});
