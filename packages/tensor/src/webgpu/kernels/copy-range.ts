// Copy of a contiguous range between buffers at arbitrary element offsets.
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

/** dst[dstOffset .. dstOffset + n) = src[srcOffset .. srcOffset + n). */
export function copyRangeKernel(rt: GpuRuntime, src: GpuStorage, srcOffset: number, dst: GpuStorage, dstOffset: number, n: number): void {
  if (n === 0) return;
  const WG = 256;
  const { workgroups, rowStride } = grid1d(n, WG);
  rt.dispatch({ shader: 'copy_range', constants: { WG }, uniforms: packUniforms([u(n), u(rowStride), u(srcOffset), u(dstOffset)]), buffers: [src, dst], workgroups });
}
