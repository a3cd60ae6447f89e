// Every kernel against the CPU reference, forward and backward, on awkward shapes and extreme values.
// The same cases run in Node (Dawn) and in headless Chromium, so both adapters are held to one standard.
import type { Backend } from '../backend';
import { backward } from '../autograd';
import { CpuBackend } from '../cpu/backend';
import { tensor } from '../factory';
import { Rng } from '../random';
import { numel } from '../shape';
import { dispose, Tensor, tidy } from '../tensor';
import * as ops from '../index';
import { mismatches, type Mismatch } from './compare';

export const FORWARD_TOL = { rtol: 1e-4, atol: 1e-5 };
export const GRAD_TOL = { rtol: 1e-3, atol: 1e-3 };

export interface InputSpec {
  shape: number[];
  /** 'normal' (default), 'positive' (for log/sqrt/div), 'extreme' (±1e4 and tiny values), or labels/ids below n. */
  kind?: 'normal' | 'positive' | 'extreme' | { ints: number };
  grad?: boolean;
}

export interface KernelCase {
  name: string;
  inputs: InputSpec[];
  fn: (xs: Tensor[]) => Tensor;
  /** Skip the backward comparison (ops without gradients). */
  forwardOnly?: boolean;
  tol?: { rtol: number; atol: number };
}

export interface CaseResult {
  name: string;
  ok: boolean;
  detail: string;
}

function genInput(rng: Rng, spec: InputSpec): Float32Array | Int32Array {
  const n = numel(spec.shape);
  const kind = spec.kind ?? 'normal';
  if (typeof kind === 'object') return Int32Array.from({ length: n }, () => rng.int(kind.ints));
  return Float32Array.from({ length: n }, (_, i) => {
    if (kind === 'positive') return rng.uniform(0.1, 2);
    if (kind === 'extreme') return [1e4, -1e4, 1e-20, -3e3, 0, 50][i % 6] * (0.5 + rng.next());
    return rng.normal();
  });
}

interface RunOutput {
  y: Float32Array;
  grads: (Float32Array | null)[];
}

async function runOn(be: Backend, c: KernelCase, data: (Float32Array | Int32Array)[], seed: Float32Array | null): Promise<RunOutput> {
  const xs = c.inputs.map((s, i) => tensor(be, data[i], s.shape, (s.grad ?? true) && !(data[i] instanceof Int32Array) && !c.forwardOnly));
  const kept = tidy(() => {
    const y = c.fn(xs);
    if (!c.forwardOnly) backward(y, tensor(be, seed!, [...y.shape]));
    const grads = xs.map((x) => x.grad);
    return [y, ...grads.filter((g): g is Tensor => g !== null)];
  });
  const y = await kept[0].toFloat32();
  const grads: (Float32Array | null)[] = [];
  for (const x of xs) grads.push(x.grad ? await x.grad.toFloat32() : null);
  kept.forEach(dispose);
  xs.forEach(dispose);
  return { y, grads };
}

function describe(m: Mismatch[]): string {
  return m.map((x) => `[${x.index}] got ${x.actual} want ${x.expected}`).join('; ');
}

export async function runKernelCase(gpu: Backend, c: KernelCase, seedValue = 1): Promise<CaseResult> {
  const rng = new Rng(seedValue);
  const data = c.inputs.map((s) => genInput(rng, s));
  const cpu = new CpuBackend('f32');
  try {
    // Output shape from a CPU dry run decides the seed gradient's shape.
    const probe = tidy(() => c.fn(c.inputs.map((s, i) => tensor(cpu, data[i], s.shape))));
    const seed = c.forwardOnly ? null : Float32Array.from({ length: probe.size }, () => rng.normal());
    const want = await runOn(cpu, c, data, seed);
    const got = await runOn(gpu, c, data, seed);
    const tol = c.tol ?? FORWARD_TOL;
    const fwd = mismatches(got.y, want.y, tol.rtol, tol.atol);
    if (fwd.length) return { name: c.name, ok: false, detail: `forward: ${describe(fwd)}` };
    for (let i = 0; i < want.grads.length; i++) {
      const w = want.grads[i], g = got.grads[i];
      if (!w && !g) continue;
      if (!w || !g) return { name: c.name, ok: false, detail: `input ${i}: gradient present on one backend only` };
      const bad = mismatches(g, w, GRAD_TOL.rtol, GRAD_TOL.atol);
      if (bad.length) return { name: c.name, ok: false, detail: `grad of input ${i}: ${describe(bad)}` };
    }
    return { name: c.name, ok: true, detail: '' };
  } catch (e) {
    return { name: c.name, ok: false, detail: `threw: ${(e as Error).stack ?? e}` };
  }
}

