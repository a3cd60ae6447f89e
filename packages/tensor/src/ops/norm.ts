// Layer norm, embedding lookup and permute, with gradients.
import { assertShape, numel } from '../shape';
import { derived, type Tensor } from '../tensor';

/** Normalizes over the last dim: x [..., C], gamma [C], beta [C] → [..., C]. */
export function layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps = 1e-5): Tensor {
  const C = x.shape[x.shape.length - 1];
  const rows = x.size / C;
  assertShape('layerNorm gamma', gamma.shape, [C]);
  assertShape('layerNorm beta', beta.shape, [C]);
  const be = x.backend;
  const { y, mean, rstd } = be.layerNorm(x.storage, gamma.storage, beta.storage, rows, C, eps);
  const stats = [derived(be, mean, [rows], [], 'ln_mean', () => []), derived(be, rstd, [rows], [], 'ln_rstd', () => [])];
  return derived(be, y, x.shape, [x, gamma, beta], 'layernorm', (dy) => {
    // The kernel makes all three gradients at once; wrapping them together lets the scope free the
    // ones no input asks for (e.g. a frozen gamma) instead of leaking their storage.
    let cached: Tensor[] | null = null;
    const grads = (): Tensor[] => (cached ??= (() => {
      const g = be.layerNormBackward(dy.storage, x.storage, gamma.storage, stats[0].storage, stats[1].storage, rows, C);
      return [
        derived(be, g.dx, x.shape, [], 'ln_dx', () => []),
        derived(be, g.dgamma, [C], [], 'ln_dgamma', () => []),
        derived(be, g.dbeta, [C], [], 'ln_dbeta', () => []),
      ];
    })());
    return [() => grads()[0], () => grads()[1], () => grads()[2]];
  });
}

/** table: [V, D], ids: i32 [...] → [..., D]. */
export function embedding(table: Tensor, ids: Tensor): Tensor {
  const [V, D] = table.shape;
  assertShape('embedding table', table.shape, [V, D]);
  if (ids.dtype !== 'i32') throw new Error('embedding ids must be i32');
  const T = ids.size;
  const be = table.backend;
  return derived(be, be.embedding(table.storage, ids.storage, T, V, D), [...ids.shape, D], [table, ids], 'embedding', (dy) => [
    () => derived(
      be,
      be.embeddingBackward(dy.storage, ids.storage, T, V, D, ids.idGroups ? { index: ids.idGroups.index.storage, rows: ids.idGroups.rows } : undefined),
      [V, D],
      [],
      'embedding_grad',
      () => [],
    ),
    null,
  ]);
}

/**
 * Rows [start, start + count) of x along its first dim: x [N, ...rest] → [count, ...rest] (a copy:
 * WebGPU binds only 256-byte aligned offsets). Its gradient is dy in those rows and zero elsewhere.
 */
export function sliceRows(x: Tensor, start: number, count: number): Tensor {
  const [N, ...rest] = x.shape;
  if (!(Number.isInteger(start) && Number.isInteger(count) && start >= 0 && count >= 1 && start + count <= N)) throw new Error(`sliceRows: rows [${start}, ${start + count}) of [${x.shape}]`);
  if (x.dtype !== 'f32') throw new Error('sliceRows: f32 only');
  const rowSize = numel(rest), be = x.backend;
  const out = be.alloc(count * rowSize, 'f32');
  be.copyRange(x.storage, start * rowSize, out, 0, count * rowSize);
  return derived(be, out, [count, ...rest], [x], 'slice_rows', (dy) => [() => {
    const dx = be.alloc(x.size, 'f32');
    be.fill(dx, 0);
    be.copyRange(dy.storage, 0, dx, start * rowSize, count * rowSize);
    return derived(be, dx, [...x.shape], [], 'slice_rows_grad', () => []);
  }]);
}

/** Reorders dims (rank ≤ 4): output dim i is input dim perm[i]. */
export function permute(x: Tensor, perm: number[]): Tensor {
  const rank = x.shape.length;
  if (perm.length !== rank || [...perm].sort().some((p, i) => p !== i)) throw new Error(`permute: [${perm}] is not a permutation of ${rank} dims`);
  if (rank > 4) throw new Error('permute supports rank ≤ 4');
  const outShape = perm.map((p) => x.shape[p]);
  const inverse = perm.map((_, i) => perm.indexOf(i));
  const be = x.backend;
  if (numel(outShape) !== x.size) throw new Error('permute: size mismatch');
  return derived(be, be.permute(x.storage, [...x.shape], perm), outShape, [x], 'permute', (dy) => [() => permute(dy, inverse)], x.dtype);
}
