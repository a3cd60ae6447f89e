// The protocol's memory estimate (memory-estimate.ts, what the job form shows) against what the WebGPU
// runtime measures: a gradient pass of 1 and of 2 examples of each preset (probeMemory, the planner's
// probe), on Dawn over SwiftShader, and the GPT-2 small and GPT figures recorded by `npm run bench --
// memory` (bench/results/memory.json). Measured per example = peak(2) − peak(1); the fixed part (the
// parameters, the gradients and whatever else a pass holds whatever its batch) = peak(1) − that.
//
// TOLERANCE, chosen before any estimate was compared with a measurement: the estimate replays each
// tensor the pass makes, with the runtime's buffer sizes, so all it cannot know is data (how many
// distinct token ids a batch holds: its id grouping is sized for the most, a few hundred bytes at
// most here) and buffers the runtime holds outside the model (a 16-byte dummy binding, a bench's
// earlier models). 10% is far above those, and far below what a tensor class the replay missed
// would cost (one activation per block, one set of parameter gradients), which is what this catches.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { estimateMemory, pooledBytes, PRESET_ARCHITECTURES, Rng, type ModelArchitecture } from '@tabfleet/protocol';
import { GpuRuntime } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { createModel, PRESETS, type ModelPreset } from './models/index';
import { probeMemory } from './memory-plan';
import type { Batch } from './train';

const TOLERANCE = 0.1;

function near(estimated: number, measured: number, what: string): void {
  const off = (estimated - measured) / measured;
  assert.ok(Math.abs(off) <= TOLERANCE, `${what}: estimated ${estimated} B, measured ${measured} B (${(100 * off).toFixed(1)}%)`);
}

/** Seeded examples of any preset: random features and classes, or random tokens and next tokens. */
function sample(preset: ModelPreset, size: number, seed: number): Batch {
  const rng = new Rng(seed);
  if (preset.kind === 'mlp' || preset.kind === 'cnn') {
    const inputs = preset.kind === 'mlp' ? preset.sizes[0] : preset.inChannels * preset.imageSize ** 2;
    const classes = preset.kind === 'mlp' ? preset.sizes[preset.sizes.length - 1] : preset.classes;
    return { x: Float32Array.from({ length: size * inputs }, () => rng.uniform(-1, 1)), y: Int32Array.from({ length: size }, () => rng.int(classes)), size };
  }
  const n = size * preset.context;
  return { x: Int32Array.from({ length: n }, () => rng.int(preset.vocab)), y: Int32Array.from({ length: n }, () => rng.int(preset.vocab)), size };
}

test('the protocol knows the architecture of every nn preset', () => {
  assert.deepEqual(PRESET_ARCHITECTURES, PRESETS);
});

const CASES: { name: string; preset: ModelPreset; conv?: 'direct' | 'gemm' }[] = [
  { name: 'mlp-fashion', preset: PRESETS['mlp-fashion'] },
  { name: 'a deeper MLP', preset: { kind: 'mlp', sizes: [96, 80, 48, 7] } },
  // CPU adapters (SwiftShader) take the im2col route by default; GPUs the direct kernels, whose scratch differs.
  { name: 'cnn-fashion (im2col)', preset: PRESETS['cnn-fashion'], conv: 'gemm' },
  { name: 'cnn-fashion (direct)', preset: PRESETS['cnn-fashion'], conv: 'direct' },
  { name: 'transformer-char', preset: PRESETS['transformer-char'] },
  { name: 'a small GPT', preset: { kind: 'gpt', vocab: 96, context: 32, width: 48, heads: 3, layers: 3 } },
];

// One device a conv variant (the text and MLP cases take the im2col one), so kernels compile once: each
// case counts from the bytes live before its model (earlier cases' models stay), and no two text cases
// share a context (position ids are kept per device and length).
const backends = new Map<'direct' | 'gemm', ReturnType<typeof createNodeGpuBackend>>();
const backendFor = (conv: 'direct' | 'gemm') => {
  if (!backends.has(conv)) backends.set(conv, createNodeGpuBackend({ convVariant: conv }));
  return backends.get(conv)!;
};

for (const c of CASES) {
  test(`WebGPU: ${c.name}'s measured gradient pass is what the estimate says`, async () => {
    const be = await backendFor(c.conv ?? 'gemm');
    const before = be.memory().liveBytes;
    const model = createModel(c.preset, be, 1);
    const modes = model.recompute === undefined ? [false] : [false, true];
    const est = estimateMemory(c.preset, { optimizer: null, batchSize: 2, conv: c.conv, bindingLimitBytes: Math.min(be.adapter.maxStorageBufferBindingSize, be.adapter.maxBufferSize) });
    // The parameter and gradient buffers: exactly the runtime's sizes.
    assert.equal(be.memory().liveBytes - before, 2 * est.parameters, 'parameter and gradient buffers');
    assert.equal(est.perExample.recompute === null, model.recompute === undefined, 'a recompute figure exactly where the model can recompute');
    for (const recompute of modes) {
      const one = (await probeMemory(model, sample(c.preset, 1, 1), recompute))!;
      const two = (await probeMemory(model, sample(c.preset, 2, 2), recompute))!;
      const perExample = two.peakBytes - one.peakBytes;
      const fixed = one.peakBytes - before - perExample;
      const mode = recompute ? 'recompute' : 'plain';
      console.log(`${c.name}, ${mode}: per example ${perExample} B measured, ${est.perExample[mode]} B estimated; fixed ${fixed} B measured, ${est.fixed[mode]} B estimated`);
      near(est.perExample[mode]!, perExample, `${c.name} ${mode}: bytes an example`);
      near(est.fixed[mode]!, fixed, `${c.name} ${mode}: fixed bytes`);
      near(est.batch[mode]!, two.peakBytes - before, `${c.name} ${mode}: a pass of 2`);
    }
  });
}

