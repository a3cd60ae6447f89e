// The DGC-under-CenteredClip measurement in quick mode (child processes, 16 CPU workers per run in one
// group averaging by centered clip, dense and DGC deltas, the control under the ring's mean, and the
// validation sweep): the report's shape, that the DGC runs did send sparse payloads (far fewer bytes)
// and that its drops, the sweep's choice, goal and verdict follow from the runs.
// The accuracy goal is the full run's, not checked here. And the summary's arithmetic over 3 seeds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSettings } from './byzantine';
import { DGC_ROBUST_GOAL_PTS, measureDgcRobust, summarizeDgc, sweepOf, VALIDATION_SPARSITIES, type DgcRunResult } from './byzantine-dgc';

test('quick DGC-under-centered-clip runs: dense and DGC deltas in one group of 16, the drop and verdict from them', { timeout: 8 * 60_000 }, async () => {
  const { job } = jobSettings(true);
  const r = await measureDgcRobust({ quick: true, job, processes: 2 });
  assert.equal(r.quick, true);
  assert.equal(r.rule, 'centered-clip');
  assert.equal(r.workers, 16);
  // An untrusted job's default, which the test-split runs use.
  assert.equal(r.sparsity, 0.98);
  assert.deepEqual(r.runs.map((x) => `${x.split} ${x.payloads} ${x.sparsity} ${x.averaging} ${x.seed} ${x.syncs}`).sort(), [
    'test dense null centered-clip 1 2', 'test dense null centered-clip 1 4', 'test dense null mean 1 2',
    'test dgc 0.98 centered-clip 1 2', 'test dgc 0.98 centered-clip 1 4', 'test dgc 0.98 mean 1 2',
    'validation dense null centered-clip 1 2', 'validation dgc 0.95 centered-clip 1 2', 'validation dgc 0.98 centered-clip 1 2', 'validation dgc 0.99 centered-clip 1 2',
  ]);
  for (const x of r.runs) {
    assert.equal(x.steps, x.syncs * job.H, `${x.payloads}: steps`);
    assert.equal(x.testCount, 1000);
    // Two syncs train well past chance (10%) either way.
    assert.ok(x.testAccuracy > 0.3, `${x.payloads} ${x.averaging}: test accuracy ${x.testAccuracy}`);
    assert.equal(x.refusedHonest, 0, `${x.payloads} ${x.averaging}: no honest member is refused`);
  }
  // Sparse pairs to the owners (a quarter of the delta, then a sixteenth, in the warm-up), dense-ish aggregates back.
  assert.ok(r.bytes_ratio < 0.6, `DGC sent ${r.bytes_ratio} of the dense bytes`);
  const accuracy = (p: string, a: string, syncs = 2) => r.runs.find((x) => x.split === 'test' && x.payloads === p && x.averaging === a && x.syncs === syncs)!.testAccuracy;
  const [dense, dgc] = [accuracy('dense', 'centered-clip'), accuracy('dgc', 'centered-clip')];
  assert.deepEqual(r.perSeed, [{ seed: 1, dense, dgc }]);
  assert.equal(r.dgc_robust_accuracy_drop_pts, Math.round((dense - dgc) * 1e4) / 100);
  const [meanDense, meanDgc] = [accuracy('dense', 'mean'), accuracy('dgc', 'mean')];
  assert.deepEqual(r.meanControl?.perSeed, [{ seed: 1, dense: meanDense, dgc: meanDgc }]);
  assert.equal(r.meanControl?.dgc_mean_accuracy_drop_pts, Math.round((meanDense - meanDgc) * 1e4) / 100);
  const [longDense, longDgc] = [accuracy('dense', 'centered-clip', 4), accuracy('dgc', 'centered-clip', 4)];
  assert.deepEqual(r.longer, { syncs: 4, perSeed: [{ seed: 1, dense: longDense, dgc: longDgc }], medians: { dense: longDense, dgc: longDgc },
    dgc_robust_accuracy_drop_pts: Math.round((longDense - longDgc) * 1e4) / 100 });
  // The sweep: each candidate against the dense run on the validation split, and its choice.
  const swept = (sparsity: number | null) => r.runs.find((x) => x.split === 'validation' && x.sparsity === sparsity)!.testAccuracy;
  assert.deepEqual(r.validation?.candidates.map((c) => [c.sparsity, c.drop_pts]), VALIDATION_SPARSITIES.map((s) => [s, Math.round((swept(null) - swept(s)) * 1e4) / 100]));
  assert.ok(VALIDATION_SPARSITIES.includes(r.validation!.chosen));
  assert.equal(r.validation?.chosenIsDefault, r.validation?.chosen === 0.98);
  assert.equal(r.goal, DGC_ROBUST_GOAL_PTS);
  assert.equal(r.met, r.dgc_robust_accuracy_drop_pts <= 0.5 && r.validation!.chosenIsDefault);
  assert.match(r.description, /one untrusted group of 16 by centered-clip/);
});

test('the summary takes medians over seeds, the drop in points, and meets the goal at or below it', () => {
  const run = (payloads: 'dense' | 'dgc', seed: number, testAccuracy: number, bytes: number): DgcRunResult => ({
    payloads, averaging: 'centered-clip', seed, syncs: 12, evalExamples: null, sparsity: payloads === 'dgc' ? 0.98 : null, split: 'test', steps: 96,
    testAccuracy, testLoss: 0.5, testCount: 10_000, refusedHonest: 0, bytesPerWorkerPerSync: bytes, wallMs: 1,
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
  assert.equal(close.validation, null, 'no validation runs: no sweep');
});

test('the sweep chooses the sparsest candidate within the goal on validation, else the densest, and says whether it is the default', () => {
  const run = (sparsity: number | null, seed: number, accuracy: number): DgcRunResult => ({
    payloads: sparsity === null ? 'dense' : 'dgc', averaging: 'centered-clip', seed, syncs: 12, evalExamples: null, sparsity, split: 'validation', steps: 96,
    testAccuracy: accuracy, testLoss: 0.5, testCount: 5000, refusedHonest: 0, bytesPerWorkerPerSync: 1, wallMs: 1,
  });
  // Medians: dense 0.84; 99% 0.83 (1 point), 98% 0.836 (0.4), 95% 0.839 (0.1).
  const runs = [1, 2, 3].flatMap((seed) => [run(null, seed, 0.84), run(0.99, seed, 0.83), run(0.98, seed, seed === 3 ? 0.7 : 0.836), run(0.95, seed, 0.839)]);
  const s = sweepOf([1, 2, 3], 12, runs)!;
  assert.deepEqual(s.candidates.map((c) => [c.sparsity, c.drop_pts]), [[0.99, 1], [0.98, 0.4], [0.95, 0.1]]);
  assert.equal(s.chosen, 0.98);
  assert.equal(s.chosenIsDefault, true);
  // Nothing within the goal: the densest.
  const far = sweepOf([1, 2, 3], 12, runs.map((x) => (x.payloads === 'dgc' ? { ...x, testAccuracy: 0.8 } : x)))!;
  assert.equal(far.chosen, 0.95);
  assert.equal(far.chosenIsDefault, false);
  // 99% within the goal: the sparsest, which is not the default.
  const near = sweepOf([1, 2, 3], 12, runs.map((x) => (x.sparsity === 0.99 ? { ...x, testAccuracy: 0.838 } : x)))!;
  assert.equal(near.chosen, 0.99);
  assert.equal(near.chosenIsDefault, false);
});
