// Row softmax wrappers (optionally causal) and its backward, in two variants: one invocation per row,
// or one workgroup per row (rowsGrid) whose lanes share the row's reductions.
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

const WG = 64;

/**
 * How row-wise kernels (softmax, its backward, layernorm) spread a row: `invocation`, one lane per row;
 * `workgroup`, one workgroup per row sharing its reductions (a GPU's many lanes on few long rows, e.g.
 * 50,257 logits). Measured on SwiftShader (Dawn, 2 cores, median of 5, lane vs workgroup): causal
 * softmax [4096, 128] 19.0 vs 455 ms, its backward 22.3 vs 288 ms, layernorm [1024, 768] 32.2 vs
 * 148 ms, [64, 768] 2.7 vs 10.1 ms, softmax [256, 50257] 711 vs 704 ms: barriers cost more than the
 * lanes win there, so CPU adapters take `invocation`. GPUs take `workgroup`, unmeasured here (no GPU).
 */
export type RowVariant = 'invocation' | 'workgroup';

/** One workgroup per row: at most 65,535 a dimension, rows past that on y. */
export function rowsGrid(rows: number): { workgroups: [number, number]; rowGroups: number } {
  const rowGroups = Math.min(rows, 65_535);
  return { workgroups: [rowGroups, Math.ceil(rows / rowGroups)], rowGroups };
}

/** x [rows, C] → y [rows, C]; causalT > 0 masks columns > r mod causalT in row r. */
export function softmaxKernel(rt: GpuRuntime, x: GpuStorage, y: GpuStorage, rows: number, C: number, causalT: number, variant: RowVariant = 'invocation'): void {
  if (variant === 'workgroup') {
    const { workgroups, rowGroups } = rowsGrid(rows);
    rt.dispatch({ shader: 'softmax_wg', constants: { WG }, uniforms: packUniforms([u(rows), u(rowGroups), u(C), u(causalT)]), buffers: [x, y], workgroups });
    return;
  }
  const { workgroups, rowStride } = grid1d(rows, WG);
  rt.dispatch({ shader: 'softmax', constants: { WG }, uniforms: packUniforms([u(rows), u(rowStride), u(C), u(causalT)]), buffers: [x, y], workgroups });
}

/** y, dy [rows, C] → dx [rows, C] = y·(dy − Σ dy·y). */
export function softmaxBackwardKernel(rt: GpuRuntime, y: GpuStorage, dy: GpuStorage, dx: GpuStorage, rows: number, C: number, variant: RowVariant = 'invocation'): void {
  if (variant === 'workgroup') {
    const { workgroups, rowGroups } = rowsGrid(rows);
    rt.dispatch({ shader: 'softmax_backward_wg', constants: { WG }, uniforms: packUniforms([u(rows), u(rowGroups), u(C), u(0)]), buffers: [y, dy, dx], workgroups });
    return;
  }
  const { workgroups, rowStride } = grid1d(rows, WG);
  rt.dispatch({ shader: 'softmax_backward', constants: { WG }, uniforms: packUniforms([u(rows), u(rowStride), u(C), u(0)]), buffers: [y, dy, dx], workgroups });
}
