// Row softmax wrappers (optionally causal) and its backward; one invocation per row.
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

const WG = 64;

/** x [rows, C] → y [rows, C]; causalT > 0 masks columns > r mod causalT in row r. */
export function softmaxKernel(rt: GpuRuntime, x: GpuStorage, y: GpuStorage, rows: number, C: number, causalT: number): void {
  const { workgroups, rowStride } = grid1d(rows, WG);
  rt.dispatch({ shader: 'softmax', constants: { WG }, uniforms: packUniforms([u(rows), u(rowStride), u(C), u(causalT)]), buffers: [x, y], workgroups });
}

/** y, dy [rows, C] → dx [rows, C] = y·(dy − Σ dy·y). */
export function softmaxBackwardKernel(rt: GpuRuntime, y: GpuStorage, dy: GpuStorage, dx: GpuStorage, rows: number, C: number): void {
  const { workgroups, rowStride } = grid1d(rows, WG);
  rt.dispatch({ shader: 'softmax_backward', constants: { WG }, uniforms: packUniforms([u(rows), u(rowStride), u(C), u(0)]), buffers: [y, dy, dx], workgroups });
}
