// Every kernel against the CPU reference, forward and backward, on awkward shapes and extreme values.
// The same cases run in Node (Dawn) and in headless Chromium, so both adapters are held to one standard.
import type { Backend } from '../backend';
import { backward } from '../autograd';
import { CpuBackend } from '../cpu/backend';
import { tensor } from '../factory';
import { Rng } from '@tabfleet/protocol';
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
  /** Token ids uploaded with their positions grouped by id (tensor(…, { groupIds })), as training does. */
  groupIds?: boolean;
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
  const xs = c.inputs.map((s, i) => tensor(be, data[i], s.shape, (s.grad ?? true) && !(data[i] instanceof Int32Array) && !c.forwardOnly, { groupIds: s.groupIds }));
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

interface ConvSpec { B: number; inC: number; H: number; W: number; outC: number; kH: number; kW: number; stride: number; pad: number; bias: boolean }

const conv = (c: ConvSpec, kind: InputSpec['kind'] = 'normal', tol?: KernelCase['tol']): KernelCase => ({
  name: `conv2d [${c.B},${c.inC},${c.H},${c.W}] k${c.kH}×${c.kW} → ${c.outC} s${c.stride} p${c.pad}${c.bias ? ' +bias' : ''}${kind === 'normal' ? '' : ` ${kind}`}`,
  inputs: [{ shape: [c.B, c.inC, c.H, c.W], kind }, { shape: [c.outC, c.inC, c.kH, c.kW] }, ...(c.bias ? [{ shape: [c.outC] }] : [])],
  fn: ([x, w, b]) => ops.conv2d(x, w, b ?? null, { stride: c.stride, pad: c.pad }),
  tol,
});

const pool = (shape: number[], k: number, stride: number, ties = false): KernelCase => ({
  name: `maxpool [${shape}] k${k} s${stride}${ties ? ' with ties' : ''}`,
  inputs: [{ shape }],
  // Ties: 1e4 + 1e-3·x rounds to a handful of f32 values (ulp 2⁻¹⁰ at 1e4), so windows hold equal
  // maxima while each element keeps its own gradient path; dx shows which tied index won (the first).
  fn: ([x]) => (ties ? ops.scale(ops.maxPool2d(ops.addScalar(ops.scale(x, 1e-3), 1e4), k, stride), 1e3) : ops.maxPool2d(x, k, stride)),
});

const ALL_PERMS_4: number[][] = [];
for (let a = 0; a < 4; a++) for (let b = 0; b < 4; b++) for (let c = 0; c < 4; c++) for (let d = 0; d < 4; d++)
  if (new Set([a, b, c, d]).size === 4) ALL_PERMS_4.push([a, b, c, d]);

