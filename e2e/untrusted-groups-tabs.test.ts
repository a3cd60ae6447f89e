// Issue 37's e2e: eight volunteer tabs (real pages, WebGPU, WebRTC) train Fashion-MNIST in an
// untrusted job in checked Moshpit groups of 4, drawn at random by the server every sync, one tab
// multiplying every value it sends to the owners of other parts by 100 on its way out (its data
// channel's send is rewritten in the page). The attacker is removed (its own end reason), no honest
// tab is, the job reaches the accuracy of the same job without the attacker (its seven honest tabs,
// run first), at most a point below it, and the dashboard, a real page in the same browser, shows the groups
// and the fault.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MetricPoint, WorkerRow } from '@tabfleet/protocol';
import { waitFor } from '@tabfleet/server/testing';
import type { OpenedPage } from '@tabfleet/headless';
import { appsSession } from './apps-session';

const TABS = 8;
const GROUP_SIZE = 4;
const SCALE = 100;
/** The accuracy a run reaches: the mean of its evaluations at this step and later. */
const REACHED_FROM_STEP = 160;
/** A group's checks name it: its owners' screening ("its contributions to round N were refused by most owners") or the digests ("round N: …"). */
const REMOVED_FOR_WHAT_IT_SENT = /^(round \d+: |its contributions to round \d+ were refused)/;
// Fixed H, so both runs take the same syncs: 30 of 8 steps (40 before the suite had to fit 30 minutes;
// the two runs were 13 of its 55). The last sync is evaluated (a multiple
// of evalEverySteps) on the whole test set, 10,000 images. Accuracy follows the syncs more than the
// steps (H 20: 82.7% at 200 steps, H 32: 83.2% at 320, H 8: 84.1-84.6% at 200), and at 25 syncs the
// attacked run (7 members; the attacker's group fails each sync it comes back to) ended 0.1-0.9
// points below the clean one: 40 take both further up the curve, where a sync lost counts for less
// (clean with 8 tabs 84.72, 85.69, 85.19%; attacked 84.75, 85.22, 84.31% in three runs: 0.03, 0.47,
// 0.88 below). Clean runs alone differed by up to a point: each sync's groups come from the server's
// own randomness, and the evaluated model is one group's. So the job without the attacker is its
// seven honest tabs (the attacked job is seven once the attacker is out), and the accuracy a job
// reaches is the mean of its evaluations from step 160 on (every 5 syncs: 3 of them), not one sync's.
// Those are the only syncs whose evaluators read the test set (evalFromStep): the checkpoints before
// are checked by checksum alone. Evaluating steps 40-120 too cost about 10 s a sync (three tabs
// reading 10,000 images while the others' training waited in the one GPU process).
const JOB = {
  preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 8, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
  trust: 'untrusted', groupSize: GROUP_SIZE, seed: 7, targetSteps: 240, evalEverySteps: 40, evalFromStep: REACHED_FROM_STEP, checkpointEvery: 5,
  // Seven keep the job going once the attacker is out.
  minWorkers: TABS - 1, maxWorkers: TABS,
} as const;

const session = appsSession();

/** Runs in the attacker's page: scales the f32 values of every group scatter frame it sends (the factor is set on window first). */
function scaleScatterFrames(): void {
  const send = RTCDataChannel.prototype.send as (this: RTCDataChannel, data: unknown) => void;
  const w = window as unknown as { attackScale: number; scatterFramesScaled: number };
  w.scatterFramesScaled = 0;
  RTCDataChannel.prototype.send = function (this: RTCDataChannel, data: string | Blob | ArrayBuffer | ArrayBufferView) {
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
    // Header byte 1 is the frame kind (8: group scatter), byte 2 the dtype (1: f32); values from byte 28.
    if (bytes && bytes.byteLength > 28 && bytes[1] === 8 && bytes[2] === 1) {
      const copy = bytes.slice();
      const values = new Float32Array(copy.buffer, 28, (copy.byteLength - 28) / 4);
      for (let i = 0; i < values.length; i++) values[i] *= w.attackScale;
      w.scatterFramesScaled++;
      return send.call(this, copy);
    }
    return send.call(this, data);
  };
}

interface Run {
  jobId: string;
  tabs: OpenedPage[];
  ids: string[];
  /** What each tab's runtime logged about its jobs ending. */
  ended: string[][];
  /** The mean test accuracy of its evaluations from REACHED_FROM_STEP on. */
  accuracy: number;
}

/**
 * `count` fresh tabs (new identities: no standing from an earlier job) open and click Contribute at
 * once, and train a fresh job to its end; with `attack`, tab 0 is the attacker. `whileRunning` runs
 * once they are in.
 */
