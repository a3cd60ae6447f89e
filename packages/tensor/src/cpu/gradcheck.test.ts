// The CPU reference's gradients against central finite differences, in f64, for every differentiable
// op. The reference defines what the GPU kernels must match, so its backward rules are checked on
// their own here: L = Σ y·r for a fixed random r, ∂L/∂x_i ≈ (L(x + εe_i) − L(x − εe_i)) / 2ε.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backward } from '../autograd';
import { tensor } from '../factory';
import * as ops from '../index';
import { Rng } from '@tabfleet/protocol';
import { numel } from '../shape';
import { noGrad, tidy, type Tensor } from '../tensor';
import { CpuBackend } from './backend';

const EPS = 1e-6;
const RTOL = 1e-5;
/** Absolute floor for gradients that are (numerically) zero, e.g. masked softmax entries. */
const ATOL = 1e-8;

interface GradInput {
  shape: number[];
  /** 'normal' (default), 'positive' (0.2 … 2, for log/sqrt/div), or i32 ids below n (no gradient). */
  kind?: 'normal' | 'positive' | { ints: number };
}

interface GradCase {
  name: string;
  inputs: GradInput[];
  fn: (xs: Tensor[]) => Tensor;
}

function makeInput(rng: Rng, s: GradInput): Float32Array | Int32Array {
  const n = numel(s.shape);
  const kind = s.kind ?? 'normal';
  if (typeof kind === 'object') return Int32Array.from({ length: n }, () => rng.int(kind.ints));
  return Float32Array.from({ length: n }, () => (kind === 'positive' ? rng.uniform(0.2, 2) : rng.normal()));
}

function gradcheck(c: GradCase, seed = 11): void {
  const be = new CpuBackend('f64');
  const rng = new Rng(seed);
  const xs = c.inputs.map((s) => {
    const data = makeInput(rng, s);
    return tensor(be, data, s.shape, !(data instanceof Int32Array));
  });
  const raw = (t: Tensor) => be.raw(t.storage) as Float64Array;

  // Analytic gradients of L = Σ y·r.
  const y = c.fn(xs);
  const r = Float32Array.from({ length: y.size }, () => rng.normal());
  backward(y, tensor(be, r, [...y.shape]));
  const loss = (): number => {
    let L = 0;
    noGrad(() => tidy(() => {
      const out = raw(c.fn(xs));
      for (let i = 0; i < r.length; i++) L += out[i] * r[i];
    }));
    return L;
  };

  const failures: string[] = [];
  xs.forEach((x, k) => {
    if (x.dtype === 'i32') return;
    assert.ok(x.grad, `${c.name}: input ${k} got no gradient`);
    const analytic = raw(x.grad!);
    const data = raw(x);
    for (let i = 0; i < data.length; i++) {
      const orig = data[i];
      data[i] = orig + EPS;
      const Lp = loss();
      data[i] = orig - EPS;
      const Lm = loss();
      data[i] = orig;
      const numeric = (Lp - Lm) / (2 * EPS);
      const a = analytic[i];
      if (!(Math.abs(a - numeric) <= ATOL + RTOL * Math.max(Math.abs(a), Math.abs(numeric)))) {
        if (failures.length < 5) failures.push(`input ${k} [${i}]: analytic ${a} numeric ${numeric}`);
        else failures.length === 5 && failures.push('…');
      }
    }
  });
  assert.deepEqual(failures, [], `${c.name}: ${failures.join('; ')}`);
}

