// The CPU reference's matmul against the plain triple loop it replaced: every output sums its K
// products in f64 in ascending k, so the loop order that keeps reads contiguous changes no bit.
// Every transpose, batch strides (broadcast too), bias by column and by row, ReLU, and sizes that
// leave remainders past the four-wide blocks.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Rng } from '@tabfleet/protocol';
import type { MatmulParams } from '../backend';
import { CpuBackend } from './backend';

function naive(A: Float32Array | Float64Array, B: Float32Array | Float64Array, bias: Float32Array | Float64Array | null, p: MatmulParams, out: Float32Array | Float64Array) {
  for (let z = 0; z < p.batch; z++) {
    const oa = z * p.strideA, ob = z * p.strideB, oc = z * p.M * p.N;
    for (let i = 0; i < p.M; i++) {
      for (let j = 0; j < p.N; j++) {
        let acc = 0;
        for (let k = 0; k < p.K; k++) {
          const av = p.transA ? A[oa + k * p.M + i] : A[oa + i * p.K + k];
          const bv = p.transB ? B[ob + j * p.K + k] : B[ob + k * p.N + j];
          acc += av * bv;
        }
        if (bias) acc += p.biasPerRow ? bias[i] : bias[j];
        if (p.activation === 'relu' && acc < 0) acc = 0;
        out[oc + i * p.N + j] = acc;
      }
    }
  }
  return out;
}

for (const precision of ['f32', 'f64'] as const) {
  test(`matmul (${precision}) gives the plain triple loop's bits for every layout`, () => {
    const backend = new CpuBackend(precision);
    const Float = precision === 'f64' ? Float64Array : Float32Array;
    const rng = new Rng(7);
    const values = (n: number) => Float32Array.from(Array.from({ length: n }, () => rng.uniform(-0.5, 0.5)));
    let cases = 0;
    for (const [M, N, K] of [[1, 1, 1], [3, 5, 7], [8, 9, 4], [6, 13, 11], [32, 10, 33]]) {
      for (const transA of [false, true]) {
        for (const transB of [false, true]) {
          for (const [batch, broadcastB] of [[1, false], [3, false], [3, true]] as const) {
            const bias = cases % 3 === 0 ? null : values(cases % 3 === 1 ? N : M);
            const p: MatmulParams = {
              M, N, K, batch, transA, transB, strideA: M * K, strideB: broadcastB ? 0 : K * N,
              activation: cases % 2 ? 'relu' : 'none', biasPerRow: cases % 3 === 2,
            };
            const [a, b] = [backend.upload(values(batch * M * K)), backend.upload(values((broadcastB ? 1 : batch) * K * N))];
            const c = bias && backend.upload(bias);
            const got = backend.raw(backend.matmul(a, b, c, p));
            const raw = (x: typeof a) => backend.raw(x) as Float32Array | Float64Array;
            const want = naive(raw(a), raw(b), c && raw(c), p, new Float(batch * M * N));
            assert.deepEqual([...got], [...want], `${M}×${N}×${K} transA ${transA} transB ${transB} batch ${batch}${broadcastB ? ' (B broadcast)' : ''}`);
            cases++;
          }
        }
      }
    }
    assert.equal(cases, 60);
  });
}
