// Matrix products with gradients: matmul (2-D or batched 3-D, optional transposes) and the fused
// linear layer y = act(x · Wᵀ + b).
import type { Activation } from '../backend';
import { assertShape } from '../shape';
import { derived, type Tensor } from '../tensor';
import { binary, sum } from './elementwise';

export interface MatmulOptions {
  transA?: boolean;
  transB?: boolean;
}

/** a: [M, K] (or [K, M] with transA), b: [K, N] (or [N, K] with transB) → [M, N]; 3-D: a leading batch dim on both. */
export function matmul(a: Tensor, b: Tensor, opts: MatmulOptions = {}): Tensor {
  const transA = opts.transA ?? false, transB = opts.transB ?? false;
  const rank = a.shape.length;
  if ((rank !== 2 && rank !== 3) || b.shape.length !== rank) throw new Error(`matmul: expected two 2-D or two 3-D tensors, got [${a.shape}] and [${b.shape}]`);
  const batch = rank === 3 ? a.shape[0] : 1;
  if (rank === 3 && b.shape[0] !== batch) throw new Error(`matmul: batch ${batch} vs ${b.shape[0]}`);
  const [ar, ac] = a.shape.slice(-2), [br, bc] = b.shape.slice(-2);
  const M = transA ? ac : ar, K = transA ? ar : ac;
  const Kb = transB ? bc : br, N = transB ? br : bc;
  if (K !== Kb) throw new Error(`matmul: inner dims differ: [${a.shape}]${transA ? 'ᵀ' : ''} · [${b.shape}]${transB ? 'ᵀ' : ''}`);
  const s = a.backend.matmul(a.storage, b.storage, null, {
    M, N, K, batch, transA, transB, strideA: M * K, strideB: K * N, activation: 'none',
  });
  const outShape = rank === 3 ? [batch, M, N] : [M, N];
  return derived(a.backend, s, outShape, [a, b], 'matmul', (dy) => [
    () => (transA ? matmul(b, dy, { transA: transB, transB: true }) : matmul(dy, b, { transB: !transB })),
    () => (transB ? matmul(dy, a, { transA: true, transB: transA }) : matmul(a, dy, { transA: !transA })),
  ]);
}

/** x: [B, in], weight: [out, in] (PyTorch layout), bias: [out] → [B, out]. */
export function linear(x: Tensor, weight: Tensor, bias: Tensor | null, activation: Activation = 'none'): Tensor {
  const [B, inF] = x.shape;
  const outF = weight.shape[0];
  assertShape('linear weight', weight.shape, [outF, inF]);
  assertShape('linear input', x.shape, [B, inF]);
  if (bias) assertShape('linear bias', bias.shape, [outF]);
  const s = x.backend.matmul(x.storage, weight.storage, bias?.storage ?? null, {
    M: B, N: outF, K: inF, batch: 1, transA: false, transB: true, strideA: 0, strideB: 0, activation,
  });
  const inputs = bias ? [x, weight, bias] : [x, weight];
  const y: Tensor = derived(x.backend, s, [B, outF], inputs, `linear_${activation}`, (dy) => {
    const dz = activation === 'relu' ? binary('reluGrad', dy, y) : dy;
    const grads = [() => matmul(dz, weight), () => matmul(dz, x, { transA: true })];
    return bias ? [...grads, () => sum(dz, 0)] : grads;
  });
  return y;
}
