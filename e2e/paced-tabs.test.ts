// Unequal volunteer tabs in a paced job, through the real server, WebRTC and the dashboard: one tab is
// opened with ?slowdown=4 (it sleeps three times its compute). The server measures each tab's pace and
// gives the slow one fewer local steps; the dashboard's worker table shows every tab's pace, steps and
// share of the samples, and the job page the predicted sync time beside the actual.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { OpenedPage } from '@tabfleet/headless';
import type { WorkerRow } from '@tabfleet/protocol';
import { waitFor } from '@tabfleet/server/testing';
import { appsSession } from './apps-session';

const session = appsSession();

test('a tab 4× slower gets fewer steps in a paced job, and the dashboard shows each tab\'s pace and share', { timeout: 6 * 60_000 }, async () => {
  const job = await session.server.createJob({
    name: 'paced tabs', trust: 'trusted', strategy: 'localsgd', H: 8, pacing: 'paced', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 2, maxWorkers: 2, targetSteps: 1_000_000, evalEverySteps: 1_000_000, checkpointEvery: 1_000,
  });
  const tabs: OpenedPage[] = [];
  for (const query of ['', '?slowdown=4']) {
    const t = await session.open(`${session.server.url}/apps/volunteer/${query}${query ? '&' : '?'}job=${job.id}`);
    await t.page.evaluate(() => window.tabfleetVolunteer.ready);
    await t.page.click('#contribute');
    tabs.push(t);
  }
  const dash = await session.open(`${session.server.url}/apps/dashboard/#token=test-token`);
  await dash.page.goto(`${session.server.url}/apps/dashboard/#/jobs/${job.id}`);
  try {
    const rows = async () => (await session.server.api(`/api/jobs/${job.id}`)).body.workers as WorkerRow[];
    const idOf = async (i: number) => (await tabs[i].page.evaluate(() => window.tabfleetVolunteer.status()?.volunteerId)) as string;
    // The first sync's paces hold the first steps' shader compiles (the fast tab's most): a later
    // sync's measurement replaces them (protocol's nextPace), and only then is the slowed tab slower.
    await waitFor('the server has measured the slow tab slower and gives it fewer steps', async () => {
      const [fast, slow] = await Promise.all([idOf(0), idOf(1)]).then(async (ids) => { const r = await rows(); return ids.map((id) => r.find((w) => w.volunteerId === id)?.pace); });
      return !!fast?.msPerStep && !!slow?.msPerStep && slow.msPerStep > 2 * fast.msPerStep && slow.share !== null && slow.share < 0.4 && slow.steps < fast.steps;
    }, 4 * 60_000, 500);
    const [fastId, slowId] = [await idOf(0), await idOf(1)];
    const r = await rows();
    const fast = r.find((w) => w.volunteerId === fastId)!.pace!, slow = r.find((w) => w.volunteerId === slowId)!.pace!;
    console.log(`fast tab ${fast.msPerStep} ms/step, ${fast.steps} steps, share ${fast.share}; slow tab ${slow.msPerStep} ms/step, ${slow.steps} steps, share ${slow.share}`);
    assert.ok(slow.msPerStep! > 2 * fast.msPerStep!, 'the slowed tab measures slower');
    assert.ok(fast.steps >= 8 && slow.share! < 0.4);
    await waitFor('the dashboard shows the pace and the predicted sync time', async () => {
      const cells = await dash.page.$$eval('#workers [data-pace]', (cs) => cs.map((c) => c.textContent ?? ''));
      return cells.filter((c) => / ms\/step · \d+ steps · \d+%$/.test(c)).length === 2 && /^Sync time: .*last predicted .*, took /.test((await dash.page.textContent('#sync-time')) ?? '');
    }, 60_000, 500);
    await session.shot(dash.page, 'dashboard-paced');
    for (const t of tabs) assert.deepEqual(t.errors, []);
  } finally {
    await session.server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
