// The DGC-under-CenteredClip measurement in quick mode (child processes, 16 CPU workers per run in one
// group averaging by centered clip, dense and DGC deltas, and the control under the ring's mean): the
// report's shape, that the DGC runs did send sparse payloads (far fewer bytes) and that its drops,
// goal and verdict follow from the runs.
// The accuracy goal is the full run's, not checked here. And the summary's arithmetic over 3 seeds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSettings } from './byzantine';
import { DGC_ROBUST_GOAL_PTS, measureDgcRobust, summarizeDgc, type DgcRunResult } from './byzantine-dgc';

test('quick DGC-under-centered-clip runs: dense and DGC deltas in one group of 16, the drop and verdict from them', { timeout: 8 * 60_000 }, async () => {
  const { job } = jobSettings(true);
  const r = await measureDgcRobust({ quick: true, job, processes: 2 });
  assert.equal(r.quick, true);
  assert.equal(r.rule, 'centered-clip');
  assert.equal(r.workers, 16);
  assert.equal(r.sparsity, 0.99);
  assert.deepEqual(r.runs.map((x) => `${x.payloads} ${x.averaging} ${x.seed} ${x.syncs}`).sort(),
    ['dense centered-clip 1 2', 'dense centered-clip 1 4', 'dense mean 1 2', 'dgc centered-clip 1 2', 'dgc centered-clip 1 4', 'dgc mean 1 2']);
  for (const x of r.runs) {
    assert.equal(x.steps, x.syncs * job.H, `${x.payloads}: steps`);
    assert.equal(x.testCount, 1000);
    // Two syncs train well past chance (10%) either way.
    assert.ok(x.testAccuracy > 0.3, `${x.payloads} ${x.averaging}: test accuracy ${x.testAccuracy}`);
    assert.equal(x.refusedHonest, 0, `${x.payloads} ${x.averaging}: no honest member is refused`);
  }
  // Sparse pairs to the owners (a quarter of the delta, then a sixteenth, in the warm-up), dense-ish aggregates back.
  assert.ok(r.bytes_ratio < 0.6, `DGC sent ${r.bytes_ratio} of the dense bytes`);
  const accuracy = (p: string, a: string, syncs = 2) => r.runs.find((x) => x.payloads === p && x.averaging === a && x.syncs === syncs)!.testAccuracy;
  const [dense, dgc] = [accuracy('dense', 'centered-clip'), accuracy('dgc', 'centered-clip')];
  assert.deepEqual(r.perSeed, [{ seed: 1, dense, dgc }]);
  assert.equal(r.dgc_robust_accuracy_drop_pts, Math.round((dense - dgc) * 1e4) / 100);
  const [meanDense, meanDgc] = [accuracy('dense', 'mean'), accuracy('dgc', 'mean')];
  assert.deepEqual(r.meanControl?.perSeed, [{ seed: 1, dense: meanDense, dgc: meanDgc }]);
  assert.equal(r.meanControl?.dgc_mean_accuracy_drop_pts, Math.round((meanDense - meanDgc) * 1e4) / 100);
  const [longDense, longDgc] = [accuracy('dense', 'centered-clip', 4), accuracy('dgc', 'centered-clip', 4)];
  assert.deepEqual(r.longer, { syncs: 4, perSeed: [{ seed: 1, dense: longDense, dgc: longDgc }], medians: { dense: longDense, dgc: longDgc },
    dgc_robust_accuracy_drop_pts: Math.round((longDense - longDgc) * 1e4) / 100 });
  assert.equal(r.goal, DGC_ROBUST_GOAL_PTS);
  assert.equal(r.met, r.dgc_robust_accuracy_drop_pts <= 0.5);
  assert.match(r.description, /one untrusted group of 16 by centered-clip/);
});

test('the summary takes medians over seeds, the drop in points, and meets the goal at or below it', () => {
  const run = (payloads: 'dense' | 'dgc', seed: number, testAccuracy: number, bytes: number): DgcRunResult => ({
    payloads, averaging: 'centered-clip', seed, syncs: 12, evalExamples: null, steps: 96, testAccuracy, testLoss: 0.5, testCount: 10_000, refusedHonest: 0, bytesPerWorkerPerSync: bytes, wallMs: 1,
  });
  const runs = [run('dense', 1, 0.83, 100), run('dense', 2, 0.831, 100), run('dense', 3, 0.9, 100), run('dgc', 1, 0.825, 20), run('dgc', 2, 0.82, 30), run('dgc', 3, 0.5, 10)];
  const { job } = jobSettings(true);
  const s = summarizeDgc({ quick: false, job }, [1, 2, 3], 12, runs, 5);
  assert.deepEqual(s.medians, { dense: 0.831, dgc: 0.82 });
  assert.equal(s.dgc_robust_accuracy_drop_pts, 1.1);
  assert.equal(s.met, false);
  assert.deepEqual(s.spread.dgc, { median: 0.82, min: 0.5, max: 0.825 });
  assert.equal(s.bytes_ratio, 0.2);
  assert.equal(s.meanControl, null, 'no runs under the mean: no control');
  assert.equal(s.longer, null, 'no runs of another length: no longer pair');
  const close = summarizeDgc({ quick: false, job }, [1, 2, 3], 12, runs.map((x) => (x.payloads === 'dgc' ? { ...x, testAccuracy: x.testAccuracy + 0.006 } : x)), 5);
  assert.equal(close.dgc_robust_accuracy_drop_pts, 0.5);
  assert.equal(close.met, true);
});
