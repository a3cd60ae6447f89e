// Activation recompute and micro-batches change memory, never the gradient: the same GPT, parameters
// and batch give the same loss and flat gradient with recompute on and off and in micro-batches (CPU
// reference in f64 to rounding, WebGPU on SwiftShader to f32 tolerance); on WebGPU the peak memory
// falls with recompute, and the planner turns recompute on by itself when only that fits the budget.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '@tabfleet/protocol';
import { CpuBackend, GpuOutOfMemoryError, checkpoint, backward, tensor, matmul, tidy, type Backend } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { createModel, type GptPreset } from './models/index';
import { planMemory, probeMemory } from './memory-plan';
import { recordGradientStep, type Batch } from './train';

const SMALL: GptPreset = { kind: 'gpt', vocab: 37, context: 11, width: 24, heads: 3, layers: 3 };

function tokens(preset: GptPreset, size: number, seed: number): Batch {
  const rng = new Rng(seed);
  const n = size * preset.context;
  return { x: Int32Array.from({ length: n }, () => rng.int(preset.vocab)), y: Int32Array.from({ length: n }, () => rng.int(preset.vocab)), size };
}

async function gradientOf(be: Backend, preset: GptPreset, batch: Batch, opts: { recompute: boolean; micro?: number }): Promise<{ loss: number; grad: Float32Array }> {
  const model = createModel(preset, be, 5);
  model.recompute = opts.recompute;
  const loss = recordGradientStep(model, batch, undefined, opts.micro);
  const value = (await loss.data())[0];
  return { loss: value, grad: (await be.read(model.store.flatGrads, 'f32')) as Float32Array };
}

function maxRelDiff(a: Float32Array, b: Float32Array): number {
  let scale = 0, diff = 0;
  for (let i = 0; i < a.length; i++) {
    scale = Math.max(scale, Math.abs(a[i]));
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
  }
  return diff / scale;
}

test('CPU reference: recompute and micro-batches give the whole batch\'s gradient', async () => {
  const be = new CpuBackend('f64');
  const batch = tokens(SMALL, 5, 1);
  const plain = await gradientOf(be, SMALL, batch, { recompute: false });
  for (const opts of [{ recompute: true }, { recompute: false, micro: 2 }, { recompute: true, micro: 3 }]) {
    const other = await gradientOf(be, SMALL, batch, opts);
    assert.ok(Math.abs(other.loss - plain.loss) < 1e-9, `${JSON.stringify(opts)}: loss ${other.loss} vs ${plain.loss}`);
    assert.ok(maxRelDiff(other.grad, plain.grad) < 1e-9, `${JSON.stringify(opts)}: gradient differs by ${maxRelDiff(other.grad, plain.grad)}`);
  }
  assert.ok(plain.grad.some((g) => g !== 0));
});

test('checkpoint refuses a function that reads a parameter it was not given', () => {
  const be = new CpuBackend('f64');
  const x = tensor(be, Float32Array.from([1, 2, 3, 4]), [2, 2], true);
  const w = tensor(be, Float32Array.from([1, 0, 0, 1]), [2, 2], true);
  const y = checkpoint((h) => matmul(h, w), x, []);
  assert.throws(() => tidy(() => void backward(matmul(y, y), tensor(be, new Float32Array(4).fill(1), [2, 2]))), /not among its 0 params/);
});

test('WebGPU: recompute keeps the gradient and lowers peak memory; the planner turns it on when only it fits', async () => {
  const be = await createNodeGpuBackend();
  const preset: GptPreset = { kind: 'gpt', vocab: 256, context: 64, width: 64, heads: 4, layers: 4 };
  const batch = tokens(preset, 8, 2);
  const plain = await gradientOf(be, preset, batch, { recompute: false });
  const recomputed = await gradientOf(be, preset, batch, { recompute: true });
  const micro = await gradientOf(be, preset, batch, { recompute: false, micro: 3 });
  assert.ok(Math.abs(recomputed.loss - plain.loss) < 1e-5 && Math.abs(micro.loss - plain.loss) < 1e-5, `losses ${plain.loss}, ${recomputed.loss}, ${micro.loss}`);
  assert.ok(maxRelDiff(recomputed.grad, plain.grad) < 1e-4, `recompute: gradient differs by ${maxRelDiff(recomputed.grad, plain.grad)}`);
  assert.ok(maxRelDiff(micro.grad, plain.grad) < 1e-4, `micro-batches: gradient differs by ${maxRelDiff(micro.grad, plain.grad)}`);

  const model = createModel(preset, be, 5);
  const off = (await probeMemory(model, batch, false))!;
  const on = (await probeMemory(model, batch, true))!;
  assert.ok(on.peakBytes < 0.75 * off.peakBytes, `peak ${on.peakBytes} B with recompute vs ${off.peakBytes} B without`);

  // A budget between the two peaks: the batch fits in one pass only with recompute.
  const budgetBytes = (on.peakBytes + off.peakBytes) / 2 / 0.85;
  const plan = await planMemory(model, 8, (n) => tokens(preset, n, 3), { budgetBytes, mode: 'auto' });
  assert.equal(plan.recompute, true, plan.reason);
  assert.equal(plan.microBatch, 8, plan.reason);
  const step = await gradientOf(be, preset, batch, { recompute: true });
  assert.ok(Math.abs(step.loss - plain.loss) < 1e-5);

  // Recompute off and a budget that fits about half the batch: micro-batches accumulate.
  const half = await planMemory(model, 8, (n) => tokens(preset, n, 3), { budgetBytes, mode: 'off' });
  assert.ok(half.microBatch >= 1 && half.microBatch < 8 && !half.recompute, `${half.reason}: micro-batch ${half.microBatch}`);
  assert.ok(half.predictedPeakBytes <= budgetBytes, `predicted ${half.predictedPeakBytes} B past the budget ${budgetBytes}`);

  // Past the budget a step fails cleanly and leaks nothing.
  be.rt.memoryBudgetBytes = (on.peakBytes + off.peakBytes) / 2;
  const live = be.memory().liveBytes;
  assert.throws(() => recordGradientStep(model, batch), GpuOutOfMemoryError);
  assert.equal(be.memory().liveBytes, live, 'a failed step returns its buffers');
  be.rt.memoryBudgetBytes = Infinity;
});
