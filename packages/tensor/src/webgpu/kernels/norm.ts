// Layer norm wrappers: forward (one invocation per row) and backward (rows for dx and columns for
// dgamma/dbeta in a single dispatch).
import type { GpuRuntime, GpuStorage } from '../runtime';
import { f, grid1d, packUniforms, u } from './common';
import { rowsGrid, type RowVariant } from './softmax';

const WG = 64;

/** x [rows, C], gamma [C], beta [C] → y [rows, C], mean [rows], rstd [rows]. */
export function layerNormKernel(
  rt: GpuRuntime, x: GpuStorage, gamma: GpuStorage, beta: GpuStorage, y: GpuStorage, mean: GpuStorage, rstd: GpuStorage,
  rows: number, C: number, eps: number, variant: RowVariant = 'invocation',
): void {
  if (variant === 'workgroup') {
    const { workgroups, rowGroups } = rowsGrid(rows);
    rt.dispatch({ shader: 'layernorm_wg', constants: { WG }, uniforms: packUniforms([u(rows), u(rowGroups), u(C), f(eps)]), buffers: [x, gamma, beta, y, mean, rstd], workgroups });
    return;
  }
  const { workgroups, rowStride } = grid1d(rows, WG);
  rt.dispatch({
    shader: 'layernorm', constants: { WG }, uniforms: packUniforms([u(rows), u(rowStride), u(C), f(eps)]),
    buffers: [x, gamma, beta, y, mean, rstd], workgroups,
  });
}

/** dy, x [rows, C], gamma [C], mean, rstd [rows] → dx [rows, C], dgamma [C], dbeta [C]. */
export function layerNormBackwardKernel(
  rt: GpuRuntime, dy: GpuStorage, x: GpuStorage, gamma: GpuStorage, mean: GpuStorage, rstd: GpuStorage,
  dx: GpuStorage, dgamma: GpuStorage, dbeta: GpuStorage, rows: number, C: number,
): void {
  const { workgroups, rowStride } = grid1d(rows + C, WG);
  rt.dispatch({
    shader: 'layernorm_backward', constants: { WG }, uniforms: packUniforms([u(rows), u(rowStride), u(C), u(0)]),
    buffers: [dy, x, gamma, mean, rstd, dx, dgamma, dbeta], workgroups,
  });
}
