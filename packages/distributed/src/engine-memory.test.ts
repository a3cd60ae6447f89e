// A tab's evaluation stays inside its memory plan (WebGPU on SwiftShader, with a budget): the planner
// sizes the training pass to the budget, and evaluation, which an evaluator runs at a commit, takes
// batches of at most what that pass holds. It used to take 500 examples a batch whatever the plan, so a
// GPT whose step fitted the budget ran out of memory evaluating (this test, on that code: "2.0 MiB more
// would make 6.6 MiB live, past this tab's GPU memory budget of 5.6 MiB"); most likely what stopped a
// small-budget tab of e2e/gpt-dashboard.test.ts at round:commit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '@tabfleet/protocol';
import type { Dataset } from '@tabfleet/data';
import { HEADROOM, type GptPreset } from '@tabfleet/nn';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { ModelEngine } from './engine';

const PRESET: GptPreset = { kind: 'gpt', vocab: 64, context: 32, width: 32, heads: 2, layers: 2 };

function windows(count: number, seed: number): Dataset {
  const rng = new Rng(seed);
  const n = count * PRESET.context;
  return {
    x: Int32Array.from({ length: n }, () => rng.int(PRESET.vocab)), y: Int32Array.from({ length: n }, () => rng.int(PRESET.vocab)),
    count, features: PRESET.context, labelsPerExample: PRESET.context, classes: PRESET.vocab,
  };
}

test('evaluation takes batches the memory plan allows, so a tab whose step fits its budget also evaluates within it', { timeout: 120_000 }, async () => {
  const be = await createNodeGpuBackend();
  const engine = new ModelEngine(be, {
    preset: PRESET, seed: 1, optimizer: { kind: 'adamw', lr: 1e-3 }, batchSize: 8, train: windows(64, 1), test: windows(600, 2),
    shard: Int32Array.from({ length: 64 }, (_, i) => i), dataSeed: 1,
  });
  // Unbounded: what evaluating 500 windows a batch holds.
  const whole = await engine.planMemory('off');
  assert.ok(whole.maxExamples >= 500, `no budget: bounded only by the adapter's binding limit (${whole.maxExamples} examples)`);
  be.resetPeakMemory();
  const reference = await engine.evaluate();
  const evalPeak = be.memory().peakBytes;
  // A budget whose planned share holds a pass of 12 examples: the batch of 8 in one pass, 500 windows far from it.
  const [one, two] = whole.probes.map((p) => p.peakBytes);
  const budget = (one + 11 * (two - one)) / HEADROOM;
  assert.ok(budget < evalPeak / 4, `the budget ${budget} B must be well below the 500-window evaluation's peak ${evalPeak} B for this test to mean anything`);
  be.rt.memoryBudgetBytes = budget;
  try {
    const plan = await engine.planMemory('off');
    assert.equal(plan.microBatch, 8, plan.reason);
    assert.ok(plan.maxExamples >= 8 && plan.maxExamples < 500, `the plan holds ${plan.maxExamples} examples a pass`);
    be.resetPeakMemory();
    // Before: GpuOutOfMemoryError ("… past this tab's GPU memory budget").
    const result = await engine.evaluate();
    assert.ok(be.memory().peakBytes <= budget, `evaluation peaked at ${be.memory().peakBytes} B, past the budget ${budget} B`);
    // The same model in smaller batches: the same loss and accuracy, to float rounding.
    assert.equal(result.count, reference.count);
    assert.ok(Math.abs(result.loss - reference.loss) < 1e-5 * reference.loss, `loss ${result.loss} in planned batches, ${reference.loss} in batches of 500`);
    assert.equal(result.accuracy, reference.accuracy);
    // And the step the plan was made for fits too.
    await engine.trainSteps(1);
  } finally {
    be.rt.memoryBudgetBytes = Infinity;
  }
});