const cases: GradCase[] = [
  // matmul, every transpose combination, and batched.
  ...[false, true].flatMap((transA) => [false, true].map((transB): GradCase => ({
    name: `matmul [3,4]·[4,5]${transA ? ' Aᵀ' : ''}${transB ? ' Bᵀ' : ''}`,
    inputs: [{ shape: transA ? [4, 3] : [3, 4] }, { shape: transB ? [5, 4] : [4, 5] }],
    fn: ([a, b]) => ops.matmul(a, b, { transA, transB }),
  }))),
  { name: 'batched matmul [2,3,4]·[2,5,4]ᵀ', inputs: [{ shape: [2, 3, 4] }, { shape: [2, 5, 4] }], fn: ([a, b]) => ops.matmul(a, b, { transB: true }) },
  { name: 'linear relu', inputs: [{ shape: [4, 5] }, { shape: [3, 5] }, { shape: [3] }], fn: ([x, w, b]) => ops.linear(x, w, b, 'relu') },
  { name: 'linear', inputs: [{ shape: [2, 3] }, { shape: [4, 3] }, { shape: [4] }], fn: ([x, w, b]) => ops.linear(x, w, b) },
  // unary
  ...(['neg', 'exp', 'relu', 'gelu', 'tanh', 'square'] as const).map((op): GradCase => ({
    name: `unary ${op}`, inputs: [{ shape: [11] }], fn: ([x]) => ops[op](x),
  })),
  ...(['log', 'sqrt'] as const).map((op): GradCase => ({
    name: `unary ${op}`, inputs: [{ shape: [7], kind: 'positive' }], fn: ([x]) => ops[op](x),
  })),
  { name: 'scale and addScalar', inputs: [{ shape: [5] }], fn: ([x]) => ops.addScalar(ops.scale(x, -1.5), 0.25) },
  // binary with broadcasting
  { name: 'add [3,4] + [4]', inputs: [{ shape: [3, 4] }, { shape: [4] }], fn: ([a, b]) => ops.add(a, b) },
  { name: 'sub [3,4] − [3,1]', inputs: [{ shape: [3, 4] }, { shape: [3, 1] }], fn: ([a, b]) => ops.sub(a, b) },
  { name: 'mul [2,3,2,5] · [3,1,5]', inputs: [{ shape: [2, 3, 2, 5] }, { shape: [3, 1, 5] }], fn: ([a, b]) => ops.mul(a, b) },
  { name: 'div [3,4] / [1,4]', inputs: [{ shape: [3, 4] }, { shape: [1, 4], kind: 'positive' }], fn: ([a, b]) => ops.div(a, b) },
  // reductions
  { name: 'sum all', inputs: [{ shape: [3, 4] }], fn: ([x]) => ops.sum(x) },
  { name: 'sum axis 1 keepdims', inputs: [{ shape: [2, 3, 4] }], fn: ([x]) => ops.sum(x, 1, true) },
  { name: 'mean all', inputs: [{ shape: [7] }], fn: ([x]) => ops.mean(x) },
  { name: 'mean axis 0', inputs: [{ shape: [5, 3] }], fn: ([x]) => ops.mean(x, 0) },
  // losses and softmax
  { name: 'softmax cross-entropy', inputs: [{ shape: [4, 5] }, { shape: [4], kind: { ints: 5 } }], fn: ([x, y]) => ops.softmaxCrossEntropy(x, y) },
  { name: 'softmax', inputs: [{ shape: [3, 6] }], fn: ([x]) => ops.softmax(x) },
  { name: 'causal softmax [2,4,4]', inputs: [{ shape: [2, 4, 4] }], fn: ([x]) => ops.softmax(x, true) },
  { name: 'fused causal attention [2,5,4]', inputs: [{ shape: [2, 5, 4] }, { shape: [2, 5, 4] }, { shape: [2, 5, 4] }], fn: ([q, k, v]) => ops.causalAttention(q, k, v, { fused: true }) },
  // convolution and pooling
  {
    name: 'conv2d 3×3 stride 2 pad 1 + bias',
    inputs: [{ shape: [2, 3, 6, 5] }, { shape: [4, 3, 3, 3] }, { shape: [4] }],
    fn: ([x, w, b]) => ops.conv2d(x, w, b, { stride: 2, pad: 1 }),
  },
  { name: 'conv2d 5×5 pad 2', inputs: [{ shape: [1, 2, 5, 4] }, { shape: [3, 2, 5, 5] }], fn: ([x, w]) => ops.conv2d(x, w, null, { pad: 2 }) },
  { name: 'conv2d 1×3 stride 3', inputs: [{ shape: [1, 2, 4, 7] }, { shape: [2, 2, 1, 3] }], fn: ([x, w]) => ops.conv2d(x, w, null, { stride: 3 }) },
  { name: 'maxpool k2 s2 (remainder)', inputs: [{ shape: [2, 2, 5, 7] }], fn: ([x]) => ops.maxPool2d(x, 2) },
  { name: 'maxpool k3 s2 (overlapping)', inputs: [{ shape: [1, 2, 7, 6] }], fn: ([x]) => ops.maxPool2d(x, 3, 2) },
  // normalization, embedding, permute
  { name: 'layernorm [3,5]', inputs: [{ shape: [3, 5] }, { shape: [5] }, { shape: [5] }], fn: ([x, g, b]) => ops.layerNorm(x, g, b) },
  { name: 'layernorm [2,2,8]', inputs: [{ shape: [2, 2, 8] }, { shape: [8] }, { shape: [8] }], fn: ([x, g, b]) => ops.layerNorm(x, g, b) },
  { name: 'embedding with repeated ids', inputs: [{ shape: [4, 3] }, { shape: [9], kind: { ints: 4 } }], fn: ([t, ids]) => ops.embedding(t, ids) },
  { name: 'permute [2,3,4,2] → [0,2,1,3]', inputs: [{ shape: [2, 3, 4, 2] }], fn: ([x]) => ops.permute(x, [0, 2, 1, 3]) },
  { name: 'permute [2,3,4,2] → [3,1,0,2]', inputs: [{ shape: [2, 3, 4, 2] }], fn: ([x]) => ops.permute(x, [3, 1, 0, 2]) },
  {
    name: 'small CNN: conv, relu, pool, linear, cross-entropy',
    inputs: [{ shape: [2, 1, 6, 6] }, { shape: [3, 1, 3, 3] }, { shape: [3] }, { shape: [4, 12] }, { shape: [4] }, { shape: [2], kind: { ints: 4 } }],
    fn: ([x, w, b, fw, fb, y]) => {
      const h = ops.maxPool2d(ops.relu(ops.conv2d(x, w, b, { pad: 1 })), 3);
      return ops.softmaxCrossEntropy(ops.linear(h.reshape([2, 12]), fw, fb), y);
    },
  },
];

for (const c of cases) test(`gradcheck: ${c.name}`, () => gradcheck(c));
