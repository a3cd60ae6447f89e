// What a quick run of the DGC-under-CenteredClip measurement (byzantine-dgc.ts) must show (child
// processes, 16 CPU workers per run in one group averaging by centered clip, dense and DGC deltas, the
// control under the ring's mean, and the validation sweep): the report's shape, that the DGC runs did
// send sparse payloads (far fewer bytes) and that its drops, the sweep's choice, goal and verdict
// follow from the runs. The accuracy goal is the full run's, not checked here. bench/byzantine.test.ts
// checks the report of its quick run (measured once in the suite, not again on its own).
import assert from 'node:assert/strict';
import type { JobSettings } from './byzantine-config';
import { DGC_ROBUST_GOAL_PTS, DGC_SPARSITY, VALIDATION_SPARSITIES, type DgcRobustReport } from './byzantine-dgc';

export function checkQuickDgcReport(r: DgcRobustReport, job: JobSettings): void {
  assert.equal(r.quick, true);
  assert.equal(r.rule, 'centered-clip');
  assert.equal(r.workers, 16);
  // The sweep's choice, which the test-split runs use.
  const chosen = r.validation!.chosen;
  assert.equal(r.sparsity, chosen);
  assert.deepEqual(r.runs.map((x) => `${x.split} ${x.payloads} ${x.sparsity} ${x.averaging} ${x.seed} ${x.syncs}`).sort(), [
    'test dense null centered-clip 1 2', 'test dense null centered-clip 1 4', 'test dense null mean 1 2',
    `test dgc ${chosen} centered-clip 1 2`, `test dgc ${chosen} centered-clip 1 4`, `test dgc ${chosen} mean 1 2`,
    'validation dense null centered-clip 1 2', ...VALIDATION_SPARSITIES.map((s) => `validation dgc ${s} centered-clip 1 2`),
  ].sort());
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
  assert.equal(r.validation?.chosenIsDefault, chosen === DGC_SPARSITY);
  assert.equal(r.goal, DGC_ROBUST_GOAL_PTS);
  assert.equal(r.met, r.dgc_robust_accuracy_drop_pts <= 0.5 && r.validation!.chosenIsDefault);
  assert.match(r.description, /one untrusted group of 16 by centered-clip/);
}
