// Runtime behaviour: pooling, error reporting that names the kernel, device loss.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createNodeGpuBackend } from '../node-gpu';
import { tensor } from '../factory';
import { linear, matmul } from '../ops/matmul';
import { conv2d } from '../ops/conv';
import { dispose, tidy } from '../tensor';
import { GpuDeviceLostError, GpuKernelError } from './device';
import { GpuStorage } from './runtime';

test('tidy returns intermediate buffers to the pool, and the next step reuses them', async () => {
  const gpu = await createNodeGpuBackend();
  const x = tensor(gpu, new Float32Array(64 * 32).fill(1), [64, 32]);
  const w = tensor(gpu, new Float32Array(16 * 32).fill(0.5), [16, 32]);
  const ids = () => {
    const seen: number[] = [];
    const y = tidy(() => {
      const h = linear(x, w, null, 'relu');
      seen.push((h.storage as GpuStorage).id);
      return matmul(h, w);
    });
    seen.push((y.storage as GpuStorage).id);
    dispose(y);
    return seen;
  };
  const first = ids(), second = ids();
  assert.deepEqual(second, first);
  const y = tidy(() => matmul(linear(x, w, null), w));
  const values = await y.data();
  assert.equal(values[0], 64 * 32 * 0.5 * 0.5 * 16 / 64);
});

test('a wrong dispatch fails with GpuKernelError naming the kernel, synchronously or at the next read', async () => {
  const gpu = await createNodeGpuBackend();
  const small = gpu.rt.alloc(1);
  const out = gpu.rt.alloc(4);
  assert.throws(
    () => gpu.rt.dispatch({ shader: 'softmax_ce', uniforms: new Uint32Array([1, 1, 0, 0]), buffers: [small, out], workgroups: [1] }),
    (e: Error) => e instanceof GpuKernelError && /softmax_ce: expects 4 storage buffers, got 2/.test(e.message),
  );
  // The same buffer bound read-only and read-write is caught by WebGPU validation, asynchronously.
  gpu.rt.dispatch({ shader: 'unary', constants: { OP: 0, WG: 64 }, uniforms: new Uint32Array([4, 64, 0, 0]), buffers: [out, out], workgroups: [1] });
  await assert.rejects(gpu.read(out, 'f32'), (e: Error) => e instanceof GpuKernelError && /unary/.test(e.message));
  // The runtime stays usable afterwards.
  const t = tensor(gpu, Float32Array.from([1, 2, 3, 4]), [2, 2]);
  assert.deepEqual([...(await matmul(t, t).data())], [7, 10, 15, 22]);
});

test('a lost device turns every later call into GpuDeviceLostError', async () => {
  const gpu = await createNodeGpuBackend();
  const t = tensor(gpu, Float32Array.from([1, 2, 3, 4]), [2, 2]);
  gpu.rt.device.destroy();
  await gpu.rt.device.lost;
  assert.throws(() => matmul(t, t), (e: Error) => e instanceof GpuDeviceLostError && /lost/.test(e.message));
});

test('shape errors say what was expected', async () => {
  const gpu = await createNodeGpuBackend();
  const a = tensor(gpu, new Float32Array(6), [2, 3]);
  assert.throws(() => matmul(a, a), /inner dims differ/);
  assert.throws(() => linear(a, tensor(gpu, new Float32Array(8), [2, 4]), null), /linear weight: expected shape \[2,3\]/);
  assert.throws(() => a.reshape([4, 2]), /cannot reshape 6 elements to \[4,2\]/);
});

test('on a CPU adapter conv2d takes the im2col + matmul route when the shapes allow it', async () => {
  const gpu = await createNodeGpuBackend();
  assert.equal(gpu.convVariant, 'gemm');
  const before = gpu.rt.counters.dispatches;
  const x = tensor(gpu, new Float32Array(2 * 4 * 8 * 8).fill(1), [2, 4, 8, 8], true);
  const w = tensor(gpu, new Float32Array(8 * 4 * 3 * 3).fill(0.5), [8, 4, 3, 3], true);
  const y = tidy(() => conv2d(x, w, null, { pad: 1 }));
  // im2col + one matmul.
  assert.equal(gpu.rt.counters.dispatches - before, 2);
  const v = await y.data();
  assert.equal(v[9], 4 * 9 * 0.5); // an interior pixel sees all 36 taps
});

test('a reshaped intermediate is still released with its scope (no buffer grows per step)', async () => {
  const gpu = await createNodeGpuBackend();
  const x = tensor(gpu, new Float32Array(8 * 16).fill(1), [8, 16]);
  const w = tensor(gpu, new Float32Array(4 * 16).fill(1), [4, 16]);
  const step = () => {
    const y = tidy(() => linear(linear(x, w, null).reshape([4, 8]).reshape([8, 4]), tensor(gpu, new Float32Array(16).fill(1), [4, 4]), null));
    const id = (y.storage as GpuStorage).id;
    dispose(y);
    return id;
  };
  step();
  const created = () => gpu.rt.counters.buffersCreated;
  const before = created();
  for (let i = 0; i < 5; i++) step();
  assert.equal(created() - before, 0, 'every buffer of a step comes back to the pool');
});
