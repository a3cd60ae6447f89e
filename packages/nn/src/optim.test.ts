import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '@tabfleet/protocol';
import { CpuBackend, type Backend } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { createOptimizer } from './optim';
import { ParamStore } from './params';

/** A store of awkward tensors: odd sizes, one of a single element, one all zero (its trust ratio is 1), one past 64 floats. */
function store(be: Backend): ParamStore {
  const s = new ParamStore();
  s.declare('a.weight', [3, 5], { kind: 'normal', std: 1 });
  s.declare('a.bias', [1], { kind: 'normal', std: 1 });
  s.declare('zero', [7], { kind: 'const', value: 0 });
  s.declare('b.weight', [9, 13], { kind: 'normal', std: 0.1 });
  s.materialize(be, 3);
  return s;
}

function gradients(length: number, step: number): Float32Array {
  const rng = new Rng(100 + step);
  return Float32Array.from({ length }, () => rng.normal());
}

/** LAMB written out scalar by scalar from the paper's algorithm, for one tensor at a time. */
function referenceLamb(params: Float32Array, manifest: { offset: number; size: number }[], steps: number, length: number, c: { lr: number; wd: number }): Float32Array {
  const w = params.slice(), m = new Float64Array(length), v = new Float64Array(length);
  const [b1, b2, eps] = [0.9, 0.999, 1e-6];
  for (let t = 1; t <= steps; t++) {
    const g = gradients(length, t);
    for (const { offset, size } of manifest) {
      const u: number[] = [];
      for (let k = offset; k < offset + size; k++) {
        m[k] = b1 * m[k] + (1 - b1) * g[k];
        v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2;
        u.push(m[k] / (1 - b1 ** t) / (Math.sqrt(v[k] / (1 - b2 ** t)) + eps) + c.wd * w[k]);
      }
      const wn = Math.hypot(...w.subarray(offset, offset + size)), un = Math.hypot(...u);
      const r = wn > 0 && un > 0 ? wn / un : 1;
      u.forEach((x, j) => (w[offset + j] -= c.lr * r * x));
    }
  }
  return w;
}

async function lambSteps(be: Backend, steps: number, c: { lr: number; wd: number }): Promise<{ flat: Float32Array; start: Float32Array; manifest: { offset: number; size: number }[] }> {
  const s = store(be);
  const start = await s.readFlat();
  const opt = createOptimizer(s, { kind: 'lamb', lr: c.lr, weightDecay: c.wd });
  for (let t = 1; t <= steps; t++) {
    be.write(s.flatGrads, gradients(s.length, t));
    opt.step();
  }
  return { flat: await s.readFlat(), start, manifest: s.manifest };
}

test('LAMB on the CPU is the paper\'s algorithm: per-tensor trust ratios, ratio 1 for a zero tensor, padding untouched', async () => {
  const c = { lr: 0.01, wd: 0.01 };
  const { flat, start, manifest } = await lambSteps(new CpuBackend('f32'), 4, c);
  const want = referenceLamb(start, manifest, 4, start.length, c);
  for (let i = 0; i < flat.length; i++) assert.ok(Math.abs(flat[i] - want[i]) <= 1e-5 + 1e-4 * Math.abs(want[i]), `${i}: ${flat[i]} vs ${want[i]}`);
  // The ratio keeps each tensor's step in proportion to its norm: a's weight moves lr·‖w‖ per step, whatever the gradient's scale.
  const a = manifest[0];
  const moved = Math.hypot(...Array.from({ length: a.size }, (_, k) => flat[a.offset + k] - start[a.offset + k]));
  assert.ok(moved > 0 && moved < 4 * c.lr * 1.1 * Math.hypot(...start.subarray(a.offset, a.offset + a.size)), `moved ${moved}`);
  const zero = manifest[2];
  assert.ok(flat.subarray(zero.offset, zero.offset + zero.size).some((x) => x !== 0), 'a zero tensor still moves (ratio 1)');
  for (let i = 0; i < flat.length; i++) if (!manifest.some((e) => i >= e.offset && i < e.offset + e.size)) assert.equal(flat[i], 0, `padding at ${i}`);
});

test('LAMB on WebGPU (three dispatches a step) matches the CPU reference', async () => {
  const c = { lr: 0.02, wd: 0.05 };
  const cpu = await lambSteps(new CpuBackend('f32'), 5, c);
  const gpu = await lambSteps(await createNodeGpuBackend(), 5, c);
  for (let i = 0; i < cpu.flat.length; i++) assert.ok(Math.abs(gpu.flat[i] - cpu.flat[i]) <= 1e-5 + 1e-4 * Math.abs(cpu.flat[i]), `${i}: gpu ${gpu.flat[i]} vs cpu ${cpu.flat[i]}`);
});
