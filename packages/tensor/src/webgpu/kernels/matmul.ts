// Matmul wrapper: picks the register-tiled variant on CPU adapters and the shared-memory tiled one on
// real GPUs (measured: each wins several-fold on its own kind of adapter).
// A: [batch?, M, K] (or [K, M]), B: [batch?, K, N] (or [N, K]), bias [N] → C [batch, M, N].
import type { MatmulParams } from '../../backend';
import type { GpuRuntime, GpuStorage } from '../runtime';
import { packUniforms, u } from './common';

export type MatmulVariant = 'reg' | 'tiled';

export function matmulKernel(rt: GpuRuntime, variant: MatmulVariant, a: GpuStorage, b: GpuStorage, bias: GpuStorage | null, out: GpuStorage, dummy: GpuStorage, p: MatmulParams): void {
  const constants = { TRANS_A: p.transA, TRANS_B: p.transB, HAS_BIAS: bias !== null, RELU: p.activation === 'relu' };
  const uniforms = packUniforms([u(p.M), u(p.N), u(p.K), u(p.strideA), u(p.strideB)]);
  const buffers = [a, b, bias ?? dummy, out];
  if (variant === 'reg') {
    const WG_X = 8, WG_Y = 8;
    rt.dispatch({
      shader: 'matmul_reg', constants: { ...constants, WG_X, WG_Y }, uniforms, buffers,
      workgroups: [Math.ceil(p.N / 4 / WG_X), Math.ceil(p.M / 4 / WG_Y), p.batch],
    });
  } else {
    rt.dispatch({ shader: 'matmul_tiled', constants, uniforms, buffers, workgroups: [Math.ceil(p.N / 64), Math.ceil(p.M / 64), p.batch] });
  }
}