const mm = (M: number, K: number, N: number, transA = false, transB = false): KernelCase => ({
  name: `matmul ${M}x${K}x${N}${transA ? ' Aᵀ' : ''}${transB ? ' Bᵀ' : ''}`,
  inputs: [{ shape: transA ? [K, M] : [M, K] }, { shape: transB ? [N, K] : [K, N] }],
  fn: ([a, b]) => ops.matmul(a, b, { transA, transB }),
});

/** The full table. Shapes include 1, odd sizes, non-multiples of every tile and batch 1. */
export function kernelCases(): KernelCase[] {
  const cases: KernelCase[] = [
    mm(1, 1, 1), mm(1, 7, 1), mm(3, 5, 7), mm(17, 33, 9), mm(64, 64, 64), mm(65, 31, 67),
    mm(5, 9, 3, true, false), mm(5, 9, 3, false, true), mm(13, 70, 11, true, true), mm(128, 784, 10, false, true),
    {
      name: 'batched matmul [3,5,7]·[3,7,4]',
      inputs: [{ shape: [3, 5, 7] }, { shape: [3, 7, 4] }],
      fn: ([a, b]) => ops.matmul(a, b),
    },
    {
      name: 'batched matmul Bᵀ [2,9,6]·[2,9,6]ᵀ',
      inputs: [{ shape: [2, 9, 6] }, { shape: [2, 9, 6] }],
      fn: ([a, b]) => ops.matmul(a, b, { transB: true }),
    },
    ...[1, 3, 37].flatMap((B) => [
      { name: `linear relu B=${B}`, inputs: [{ shape: [B, 13] }, { shape: [7, 13] }, { shape: [7] }], fn: ([x, w, b]: Tensor[]) => ops.linear(x, w, b, 'relu') },
      { name: `linear B=${B}`, inputs: [{ shape: [B, 5] }, { shape: [3, 5] }, { shape: [3] }], fn: ([x, w, b]: Tensor[]) => ops.linear(x, w, b) },
    ]),
    { name: 'linear extreme values', inputs: [{ shape: [4, 6], kind: 'extreme' }, { shape: [5, 6] }, { shape: [5] }], fn: ([x, w, b]) => ops.linear(x, w, b), tol: { rtol: 1e-4, atol: 1e-2 } },
    ...(['neg', 'exp', 'relu', 'gelu', 'tanh', 'square'] as const).map((op): KernelCase => ({
      name: `unary ${op} [1] and [1031]`,
      inputs: [{ shape: [1031] }],
      fn: ([x]) => ops[op](x),
    })),
    { name: 'unary log/sqrt positive', inputs: [{ shape: [257], kind: 'positive' }], fn: ([x]) => ops.add(ops.log(x), ops.sqrt(x)) },
    { name: 'scale and addScalar', inputs: [{ shape: [3, 3] }], fn: ([x]) => ops.addScalar(ops.scale(x, -2.5), 0.75) },
    { name: 'unary on extreme values', inputs: [{ shape: [60], kind: 'extreme' }], fn: ([x]) => ops.relu(x), tol: FORWARD_TOL },
    { name: 'add broadcast row', inputs: [{ shape: [5, 7] }, { shape: [7] }], fn: ([a, b]) => ops.add(a, b) },
    { name: 'sub broadcast column', inputs: [{ shape: [5, 7] }, { shape: [5, 1] }], fn: ([a, b]) => ops.sub(a, b) },
    { name: 'mul broadcast 4-D', inputs: [{ shape: [2, 3, 4, 5] }, { shape: [3, 1, 5] }], fn: ([a, b]) => ops.mul(a, b) },
    { name: 'div positive', inputs: [{ shape: [9, 2] }, { shape: [9, 2], kind: 'positive' }], fn: ([a, b]) => ops.div(a, b) },
    { name: 'sum axis 0', inputs: [{ shape: [37, 5] }], fn: ([x]) => ops.sum(x, 0) },
    { name: 'sum axis 1 keepdims', inputs: [{ shape: [4, 9, 3] }], fn: ([x]) => ops.sum(x, 1, true) },
    { name: 'mean all', inputs: [{ shape: [1001] }], fn: ([x]) => ops.mean(x) },
    { name: 'max axis -1', inputs: [{ shape: [6, 11] }], fn: ([x]) => ops.max(x, -1), forwardOnly: true },
    ...[[1, 10], [7, 3], [128, 10], [5, 65]].map(([B, C]): KernelCase => ({
      name: `softmax cross-entropy B=${B} C=${C}`,
      inputs: [{ shape: [B, C] }, { shape: [B], kind: { ints: C } }],
      fn: ([x, y]) => ops.softmaxCrossEntropy(x, y),
    })),
    {
      name: 'softmax cross-entropy extreme logits',
      inputs: [{ shape: [6, 10], kind: 'extreme' }, { shape: [6], kind: { ints: 10 } }],
      fn: ([x, y]) => ops.softmaxCrossEntropy(x, y),
      tol: { rtol: 1e-4, atol: 1e-3 },
    },
  ];
  return cases;
}
