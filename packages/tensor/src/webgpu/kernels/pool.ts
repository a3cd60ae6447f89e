// Max pooling wrappers (NCHW): forward with i32 argmax, backward as a deterministic gather.
import type { Pool2dParams } from '../../backend';
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

const WG = 256;

function fields(n: number, rowStride: number, p: Pool2dParams) {
  return packUniforms([u(n), u(rowStride), u(p.inH), u(p.inW), u(p.k), u(p.stride), u(p.outH), u(p.outW)]);
}

/** x [B, C, inH, inW] → y [B, C, outH, outW], argmax i32 [B, C, outH, outW] (flat index into x). */
export function maxPool2dKernel(rt: GpuRuntime, x: GpuStorage, y: GpuStorage, argmax: GpuStorage, p: Pool2dParams): void {
  const n = p.batch * p.channels * p.outH * p.outW;
  const { workgroups, rowStride } = grid1d(n, WG);
  rt.dispatch({ shader: 'maxpool2d', constants: { WG }, uniforms: fields(n, rowStride, p), buffers: [x, y, argmax], workgroups });
}

/**
 * dy [B, C, outH, outW], argmax i32 [B, C, outH, outW] → dx [B, C, inH, inW].
 * Disjoint windows (stride ≥ k): one invocation per output writes its own tile of dx. Overlapping
 * windows: one invocation per input element gathers the outputs whose argmax it is.
 */
export function maxPool2dBackwardKernel(rt: GpuRuntime, dy: GpuStorage, argmax: GpuStorage, dx: GpuStorage, p: Pool2dParams): void {
  const tiles = p.stride >= p.k;
  const n = p.batch * p.channels * (tiles ? p.outH * p.outW : p.inH * p.inW);
  const { workgroups, rowStride } = grid1d(n, WG);
  rt.dispatch({
    shader: tiles ? 'maxpool2d_backward_tiles' : 'maxpool2d_backward', constants: { WG },
    uniforms: fields(n, rowStride, p), buffers: [dy, argmax, dx], workgroups,
  });
}