/** conv2d, max pooling, softmax, layer norm, embedding and permute. */
function layerCases(): KernelCase[] {
  const C = (o: Partial<ConvSpec>): ConvSpec => ({ B: 1, inC: 1, H: 5, W: 5, outC: 1, kH: 3, kW: 3, stride: 1, pad: 0, bias: false, ...o });
  return [
    conv(C({ B: 1, inC: 1, H: 1, W: 1, outC: 1, kH: 1, kW: 1 })),
    conv(C({ B: 1, inC: 3, H: 7, W: 9, outC: 5, kH: 1, kW: 1, bias: true })),
    conv(C({ B: 2, inC: 3, H: 9, W: 11, outC: 6, stride: 2, pad: 1, bias: true })),
    conv(C({ B: 1, inC: 2, H: 8, W: 6, outC: 7, kH: 5, kW: 5, pad: 2, bias: true })),
    conv(C({ B: 3, inC: 5, H: 10, W: 7, outC: 3, stride: 2 })),
    conv(C({ B: 2, inC: 3, H: 11, W: 13, outC: 9, kH: 5, kW: 5, stride: 2, pad: 2, bias: true })),
    conv(C({ B: 1, inC: 6, H: 4, W: 4, outC: 5, kH: 4, kW: 4 })),
    conv(C({ B: 2, inC: 4, H: 6, W: 9, outC: 4, kH: 1, kW: 3, pad: 1, bias: true })),
    conv(C({ B: 1, inC: 2, H: 7, W: 7, outC: 3, stride: 3, pad: 2 })),
    conv(C({ B: 5, inC: 7, H: 12, W: 10, outC: 10, pad: 1, bias: true })),
    conv(C({ B: 2, inC: 3, H: 6, W: 6, outC: 5, pad: 1, bias: true }), 'extreme', { rtol: 1e-4, atol: 1e-2 }),
    // Shapes that take the im2col + matmul route on CPU adapters (K and outH·outW multiples of 4).
    conv(C({ B: 2, inC: 4, H: 8, W: 8, outC: 6, pad: 1, bias: true })),
    conv(C({ B: 3, inC: 4, H: 7, W: 7, outC: 8, stride: 2, pad: 1, bias: true })),
    conv(C({ B: 1, inC: 4, H: 6, W: 6, outC: 4, kH: 5, kW: 5, pad: 2 })),
    conv(C({ B: 2, inC: 8, H: 3, W: 4, outC: 12, kH: 1, kW: 1, bias: true })),
    {
      name: 'conv2d fused relu (im2col route) [2,4,8,8] → 8 p1 +bias',
      inputs: [{ shape: [2, 4, 8, 8] }, { shape: [8, 4, 3, 3] }, { shape: [8] }],
      fn: ([x, w, b]) => ops.conv2d(x, w, b, { pad: 1, activation: 'relu' }),
    },
    {
      name: 'conv2d fused relu (direct route) [2,3,7,5] → 5 s2',
      inputs: [{ shape: [2, 3, 7, 5] }, { shape: [5, 3, 3, 3] }, { shape: [5] }],
      fn: ([x, w, b]) => ops.conv2d(x, w, b, { stride: 2, activation: 'relu' }),
    },
    {
      name: 'CNN shapes [8,1,28,28] conv3×3 p1 →16, relu, pool2, conv3×3 p1 →32, relu, pool2',
      inputs: [{ shape: [8, 1, 28, 28] }, { shape: [16, 1, 3, 3] }, { shape: [16] }, { shape: [32, 16, 3, 3] }, { shape: [32] }],
      fn: ([x, w1, b1, w2, b2]) => {
        const h = ops.maxPool2d(ops.relu(ops.conv2d(x, w1, b1, { pad: 1 })), 2);
        return ops.maxPool2d(ops.relu(ops.conv2d(h, w2, b2, { pad: 1 })), 2);
      },
    },
    pool([1, 1, 4, 4], 2, 2), pool([2, 3, 7, 9], 2, 2), pool([1, 2, 9, 8], 3, 2), pool([1, 1, 5, 6], 3, 1),
    pool([1, 2, 8, 8], 2, 3), pool([1, 1, 1, 1], 1, 1), pool([2, 3, 11, 10], 3, 3), pool([1, 2, 9, 9], 2, 4),
    pool([3, 5, 6, 7], 2, 2, true), pool([2, 2, 7, 7], 3, 2, true), pool([1, 3, 8, 11], 3, 3, true),
    { name: 'maxpool extreme values', inputs: [{ shape: [2, 3, 6, 6], kind: 'extreme' }], fn: ([x]) => ops.maxPool2d(x, 2) },
    // GPT-sized rows too: GPT-2's 50,257 logits, 257 (over a workgroup's 64 lanes, not a multiple).
    ...[[1, 1], [4, 33], [3, 1], [2, 3, 10], [3, 257], [2, 50_257]].map((shape): KernelCase => ({
      name: `softmax [${shape}]`, inputs: [{ shape }], fn: ([x]) => ops.softmax(x),
    })),
    ...[[1, 1], [3, 1, 1], [5, 5], [2, 7, 7], [2, 3, 4, 4], [2, 65, 65]].map((shape): KernelCase => ({
      name: `causal softmax [${shape}]`, inputs: [{ shape }], fn: ([x]) => ops.softmax(x, true),
    })),
    // Fused causal attention (one lane per query row) on the GPU against the CPU reference's own
    // fused loop, and composed (matmul, scale, causal softmax, matmul) on both.
    ...[[1, 1, 4], [2, 5, 8], [3, 17, 12], [2, 64, 32]].flatMap((shape): KernelCase[] => [true, false].map((fused) => ({
      name: `causal attention ${fused ? 'fused' : 'composed'} [${shape}]`, inputs: [{ shape }, { shape }, { shape }],
      fn: ([q, k, v]) => ops.causalAttention(q, k, v, { fused }),
    }))),
    { name: 'softmax extreme values', inputs: [{ shape: [6, 6], kind: 'extreme' }], fn: ([x]) => ops.softmax(x), tol: { rtol: 1e-4, atol: 1e-3 } },
    { name: 'causal softmax extreme values', inputs: [{ shape: [2, 6, 6], kind: 'extreme' }], fn: ([x]) => ops.softmax(x, true), tol: { rtol: 1e-4, atol: 1e-3 } },
    ...[[1, 1], [5, 1], [4, 33], [1, 64], [2, 3, 7], [5, 768], [3, 1000]].map((shape): KernelCase => {
      const Cn = shape[shape.length - 1];
      return { name: `layernorm [${shape}]`, inputs: [{ shape }, { shape: [Cn] }, { shape: [Cn] }], fn: ([x, g, b]) => ops.layerNorm(x, g, b) };
    }),
    {
      name: 'layernorm rows of 1e4 + noise',
      inputs: [{ shape: [5, 33] }, { shape: [33] }, { shape: [33] }],
      fn: ([x, g, b]) => ops.layerNorm(ops.addScalar(x, 1e4), g, b),
    },
    {
      name: 'layernorm constant rows of 1e4',
      inputs: [{ shape: [3, 17] }, { shape: [17] }, { shape: [17] }],
      fn: ([x, g, b]) => ops.layerNorm(ops.addScalar(ops.scale(x, 0), 1e4), g, b),
    },
    {
      name: 'layernorm with frozen gamma and beta (dx only)',
      inputs: [{ shape: [4, 9] }, { shape: [9], grad: false }, { shape: [9], grad: false }],
      fn: ([x, g, b]) => ops.layerNorm(x, g, b),
    },
    { name: 'layernorm extreme values', inputs: [{ shape: [6, 12], kind: 'extreme' }, { shape: [12] }, { shape: [12] }], fn: ([x, g, b]) => ops.layerNorm(x, g, b) },
    ...[[5, 3, 17], [1, 1, 1], [4, 6, 30], [7, 1, 3], [9, 5, 1], [40, 33, 90], [600, 7, 700]].map(([V, D, T]): KernelCase => ({
      name: `embedding V=${V} D=${D} T=${T}${T > V ? ' (repeated ids)' : ''}`,
      inputs: [{ shape: [V, D] }, { shape: [T], kind: { ints: V } }],
      fn: ([table, ids]) => ops.embedding(table, ids),
    })),
    // The gradient from ids grouped by position, O(T·D): GPT-2's vocabulary, rows no id hits, one id everywhere.
    ...[[5, 3, 17], [1, 1, 1], [600, 7, 700], [50_257, 4, 64], [9, 5, 40]].map(([V, D, T]): KernelCase => ({
      name: `embedding, grouped ids, V=${V} D=${D} T=${T}`,
      inputs: [{ shape: [V, D] }, { shape: [T], kind: { ints: V }, groupIds: true }],
      fn: ([table, ids]) => ops.embedding(table, ids),
    })),
    {
      name: 'embedding, grouped ids, all the same id',
      inputs: [{ shape: [6, 3] }, { shape: [33], kind: { ints: 1 }, groupIds: true }],
      fn: ([table, ids]) => ops.embedding(table, ids),
    },
    {
      name: 'embedding ids [2,7] V=4 D=5',
      inputs: [{ shape: [4, 5] }, { shape: [2, 7], kind: { ints: 4 } }],
      fn: ([table, ids]) => ops.embedding(table, ids),
    },
    ...ALL_PERMS_4.map((perm): KernelCase => ({
      name: `permute [2,3,4,5] → [${perm}]`, inputs: [{ shape: [2, 3, 4, 5] }], fn: ([x]) => ops.permute(x, perm),
    })),
    { name: 'permute [1,7,1,3] → [0,2,1,3]', inputs: [{ shape: [1, 7, 1, 3] }], fn: ([x]) => ops.permute(x, [0, 2, 1, 3]) },
    { name: 'sliceRows [3,5,7] rows 1..2', inputs: [{ shape: [3, 5, 7] }], fn: ([x]) => ops.sliceRows(x, 1, 2) },
    { name: 'sliceRows [3,1] row 2 (odd offset)', inputs: [{ shape: [3, 1] }], fn: ([x]) => ops.sliceRows(x, 2, 1) },
    { name: 'sliceRows [3,67,5] rows 1..1 (unaligned)', inputs: [{ shape: [3, 67, 5] }], fn: ([x]) => ops.sliceRows(x, 1, 1) },
    { name: 'permute [5,7] → [1,0]', inputs: [{ shape: [5, 7] }], fn: ([x]) => ops.permute(x, [1, 0]) },
    { name: 'permute [2,3,4] → [2,0,1]', inputs: [{ shape: [2, 3, 4] }], fn: ([x]) => ops.permute(x, [2, 0, 1]) },
    { name: 'permute [9] → [0]', inputs: [{ shape: [9] }], fn: ([x]) => ops.permute(x, [0]) },
    {
      name: 'permute i32 [3,4,5] → [2,0,1]', inputs: [{ shape: [3, 4, 5], kind: { ints: 1000 } }],
      fn: ([x]) => ops.permute(x, [2, 0, 1]), forwardOnly: true,
    },
  ];
}

