// matmul_unrolled: one pipeline per operand layout, whatever the shapes and the epilogue. Each
// pipeline costs SwiftShader 0.4–0.8 s of LLVM in every page; with the workgroup fitted to the shape
// and the epilogue as constants, an MLP tab compiled 4 of them, the char transformer 12, the CNN 11.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MatmulParams } from '../../backend';
import { createNodeGpuBackend } from '../../node-gpu';
import { tensor } from '../../factory';
import { matmul } from '../../ops/matmul';
import { unrolledUniforms } from './matmul';

const params = (p: Partial<MatmulParams>): MatmulParams => ({ M: 8, N: 16, K: 4, batch: 1, transA: false, transB: false, strideA: 0, strideB: 0, activation: 'none', ...p });
const fields = (b: ArrayBuffer) => [...new Uint32Array(b)];

test('the unrolled matmul\'s uniforms: shapes, 8×16 tiles over the batch, 16 lanes a workgroup, the epilogue as flags', () => {
  // [3 × 64, 64] · [64, 16]: 1 tile column, 8 tile rows, 3 batches: 24 tiles, 2 workgroups.
  const a = unrolledUniforms(params({ M: 64, N: 16, K: 64, batch: 3, strideA: 4096, strideB: 1024 }), false);
  assert.deepEqual(fields(a.uniforms).slice(0, 10), [64, 16, 64, 4096, 1024, 1, 8, 3, 32, 0]);
  assert.deepEqual(a.workgroups, [2, 1]);
  // The MLP's first layer: bias and ReLU are flags 1 and 4; a conv's per-row bias flag 2.
  assert.equal(fields(unrolledUniforms(params({ M: 32, N: 256, K: 784, activation: 'relu' }), true).uniforms)[9], 1 | 4);
  assert.equal(fields(unrolledUniforms(params({ M: 8, N: 784, K: 36, biasPerRow: true }), true).uniforms)[9], 1 | 2);
  // Past 65,535 workgroups in x the grid takes a second dimension (rowStride: x lanes in all).
  const big = unrolledUniforms(params({ M: 8 * 1024, N: 16 * 1024, K: 4 }), false);
  assert.deepEqual(big.workgroups, [65535, 2]);
  assert.equal(fields(big.uniforms)[8], 65535 * 16);
});

test('an MLP\'s and a batched product\'s matmuls compile one unrolled pipeline per layout, and are right', async () => {
  const gpu = await createNodeGpuBackend();
  // [M, K, N, batch]: the MLP's first layer at batch 32 and 256, an output 12 wide, batches of 16 and 64.
  const shapes = [[32, 784, 256, 1], [256, 784, 256, 1], [32, 256, 12, 1], [3, 72, 16, 16], [5, 16, 64, 64]];
  for (const [M, K, N, batch] of shapes) {
    const a = tensor(gpu, Float32Array.from({ length: batch * M * K }, (_, i) => ((i * 7) % 13) - 6), batch > 1 ? [batch, M, K] : [M, K]);
    const b = tensor(gpu, Float32Array.from({ length: batch * K * N }, (_, i) => ((i * 5) % 11) - 5), batch > 1 ? [batch, N, K] : [N, K]);
    const c = await matmul(a, b, { transB: true }).data();
    // Spot-check the last element of the last batch against a scalar loop.
    let want = 0;
    for (let k = 0; k < K; k++) want += (((((batch - 1) * M + M - 1) * K + k) * 7) % 13 - 6) * (((((batch - 1) * N + N - 1) * K + k) * 5) % 11 - 5);
    assert.equal(c[c.length - 1], want, `[${batch}, ${M}, ${K}]·[${batch}, ${N}, ${K}]ᵀ`);
  }
  const unrolled = gpu.rt.compiledPipelines().filter((k) => k.startsWith('matmul_unrolled'));
  assert.deepEqual(unrolled, ['matmul_unrolled:main_nt'], 'one pipeline for every shape and batch');
});
