// `npm run bench -- convergence --quick` end to end (dispatcher, build, headless Chromium, in-page
// workers over the in-memory transport) into a temporary file, then the JSON's shape and summary.
// Accuracy goals live in the full run's JSON (and e2e/distributed-training.test.ts), not here.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-convergence-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run bench -- convergence --quick writes a complete convergence JSON', { timeout: 10 * 60_000 }, async (t) => {
  const out = join(dir, 'convergence.json');
  assert.equal(await runBench(['convergence', '--quick', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.equal(r.benchmark, 'convergence');
  assert.equal(r.quick, true);
  assert.match(r.adapter, /webgpu/);
  for (const link of ['unlimited', 'capped']) {
    for (const v of ['ddp/none', 'ddp/dgc', 'diloco/none', 'diloco/dgc']) {
      const x = r.results.find((y: any) => y.link === link && `${y.config.strategy}/${y.config.compression}` === v);
      assert.ok(x, `${link} ${v}`);
      assert.ok(x.steps > 0 && x.bytesPerWorker > 0 && x.wallMs > 0 && x.testCount === 10_000, `${link} ${v}`);
      assert.ok(x.finalAccuracy > 0.1, `${link} ${v} learned something (${x.finalAccuracy})`);
    }
  }
  const dense = r.results.find((y: any) => y.link === 'unlimited' && y.config.strategy === 'ddp' && y.config.compression === 'none');
  const dgc = r.results.find((y: any) => y.link === 'unlimited' && y.config.strategy === 'ddp' && y.config.compression === 'dgc');
  assert.equal(r.summary.dgc_bytes_reduction, dense.bytesPerWorker / dgc.bytesPerWorker);
  assert.ok(r.summary.dgc_bytes_reduction > 4, `DGC moves far fewer bytes even during warm-up (${r.summary.dgc_bytes_reduction})`);
  assert.equal(typeof r.summary.dgc_accuracy_drop_pts, 'number');
});
