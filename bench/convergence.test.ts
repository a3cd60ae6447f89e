// `npm run bench -- convergence --quick` end to end (dispatcher, build, headless Chromium, in-page
// workers over the in-memory transport) into a temporary file, then the JSON's shape, the validation
// split, a level of accuracy a broken trainer cannot reach, and the summary's ratios. Accuracy goals
// live in the full run's JSON (and e2e/distributed-training.test.ts), not here.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-convergence-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run bench -- convergence --quick writes a complete convergence JSON', { timeout: 10 * 60_000 }, async (t) => {
  const out = join(dir, 'convergence.json');
  assert.equal(await runBench(['convergence', '--quick', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'convergence');
  assert.equal(r.quick, true);
  assert.match(r.adapter, /webgpu/);
  assert.equal(r.tuning, null, 'quick mode runs the untuned starting settings and says so');
  for (const link of ['unlimited', 'capped']) {
    for (const v of ['ddp/none', 'ddp/dgc', 'diloco/none', 'diloco/dgc']) {
      const x = r.results.find((y: any) => y.link === link && `${y.config.strategy}/${y.config.compression}` === v);
      const where = `${link} ${v}`;
      assert.ok(x, where);
      assert.ok(x.steps > 0 && x.bytesPerWorker > 0 && x.wallMs > 0 && x.testCount === 10_000, where);
      // The validation split is held out of training, and the evaluations during the run read it.
      assert.equal(x.validationCount, 5000, where);
      assert.equal(x.trainCount, 55_000, where);
      assert.ok(x.evals.length > 0 && x.evals.every((e: any) => e.on === 'validation'), `${where}: evaluations on the validation subset`);
      // Quick mode measured 67–74% on the test set after 10–16 steps (2 cores, shared machine); chance
      // is 10%, and a trainer that does not apply or average its updates stays near it.
      assert.ok(x.finalAccuracy > 0.5, `${where} learned (${x.finalAccuracy})`);
      assert.ok(x.finalValidationAccuracy > 0.5 && Math.abs(x.finalValidationAccuracy - x.finalAccuracy) < 0.06, `${where}: validation ${x.finalValidationAccuracy} vs test ${x.finalAccuracy}`);
      // A capped run only counts the target when the whole test set confirmed it.
      if (x.msToTarget !== null) assert.ok(x.confirmations.some((c: any) => c.testAccuracy >= r.target && c.wallMs === x.msToTarget), where);
    }
  }
  for (const c of r.cells) {
    assert.deepEqual(c.seeds, [1], `${c.link} ${c.variant}: quick mode runs one seed`);
    assert.ok(c.testAccuracy.min <= c.testAccuracy.median && c.testAccuracy.median <= c.testAccuracy.max);
    assert.equal(c.msToTarget === null, c.link === 'unlimited');
  }
  const cell = (link: string, v: string) => r.cells.find((c: any) => c.link === link && c.variant === v);
  assert.equal(r.summary.dgc_bytes_reduction, cell('unlimited', 'ddp/none').bytesPerWorker.median / cell('unlimited', 'ddp/dgc').bytesPerWorker.median);
  assert.ok(r.summary.dgc_bytes_reduction > 4, `DGC moves far fewer bytes even during warm-up (${r.summary.dgc_bytes_reduction})`);
  assert.equal(typeof r.summary.dgc_accuracy_drop_pts, 'number');
  // The whole capped speedup is DiLoCo's part times DGC's part.
  const s = r.summary;
  assert.ok(Math.abs(s.diloco_dgc_speedup_capped - s.diloco_speedup_capped * s.dgc_over_dense_diloco_speedup_capped) < 1e-9 * s.diloco_dgc_speedup_capped);
  assert.equal(s.dgc_over_dense_diloco_speedup_capped, cell('capped', 'diloco/none').msToTarget.median / cell('capped', 'diloco/dgc').msToTarget.median);
});
