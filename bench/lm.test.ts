// `npm run bench -- lm --quick` end to end (dispatcher, build, headless Chromium, in-page GPT workers
// over the in-memory transport, the fortunes corpus) into a temporary file, then the JSON's shape, a
// loss a broken trainer cannot reach, the target rule and the summary's ratios. The goals live in the
// full run's JSON (bench/results/lm.json), not here.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-lm-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run bench -- lm --quick writes a complete lm JSON', { timeout: 10 * 60_000 }, async (t) => {
  const out = join(dir, 'lm.json');
  assert.equal(await runBench(['lm', '--quick', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'lm');
  assert.equal(r.quick, true);
  assert.match(r.adapter, /webgpu/);
  assert.ok(r.corpus.trainWindows > 30_000 && r.corpus.validationWindows > 1000, JSON.stringify(r.corpus));
  const variants = ['single/none', 'ddp/none', 'diloco/none', 'diloco/dgc'];
  for (const v of variants) {
    const x = r.results.equalTokens.find((y: any) => `${y.config.strategy}/${y.config.compression}` === v);
    assert.ok(x, v);
    // Every run trains on the same tokens, evaluated at the same token counts.
    assert.equal(x.tokens, r.results.equalTokens[0].tokens, v);
    assert.deepEqual(x.evals.map((e: any) => e.tokens), r.results.equalTokens[0].evals.map((e: any) => e.tokens), v);
    // Uniform guessing over 256 bytes is ln 256 = 5.55 nats; quick mode measured 3.3–3.6 after 65k
    // tokens. A model that does not learn (or whose updates are not applied) stays near 5.5.
    assert.ok(x.finalLoss < 4.5, `${v} learned (${x.finalLoss})`);
    // Quick: the first 512 validation windows (the full run reads every one).
    assert.equal(x.validationTokens, Math.min(512, r.corpus.validationWindows) * r.gpt.context, `${v}: the final loss reads the first 512 validation windows`);
    assert.equal(x.bytesPerWorker > 0, v !== 'single/none', `${v}: only distributed runs send bytes`);
  }
  // The target is the worst variant's best loss plus the margin, so every variant reached it once.
  const best = variants.slice(1).map((v) => Math.min(...r.results.equalTokens.find((y: any) => `${y.config.strategy}/${y.config.compression}` === v).evals.map((e: any) => e.loss)));
  assert.ok(Math.abs(r.target - Math.max(...best) * 1.01) < 1e-9, `target ${r.target} from ${best}`);
  for (const x of r.results.equalTokens.filter((y: any) => y.config.strategy !== 'single')) {
    // The distributed runs exchange over the capped links; their time to the target is read off their evaluations.
    assert.deepEqual(x.config.link, r.cappedLink);
    // Modeled time counts one worker's compute per sync, the page all four: never more than the page.
    assert.ok(x.modeledMs > 0 && x.modeledMs <= x.wallMs, `${x.config.strategy}/${x.config.compression}: modeled ${x.modeledMs} vs page ${x.wallMs}`);
  }
  const cell = (v: string) => r.cells.find((c: any) => c.variant === v);
  const s = r.summary;
  assert.equal(s.val_loss_gap_vs_single, cell('diloco/dgc').equalTokens.gapVsSingle.median);
  // Time to the target: the first evaluation at or below it, else the whole run.
  const toTarget = (v: string) => r.results.equalTokens.filter((y: any) => `${y.config.strategy}/${y.config.compression}` === v)
    .map((y: any) => y.evals.find((e: any) => e.loss <= r.target)?.modeledMs ?? y.modeledMs)[0];
  assert.equal(cell('ddp/none').toTarget.modeledMs.median, toTarget('ddp/none'));
  assert.equal(s.diloco_dgc_speedup_capped, cell('ddp/none').toTarget.modeledMs.median / cell('diloco/dgc').toTarget.modeledMs.median);
  // DDP sends the whole model every step: on the capped links it takes longer to the target than DiLoCo + DGC.
  assert.ok(s.diloco_dgc_speedup_capped > 1, `speedup ${s.diloco_dgc_speedup_capped}`);
  // DGC sends a small fraction of dense DiLoCo's bytes.
  assert.ok(cell('diloco/dgc').equalTokens.bytesPerWorker.median < cell('diloco/none').equalTokens.bytesPerWorker.median / 2);
});
