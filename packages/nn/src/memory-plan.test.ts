// The planner's micro-batch fits its budget as measured, not only on its line (WebGPU on SwiftShader).
// The line through probes of 1 and 2 examples does not see the pool rounding each buffer up to a power
// of two below 1 MiB, so a micro-batch of 3, 5, 6 or 7 can hold more than the line says; the planner
// probes the size it would use and steps down. Before, some budgets here gave a plan whose pass ran
// past the budget's usable share (and a tab ran out of memory mid-job).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimateMemory, Rng } from '@tabfleet/protocol';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { createModel, type GptPreset } from './models/index';
import { ESTIMATE_TRUSTED_SHARE, HEADROOM, planMemory, probeMemory, type PlanEstimate } from './memory-plan';
import type { Batch } from './train';

const PRESET: GptPreset = { kind: 'gpt', vocab: 64, context: 24, width: 48, heads: 2, layers: 2 };
const BATCH = 16;
/** The share of the budget a plan may fill. */
const USABLE = HEADROOM;

function tokens(size: number): Batch {
  const rng = new Rng(size);
  const n = size * PRESET.context;
  return { x: Int32Array.from({ length: n }, () => rng.int(PRESET.vocab)), y: Int32Array.from({ length: n }, () => rng.int(PRESET.vocab)), size };
}

test('for budgets between one example\'s pass and the whole batch\'s, the planned micro-batch measures within the usable share', { timeout: 300_000 }, async () => {
  const be = await createNodeGpuBackend();
  const model = createModel(PRESET, be, 1);
  const [one, all] = [(await probeMemory(model, tokens(1), false))!, (await probeMemory(model, tokens(BATCH), false))!];
  const missed: string[] = [];
  const sizes = new Set<number>();
  for (let i = 1; i <= 12; i++) {
    const budget = (one.peakBytes + ((all.peakBytes - one.peakBytes) * i) / 12) / USABLE;
    be.rt.memoryBudgetBytes = budget;
    const plan = await planMemory(model, BATCH, tokens, { budgetBytes: budget, mode: 'off' });
    be.rt.memoryBudgetBytes = Infinity;
    sizes.add(plan.microBatch);
    const measured = (await probeMemory(model, tokens(plan.microBatch), false))!;
    if (measured.peakBytes > USABLE * budget) missed.push(`budget ${Math.round(budget)} B: micro-batch ${plan.microBatch} peaks at ${measured.peakBytes} B`);
  }
  assert.deepEqual(missed, []);
  assert.ok(sizes.size >= 5, `the budgets span several micro-batches: ${[...sizes]}`);
});

test('auto: recompute is probed only when the batch does not fit in one pass without it', { timeout: 300_000 }, async () => {
  const be = await createNodeGpuBackend();
  const model = createModel(PRESET, be, 1);
  // Room for the whole batch: the plain probes decide it (before, recompute's two were run as well).
  const roomy = await planMemory(model, BATCH, tokens, { budgetBytes: Infinity, mode: 'auto' });
  assert.equal(roomy.recompute, false);
  assert.deepEqual(roomy.probes.map((p) => p.recompute), [false, false]);
  // A budget between the batch's peak with recompute and without: recompute is probed and chosen.
  const [plain, recomputed] = [(await probeMemory(model, tokens(BATCH), false))!, (await probeMemory(model, tokens(BATCH), true))!];
  assert.ok(recomputed.peakBytes < plain.peakBytes, `recompute lowers the peak: ${recomputed.peakBytes} against ${plain.peakBytes}`);
  const budget = (recomputed.peakBytes + plain.peakBytes) / 2 / USABLE;
  be.rt.memoryBudgetBytes = budget;
  const tight = await planMemory(model, BATCH, tokens, { budgetBytes: budget, mode: 'auto' });
  be.rt.memoryBudgetBytes = Infinity;
  assert.ok(tight.probes.some((p) => p.recompute), JSON.stringify(tight.probes.map((p) => [p.examples, p.recompute])));
  assert.equal(tight.recompute, true, tight.reason);
});

test('a batch the estimate puts far under the budget is probed once, at its size, and planned as the probes of 1 and 2 plan it', { timeout: 300_000 }, async () => {
  const be = await createNodeGpuBackend();
  const model = createModel(PRESET, be, 1);
  const e = estimateMemory(PRESET, { optimizer: null, batchSize: BATCH, conv: be.convVariant });
  const estimate: PlanEstimate = { perExample: e.perExample.plain, peakAtBatch: e.batch.plain };
  const roomy = e.batch.plain / USABLE / ESTIMATE_TRUSTED_SHARE * 4;
  const [confirmed, probed] = [
    await planMemory(model, BATCH, tokens, { budgetBytes: roomy, mode: 'auto', estimate }),
    await planMemory(model, BATCH, tokens, { budgetBytes: roomy, mode: 'auto' }),
  ];
  assert.deepEqual(confirmed.probes.map((p) => [p.examples, p.recompute]), [[BATCH, false]]);
  assert.deepEqual(probed.probes.map((p) => p.examples), [1, 2, BATCH]);
  assert.deepEqual([confirmed.microBatch, confirmed.passes, confirmed.recompute], [probed.microBatch, probed.passes, probed.recompute]);
  assert.match(confirmed.reason, new RegExp(`^the batch of ${BATCH} fits in \\d+ MiB in one pass`));
  // Evaluation's batches (maxExamples) come from the estimate's line: near the probed line's.
  assert.ok(Math.abs(confirmed.maxExamples / probed.maxExamples - 1) <= 0.15, `${confirmed.maxExamples} examples against ${probed.maxExamples}`);
});

test('an estimate over its share of the budget, or one the probe of the batch contradicts, changes nothing: the planner probes from 1 example', { timeout: 300_000 }, async () => {
  const be = await createNodeGpuBackend();
  const model = createModel(PRESET, be, 1);
  const e = estimateMemory(PRESET, { optimizer: null, batchSize: BATCH, conv: be.convVariant });
  const near = e.batch.plain / USABLE * 2;
  const overShare = await planMemory(model, BATCH, tokens, { budgetBytes: near, mode: 'off', estimate: { perExample: e.perExample.plain, peakAtBatch: e.batch.plain } });
  assert.deepEqual(overShare.probes.slice(0, 2).map((p) => p.examples), [1, 2]);
  // An estimate far too low: the batch does not fit the budget, and the plan is the probes' micro-batches.
  const batchPeak = (await probeMemory(model, tokens(BATCH), false))!.peakBytes;
  const tight = batchPeak * 0.6 / USABLE;
  be.rt.memoryBudgetBytes = tight;
  const wrong = await planMemory(model, BATCH, tokens, { budgetBytes: tight, mode: 'off', estimate: { perExample: 1, peakAtBatch: 1 } });
  be.rt.memoryBudgetBytes = Infinity;
  assert.ok(wrong.microBatch < BATCH && wrong.passes > 1, wrong.reason);
  assert.deepEqual(wrong.probes.slice(0, 2).map((p) => p.examples), [1, 2]);
  const measured = (await probeMemory(model, tokens(wrong.microBatch), false))!;
  assert.ok(measured.peakBytes <= USABLE * tight, `micro-batch ${wrong.microBatch} peaks at ${measured.peakBytes} B, past ${USABLE * tight}`);
});
