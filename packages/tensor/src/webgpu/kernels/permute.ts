// Permute wrapper for rank ≤ 4 (f32 or i32: the kernel moves 32-bit words).
import { contiguousStrides } from '../../shape';
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

/** x [shape] → out [shape[perm[0]], …]: out dim i is input dim perm[i]. */
export function permuteKernel(rt: GpuRuntime, x: GpuStorage, out: GpuStorage, shape: number[], perm: number[]): void {
  if (shape.length > 4 || perm.length !== shape.length) throw new Error(`permute: rank ${shape.length} with perm [${perm}] (rank ≤ 4)`);
  const pad = 4 - shape.length;
  const inStrides = contiguousStrides(shape);
  const outShape = [...Array(pad).fill(1), ...perm.map((d) => shape[d])];
  const srcStrides = [...Array(pad).fill(0), ...perm.map((d) => inStrides[d])];
  const n = shape.reduce((a, b) => a * b, 1);
  const WG = 256;
  const { workgroups, rowStride } = grid1d(n, WG);
  rt.dispatch({
    shader: 'permute', constants: { WG }, uniforms: packUniforms([u(n), u(rowStride), u(0), u(0), ...outShape.map(u), ...srcStrides.map(u)]),
    buffers: [x, out], workgroups,
  });
}