test('the protocol\'s pool sizes are the WebGPU runtime\'s, for any tensor and binding limit', async () => {
  // Every power of two of bytes and its neighbours, every step of the octaves past 1 MiB and its
  // neighbours, and seeded sizes between: pooledBytes against GpuRuntime.bucket, which alloc uses.
  const counts = new Set<number>();
  for (let k = 0; k <= 30; k++) for (const d of [-1, 0, 1]) counts.add(2 ** k + d);
  for (let pow = 2 ** 21; pow <= 2 ** 33; pow *= 2) for (let j = 8; j <= 16; j++) for (const d of [-1, 0, 1]) counts.add((j * pow) / 16 / 4 + d);
  const rng = new Rng(3);
  for (let i = 0; i < 2000; i++) counts.add(1 + Math.floor(2 ** rng.uniform(0, 31)));
  let checked = 0;
  for (const n of counts) {
    if (n < 1) continue;
    assert.equal(pooledBytes(n), GpuRuntime.bucket(4 * n), `${n} elements`);
    checked++;
  }
  assert.ok(checked > 1500, `${checked} sizes`);
  // Real allocations, on a runtime whose binding limit (1 MiB + 64 KiB) is not a bucket: below it the
  // bucket, a tensor whose bucket passes it its own size, rounded to 16 bytes.
  const be = await backendFor('gemm');
  const limit = 2 ** 20 + 2 ** 16;
  const rt = new GpuRuntime(be.rt.device, { ...be.adapter, maxStorageBufferBindingSize: limit });
  for (const n of [1, 64, 65, 1000, 2 ** 18, 2 ** 18 + 1, 2 ** 18 + 4, 2 ** 18 + 2 ** 14]) {
    const s = rt.alloc(n);
    assert.equal(s.buffer.size, pooledBytes(n, limit), `${n} elements under a ${limit}-byte binding limit`);
    rt.release(s);
  }
  assert.equal(pooledBytes(2 ** 18 + 1, limit), 2 ** 20 + 16, 'the exact size where the bucket passes the limit');
});

interface MemoryRecord {
  defaultLimits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    withoutRecompute: { tried: { batch: number; fits: boolean; peakMiB: number | null }[] };
    withRecompute: { tried: { batch: number; fits: boolean; peakMiB: number | null }[] };
  };
  gpt: ModelArchitecture;
  gpt2Small: { gpt: ModelArchitecture; probePeakBytes: { one: number; two: number }; perExampleBytes: number };
}

const record = JSON.parse(readFileSync(new URL('../../../bench/results/memory.json', import.meta.url), 'utf8')) as MemoryRecord;

test('GPT-2 small: the estimate is what the memory benchmark measured, a pass of 1 and of 2 examples with recompute', () => {
  const g = record.gpt2Small;
  assert.deepEqual(g.gpt, { kind: 'gpt', vocab: 50257, context: 1024, width: 768, heads: 12, layers: 12 });
  const est = estimateMemory(g.gpt, { optimizer: 'adamw', batchSize: 1 });
  const perExample = g.probePeakBytes.two - g.probePeakBytes.one;
  assert.equal(perExample, g.perExampleBytes);
  console.log(`GPT-2 small, recompute: per example ${perExample} B measured, ${est.perExample.recompute} B estimated; `
    + `fixed ${g.probePeakBytes.one - perExample} B measured, ${est.fixed.recompute! - est.optimizerState} B estimated (no AdamW state in the probes)`);
  near(est.perExample.recompute!, perExample, 'GPT-2 small: bytes an example with recompute');
  // The bench's first model (and its AdamW states) still held 24 MiB on that device: within the tolerance.
  near(est.fixed.recompute! - est.optimizerState, g.probePeakBytes.one - perExample, 'GPT-2 small: fixed bytes with recompute');
  assert.equal(est.optimizerState, 2 * est.parameters);
});

test('the benchmark\'s GPT on WebGPU\'s default limits: every measured pass from 1 to 32 examples, with and without recompute', () => {
  const d = record.defaultLimits;
  const bindingLimitBytes = Math.min(d.maxStorageBufferBindingSize, d.maxBufferSize);
  let checked = 0, worst = 0;
  for (const [runs, mode] of [[d.withoutRecompute.tried, 'plain'], [d.withRecompute.tried, 'recompute']] as const) {
    for (const t of runs) {
      if (!t.fits) continue;
      const est = estimateMemory(record.gpt, { optimizer: null, batchSize: t.batch, bindingLimitBytes });
      near(est.batch[mode]!, t.peakMiB! * 2 ** 20, `batch ${t.batch} ${mode}`);
      worst = Math.max(worst, Math.abs(est.batch[mode]! / (t.peakMiB! * 2 ** 20) - 1));
      checked++;
    }
  }
  console.log(`the benchmark's GPT: ${checked} measured passes, the estimate at most ${(100 * worst).toFixed(4)}% off`);
  assert.ok(checked >= 8, `${checked} measured passes`);
});
