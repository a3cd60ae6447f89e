// The DGC-under-CenteredClip summary's arithmetic over 3 seeds, and the validation sweep's choice. A
// quick run's report is checked where bench/byzantine.test.ts measures one (byzantine-dgc-checks.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSettings } from './byzantine';
import { DGC_SPARSITY, summarizeDgc, sweepOf, type DgcRunResult } from './byzantine-dgc';

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

test('the sweep chooses the sparsest candidate within half the goal on validation, else the densest, and says whether it is the default', () => {
  const run = (sparsity: number | null, seed: number, accuracy: number): DgcRunResult => ({
    payloads: sparsity === null ? 'dense' : 'dgc', averaging: 'centered-clip', seed, syncs: 12, evalExamples: null, sparsity, split: 'validation', steps: 96,
    testAccuracy: accuracy, testLoss: 0.5, testCount: 5000, refusedHonest: 0, bytesPerWorkerPerSync: 1, wallMs: 1,
  });
  // Medians over seeds 1-5: dense 0.84; 99% 0.83 (1 point), 98% 0.837 (0.3: within the goal, not half of it), 95% 0.838 (0.2), 90% 0.839 (0.1).
  const accuracies: [number | null, number][] = [[null, 0.84], [0.99, 0.83], [0.98, 0.837], [0.95, 0.838], [0.9, 0.839]];
  const runs = [1, 2, 3, 4, 5].flatMap((seed) => accuracies.map(([sparsity, a]) => run(sparsity, seed, sparsity === 0.95 && seed === 3 ? 0.7 : a)));
  const s = sweepOf(12, runs)!;
  assert.deepEqual(s.seeds, [1, 2, 3, 4, 5]);
  assert.deepEqual(s.candidates.map((c) => [c.sparsity, c.drop_pts]), [[0.99, 1], [0.98, 0.3], [0.95, 0.2], [0.9, 0.1]]);
  assert.equal(s.chosen, 0.95);
  assert.equal(s.chosenIsDefault, DGC_SPARSITY === 0.95);
  // Nothing within the bound: the densest.
  const far = sweepOf(12, runs.map((x) => (x.payloads === 'dgc' ? { ...x, testAccuracy: 0.8 } : x)))!;
  assert.equal(far.chosen, 0.9);
  // 99% within the bound: the sparsest.
  const near = sweepOf(12, runs.map((x) => (x.sparsity === 0.99 ? { ...x, testAccuracy: 0.838 } : x)))!;
  assert.equal(near.chosen, 0.99);
  assert.equal(near.chosenIsDefault, DGC_SPARSITY === 0.99);
});
