// `npm run bench -- memory --quick` end to end (dispatcher, Dawn in Node) into a temporary file, then
// the JSON: recompute lowers the peak at the same batch, the largest batch with recompute exceeds the
// one without, that batch is refused without recompute, and the planner turns recompute on for the
// first batch that does not fit without it.
// Time ratios live in the JSON, not here.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-memory-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run bench -- memory --quick: recompute saves memory and fits a batch that does not fit without it', { timeout: 5 * 60_000 }, async (t) => {
  const out = join(dir, 'memory.json');
  assert.equal(await runBench(['memory', '--quick', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'memory');
  assert.ok(r.sameBatch.on.peakBytes < r.sameBatch.off.peakBytes, `peak ${r.sameBatch.on.peakBytes} with recompute vs ${r.sameBatch.off.peakBytes}`);
  assert.ok(r.sameBatch.on.msPerStep > 0 && r.sameBatch.off.msPerStep > 0);
  const d = r.defaultLimits;
  assert.equal(d.maxStorageBufferBindingSize, 128 * 2 ** 20);
  assert.ok(d.withRecompute.batch > d.withoutRecompute.batch, `largest batch ${d.withRecompute.batch} with recompute, ${d.withoutRecompute.batch} without`);
  assert.ok(d.withRecompute.peakBytes <= d.budgetBytes && d.withoutRecompute.peakBytes <= d.budgetBytes);
  assert.match(d.largestWithRecomputeRunWithout, /past this tab's GPU memory budget/);
  assert.equal(d.plan.batch, d.withoutRecompute.batch + 1);
  assert.equal(d.plan.recompute, true, d.plan.reason);
  assert.equal(r.summary.max_batch_with_recompute, d.withRecompute.batch);
  assert.equal(r.summary.recompute_peak_memory_ratio, r.sameBatch.on.peakBytes / r.sameBatch.off.peakBytes);
  // GPT-2's vocabulary at a toy size: a step runs, its peak holds the two probes' parameters and AdamW state more.
  const g = r.gpt2Small;
  assert.equal(g.gpt.vocab, 50257);
  assert.ok(Number.isFinite(g.loss) && g.stepMs > 0, JSON.stringify(g));
  assert.ok(g.probePeakBytes.two > g.probePeakBytes.one && g.stepPeakBytes > g.probePeakBytes.one, JSON.stringify(g));
  assert.ok(g.stepPeakBytes >= g.probePeakBytes.one + 2 * 4 * g.parameters, 'the step holds AdamW\'s two moments besides the pass');
  assert.equal(r.summary.gpt2_small_peak_mib, g.stepPeakBytes / 2 ** 20);
  assert.ok(r.summary.gpt2_small_max_batch_4gib_fitted >= 1);
});
