// Whole-model golden test: the same model, init and batches give the same losses over 10 optimizer
// steps on the WebGPU backend (Dawn, SwiftShader) as on the CPU reference.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '@tabfleet/protocol';
import { CpuBackend, type Backend, type WebGpuBackendOptions } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { createModel, PRESETS, type ModelPreset } from './models/index';
import { createOptimizer, type OptimizerConfig } from './optim';
import { trainStep, type Batch } from './train';

function batches(preset: ModelPreset, n: number, size: number, seed: number): Batch[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => {
    if (preset.kind === 'transformer' || preset.kind === 'gpt') {
      const x = Int32Array.from({ length: size * preset.context }, () => rng.int(preset.vocab));
      const y = Int32Array.from({ length: size * preset.context }, () => rng.int(preset.vocab));
      return { x, y, size };
    }
    const features = preset.kind === 'mlp' ? preset.sizes[0] : preset.inChannels * preset.imageSize ** 2;
    const classes = preset.kind === 'mlp' ? preset.sizes.at(-1)! : preset.classes;
    return { x: Float32Array.from({ length: size * features }, () => rng.normal()), y: Int32Array.from({ length: size }, () => rng.int(classes)), size };
  });
}

async function losses(backend: Backend, preset: ModelPreset, opt: OptimizerConfig, data: Batch[]): Promise<number[]> {
  const model = createModel(preset, backend, 7);
  const o = createOptimizer(model.store, opt);
  const out: number[] = [];
  for (const b of data) out.push(await trainStep(model, o, b));
  return out;
}

const cases: { name: string; preset: ModelPreset; opt: OptimizerConfig; batch: number; gpu?: WebGpuBackendOptions }[] = [
  { name: 'MLP 784-256-10, SGD Nesterov momentum', preset: PRESETS['mlp-fashion'], opt: { kind: 'sgd', lr: 0.05, momentum: 0.9, nesterov: true }, batch: 32 },
  { name: 'MLP 784-256-10, AdamW', preset: PRESETS['mlp-fashion'], opt: { kind: 'adamw', lr: 1e-3, weightDecay: 0.01 }, batch: 32 },
  { name: 'small CNN, SGD momentum', preset: PRESETS['cnn-fashion'], opt: { kind: 'sgd', lr: 0.02, momentum: 0.9 }, batch: 8 },
  { name: 'char transformer, AdamW', preset: { ...PRESETS['transformer-char'], context: 16 }, opt: { kind: 'adamw', lr: 3e-3 }, batch: 4 },
  // Odd sizes on purpose: 3 heads of 8, a context of 13, a vocabulary of 67.
  { name: 'GPT 2 layers × 3 heads, width 24, tied head, AdamW', preset: { kind: 'gpt', vocab: 67, context: 13, width: 24, heads: 3, layers: 2 }, opt: { kind: 'adamw', lr: 3e-3 }, batch: 3 },
  // The fused causal attention kernel on the GPU (head size 8, a multiple of 4) against the CPU's composed ops.
  {
    name: 'GPT 2 layers × 3 heads, fused attention on the GPU',
    preset: { kind: 'gpt', vocab: 67, context: 13, width: 24, heads: 3, layers: 2 },
    opt: { kind: 'adamw', lr: 3e-3 },
    batch: 3,
    gpu: { fusedAttention: true },
  },
  { name: 'GPT 1 layer, LAMB', preset: { kind: 'gpt', vocab: 67, context: 13, width: 24, heads: 3, layers: 1 }, opt: { kind: 'lamb', lr: 1e-2, weightDecay: 0.01 }, batch: 3 },
];

for (const c of cases) {
  test(`golden: ${c.name} — 10 steps on GPU match the CPU reference within 1e-4`, async () => {
    const data = batches(c.preset, 10, c.batch, 3);
    const cpu = await losses(new CpuBackend('f32'), c.preset, c.opt, data);
    const gpu = await losses(await createNodeGpuBackend(c.gpu), c.preset, c.opt, data);
    assert.ok(cpu[9] < cpu[0], `loss should fall over 10 steps: ${cpu[0]} → ${cpu[9]}`);
    for (let i = 0; i < 10; i++) assert.ok(Math.abs(gpu[i] - cpu[i]) <= 1e-4, `step ${i}: gpu ${gpu[i]} vs cpu ${cpu[i]}`);
  });
}