/** The full table. Shapes include 1, odd sizes, non-multiples of every tile and batch 1. */
export function kernelCases(): KernelCase[] {
  const cases: KernelCase[] = [
    mm(1, 1, 1), mm(1, 7, 1), mm(3, 5, 7), mm(17, 33, 9), mm(64, 64, 64), mm(65, 31, 67),
    mm(5, 9, 3, true, false), mm(5, 9, 3, false, true), mm(13, 70, 11, true, true), mm(128, 784, 10, false, true),
    // 4-aligned shapes that are not multiples of the 8×8 unrolled tile, in every layout.
    mm(12, 20, 36), mm(20, 12, 4, true, false), mm(4, 8, 12, false, true), mm(12, 16, 20, true, true), mm(128, 784, 256, false, true),
    {
      name: 'batched matmul [3,5,7]·[3,7,4]',
      inputs: [{ shape: [3, 5, 7] }, { shape: [3, 7, 4] }],
      fn: ([a, b]) => ops.matmul(a, b),
    },
    {
      name: 'batched matmul 4-aligned [2,12,8]·[2,8,16]',
      inputs: [{ shape: [2, 12, 8] }, { shape: [2, 8, 16] }],
      fn: ([a, b]) => ops.matmul(a, b),
    },
    {
      // One tile wide: the workgroup is fitted to 1 × 16 lanes (attention's per-head products).
      name: 'batched matmul one tile wide [3,72,16]·[3,16,16] and Bᵀ',
      inputs: [{ shape: [3, 72, 16] }, { shape: [3, 16, 16] }],
      fn: ([a, b]) => ops.add(ops.matmul(a, b), ops.matmul(a, b, { transB: true })),
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
    // Past 65,535 workgroups in one dimension (a GPT's logits over GPT-2's vocabulary at context 1,024 are 51M values).
    { name: 'sum axis 0 of [2, 4194305] (past 65,535 workgroups)', inputs: [{ shape: [2, 4_194_305] }], fn: ([x]) => ops.sum(x, 0) },
    {
      name: 'softmax cross-entropy B=4 C=4194305 (its gradient past 65,535 workgroups)',
      inputs: [{ shape: [4, 4_194_305] }, { shape: [4], kind: { ints: 4_194_305 } }],
      fn: ([x, y]) => ops.softmaxCrossEntropy(x, y),
    },
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
    ...[[1, 10], [33, 257]].map(([B, C]): KernelCase => ({
      name: `cross-entropy rows (loss, max probability) B=${B} C=${C}`,
      inputs: [{ shape: [B, C] }, { shape: [B], kind: { ints: C } }],
      fn: ([x, y]) => ops.crossEntropyRows(x, y),
      forwardOnly: true,
    })),
  ];
  cases.push(...layerCases());
  return cases;
}