async function runJob(name: string, count: number, attack: boolean, whileRunning: (jobId: string) => Promise<void> = async () => {}): Promise<Run> {
  const started = Date.now();
  const job = await session.server.createJob({ ...JOB, name });
  const ended: string[][] = Array.from({ length: count }, () => []);
  const tabs = await Promise.all(Array.from({ length: count }, async (_, i) => {
    const attacker = attack && i === 0;
    const tab = await session.open(`${session.server.url}/apps/volunteer/`, {
      initScript: attacker ? scaleScatterFrames : undefined,
      log: (l) => {
        const end = /job \S+ ended: (.*)/.exec(l);
        if (end) ended[i].push(end[1]);
        if (/error|fail|refused|evict/i.test(l)) console.log(`[${name} tab ${i}] ${l}`);
      },
    });
    if (attacker) await tab.page.evaluate((scale) => ((window as unknown as { attackScale: number }).attackScale = scale), SCALE);
    await tab.page.evaluate(() => window.tabfleetVolunteer.ready);
    return tab;
  }));
  await Promise.all(tabs.map((t) => t.page.click('#contribute')));
  await waitFor('every tab has a volunteer id', async () => (await Promise.all(tabs.map((t) => t.page.evaluate(() => window.tabfleetVolunteer.status()?.volunteerId))))
    .every(Boolean), 120_000, 250);
  const ids = await Promise.all(tabs.map(async (t) => (await t.page.evaluate(() => window.tabfleetVolunteer.status()))!.volunteerId!));
  await whileRunning(job.id);
  await waitFor(`${name}: the job is done`, async () => (await session.server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 12 * 60_000, 1000);
  const points = (await session.server.api(`/api/jobs/${job.id}/metrics`)).body.points as MetricPoint[];
  const evaluated = points.filter((p) => p.accuracy !== null).sort((a, b) => a.step - b.step);
  const last = evaluated.at(-1);
  assert.equal(last?.step, JOB.targetSteps, `${name}: the last sync was evaluated: ${JSON.stringify(evaluated)}`);
  // Evaluated on the schedule only: a checkpoint for a joiner (the attacker coming back) reads no test set.
  assert.ok(evaluated.every((p) => p.step >= REACHED_FROM_STEP), `${name}: no evaluation before step ${REACHED_FROM_STEP}: ${JSON.stringify(evaluated)}`);
  const scheduled = evaluated.filter((p) => p.step >= REACHED_FROM_STEP && p.step % JOB.evalEverySteps === 0);
  const late = [...new Map(scheduled.map((p) => [p.step, p.accuracy!])).values()];
  assert.equal(late.length, (JOB.targetSteps - REACHED_FROM_STEP) / JOB.evalEverySteps + 1, `${name}: evaluations from step ${REACHED_FROM_STEP}: ${JSON.stringify(evaluated)}`);
  const accuracy = late.reduce((a, b) => a + b, 0) / late.length;
  const seconds = (Date.now() - started) / 1000;
  // Where the time went: opening and loading the tabs up to the first sync, then the syncs.
  const rounds = (await session.server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { seq: number; startedAt: number; endedAt: number | null }[];
  const firstSync = Math.min(...rounds.map((r) => r.startedAt)), lastEnd = Math.max(...rounds.map((r) => r.endedAt ?? 0));
  console.log(`${name}: test accuracy ${late.map((a) => (100 * a).toFixed(2)).join(', ')}% from step ${REACHED_FROM_STEP} (10,000 test images), ${seconds.toFixed(0)} s: `
    + `${((firstSync - started) / 1000).toFixed(0)} s to the first sync, ${((lastEnd - firstSync) / 1000).toFixed(0)} s for ${rounds.length} sync records`);
  return { jobId: job.id, tabs, ids, ended, accuracy };
}

const workersOf = async (jobId: string) => (await session.server.api(`/api/jobs/${jobId}`)).body.workers as WorkerRow[];

async function closeTabs(run: Run): Promise<void> {
  for (const t of run.tabs) await t.close();
}

test('eight tabs in groups of 4, one scaling what it sends by 100: it is removed, the job reaches the clean run\'s accuracy, the dashboard shows groups and faults',
  { timeout: 30 * 60_000 }, async () => {
    const clean = await runJob('without the attacker', TABS - 1, false);
    const cleanRows = await workersOf(clean.jobId);
    assert.deepEqual(cleanRows.filter((w) => w.faults).map((w) => `${w.volunteerId}: ${w.lastFault}`), [], 'nobody is removed from the clean run');
    for (const t of clean.tabs) assert.deepEqual(t.errors, []);
    await closeTabs(clean);

    // The dashboard, signed in by the link's token, watches the attacked job from its start.
    const dash = await session.open(`${session.server.url}/apps/dashboard/#token=test-token`);
    const d = dash.page;
    await d.waitForSelector('#jobs-view:not([hidden])');
    let attackedJob = '';
    const attacked = await runJob('attacked', TABS, true, async (jobId) => {
      attackedJob = jobId;
      await d.evaluate((id) => (location.hash = `#/jobs/${id}`), jobId);
      await d.waitForSelector('#job-view:not([hidden])');
      // Live: the first committed sync's groups appear while the job runs (job:workers).
      await d.waitForSelector('#groups li[data-group]', { timeout: 5 * 60_000 });
    });
    const [attackerId, ...honestIds] = attacked.ids;
    const scaled = await attacked.tabs[0].page.evaluate(() => (window as unknown as { scatterFramesScaled: number }).scatterFramesScaled);
    assert.ok(scaled > 0, 'the attacker took part and sent scaled frames');

    // Removed: its own tab was told why, and the server's rows agree; no honest tab has a fault.
    const rows = await workersOf(attackedJob);
    const attackerRow = rows.find((w) => w.volunteerId === attackerId)!;
    console.log(`the attacker's end: ${attacked.ended[0].join(' | ')}; its faults: ${attackerRow.faults}, the last: ${attackerRow.lastFault}`);
    assert.ok(attacked.ended[0].some((reason) => REMOVED_FOR_WHAT_IT_SENT.test(reason)), `the attacker was removed for what it sent: ${attacked.ended[0].join(' | ')}`);
    assert.ok((attackerRow.faults ?? 0) >= 1 && REMOVED_FOR_WHAT_IT_SENT.test(attackerRow.lastFault ?? ''), JSON.stringify(attackerRow));
    assert.equal(attackerRow.syncs, 0, 'no group with the attacker committed');
    const honestRows = rows.filter((w) => honestIds.includes(w.volunteerId));
    assert.equal(honestRows.length, TABS - 1);
    // (At the job's end every member left: `job done`.)
    assert.deepEqual(honestRows.filter((w) => w.faults || w.leftReason !== 'job done').map((w) => `${w.volunteerId}: ${w.lastFault ?? w.leftReason}`), [], 'no honest tab removed');
    for (const [i, reasons] of attacked.ended.entries()) if (i > 0) assert.ok(reasons.every((r) => /reached \d+ steps/.test(r)), `tab ${i}: ${reasons.join(' | ')}`);
    for (const t of attacked.tabs.slice(1)) assert.deepEqual(t.errors, []);

    // The same job without the attacker reached this accuracy: the attacked run is at most a point below it.
    // (Not above it too: the two runs' groups and timing differ, and an attacked run 1.03 points above its
    // clean run, 84.23% against 83.20%, failed a two-sided check that is no part of what the attack could do.)
    console.log(`accuracy reached: without the attacker ${(100 * clean.accuracy).toFixed(2)}%, attacked ${(100 * attacked.accuracy).toFixed(2)}%`);
    assert.ok(attacked.accuracy >= clean.accuracy - 0.01, `clean ${clean.accuracy}, attacked ${attacked.accuracy}`);

    // The dashboard: the last sync's groups (at most 4 honest members each), and the attacker's fault with its reason.
    await waitFor('the dashboard shows the fault', async () => (await d.$(`#faults li[data-fault="${attackerId}"]`)) !== null, 30_000, 250);
    const fault = (await d.textContent(`#faults li[data-fault="${attackerId}"]`)) ?? '';
    assert.match(fault, new RegExp(`\\(${attackerId}\\): \\d+ faults?, the last: .*round \\d+`));
    assert.equal((await d.$$('#faults li')).length, 1, 'only the attacker has a fault');
    const groups = await d.$$eval('#groups li[data-group]', (lis) => lis.map((li) => (li as HTMLElement).dataset.members!.split(' ')));
    const caption = (await d.textContent('#groups-caption')) ?? '';
    console.log(`dashboard: ${caption} ${groups.map((g) => `[${g.join(', ')}]`).join(' ')}; ${fault}`);
    assert.match(caption, new RegExp(`^Sync ${JOB.targetSteps / JOB.H}: [12] of 2 groups committed\\.`), 'the last sync\'s groups');
    assert.ok(groups.length >= 1 && groups.every((g) => g.length >= 2 && g.length <= GROUP_SIZE && g.every((id) => honestIds.includes(id))), JSON.stringify(groups));
    await session.shot(d, 'dashboard-groups-faults');
    assert.deepEqual(dash.errors, []);
    await closeTabs(attacked);
  });
