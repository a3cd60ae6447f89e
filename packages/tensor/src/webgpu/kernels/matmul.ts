// Matmul wrapper. CPU adapters ('unrolled'): matmul_unrolled, 8×16 outputs per invocation, when the
// shapes are 4-aligned, else matmul_reg, 4×4 per invocation; real GPUs ('tiled'): the shared-memory
// tiled kernel. Each wins several-fold on its own kind of adapter (bench/results/kernels.json, where
// runs before the rename call 'unrolled' 'reg').
// A: [batch?, M, K] (or [K, M]), B: [batch?, K, N] (or [N, K]), bias [N] → C [batch, M, N].
import type { MatmulParams } from '../../backend';
import type { GpuRuntime, GpuStorage } from '../runtime';
import { packUniforms, u } from './common';

export type MatmulVariant = 'unrolled' | 'tiled';

/**
 * matmul_unrolled reads 16 bytes at a time along each operand's contiguous dim, which must be a
 * multiple of 4, and steps K by 4.
 */
export function unrolledFits(p: MatmulParams): boolean {
  return p.K % 4 === 0 && (!p.transA || p.M % 4 === 0) && (p.transB || p.N % 4 === 0) && p.strideA % 4 === 0 && p.strideB % 4 === 0;
}

/** Must match scripts/gen-matmul-unrolled.ts (a test checks the shader is current). */
const UNROLLED_TILE_ROWS = 8, UNROLLED_TILE_COLS = 16;

/**
 * 16×4 invocations per workgroup, first fitted to the output's tiles (a narrow side gives its lanes
 * to the other; past both sides they go), then shrunk towards 4×4 until there are at least 32
 * workgroups: the MLP's [128, 256] products otherwise leave SwiftShader's 16 worker batches half
 * idle (measured 15 ms at 4×4 vs 21 ms at 16×4 for 128×256×784). Lanes past the output's edge still
 * cost SwiftShader their share of a workgroup: attention's per-head products (N = 16, one tile
 * wide) took 25–33 ms at 16×4 and 7–8 ms fitted (1×8) in Node on Dawn; the char transformer's step
 * 600 → 536 ms in Chromium (train-in-tab).
 */
export function unrolledWorkgroup(p: Pick<MatmulParams, 'M' | 'N' | 'batch'>): [number, number] {
  let wx = 16, wy = 4;
  const tileCols = Math.ceil(p.N / UNROLLED_TILE_COLS), tileRows = Math.ceil(p.M / UNROLLED_TILE_ROWS);
  while (wx > 1 && wx / 2 >= tileCols) {
    wx /= 2;
    wy *= 2;
  }
  while (wy > 1 && wy / 2 >= tileRows) wy /= 2;
  const groups = () => Math.ceil(p.N / UNROLLED_TILE_COLS / wx) * Math.ceil(p.M / UNROLLED_TILE_ROWS / wy) * p.batch;
  while (groups() < 32 && wx * wy > 16) {
    if (wx > wy) wx /= 2;
    else wy /= 2;
  }
  return [wx, wy];
}

export function matmulKernel(rt: GpuRuntime, variant: MatmulVariant, a: GpuStorage, b: GpuStorage, bias: GpuStorage | null, out: GpuStorage, dummy: GpuStorage, p: MatmulParams): void {
  if (p.biasPerRow && (variant === 'tiled' || !unrolledFits(p))) throw new Error('per-row bias is only implemented by matmul_unrolled');
  const epilogue = { HAS_BIAS: bias !== null, RELU: p.activation === 'relu' };
  const uniforms = packUniforms([u(p.M), u(p.N), u(p.K), u(p.strideA), u(p.strideB)]);
  const buffers = [a, b, bias ?? dummy, out];
  if (variant === 'tiled') {
    rt.dispatch({
      shader: 'matmul_tiled', constants: { ...epilogue, TRANS_A: p.transA, TRANS_B: p.transB }, uniforms, buffers,
      workgroups: [Math.ceil(p.N / 64), Math.ceil(p.M / 64), p.batch],
    });
  } else if (unrolledFits(p)) {
    const [WG_X, WG_Y] = unrolledWorkgroup(p);
    rt.dispatch({
      shader: 'matmul_unrolled', entryPoint: `main_${p.transA ? 't' : 'n'}${p.transB ? 't' : 'n'}`,
      constants: { ...epilogue, BIAS_PER_ROW: p.biasPerRow ?? false, WG_X, WG_Y },
      uniforms, buffers, workgroups: [Math.ceil(p.N / UNROLLED_TILE_COLS / WG_X), Math.ceil(p.M / UNROLLED_TILE_ROWS / WG_Y), p.batch],
    });
  } else {
    const WG_X = 8, WG_Y = 8;
    rt.dispatch({
      shader: 'matmul_reg', constants: { ...epilogue, TRANS_A: p.transA, TRANS_B: p.transB, WG_X, WG_Y }, uniforms, buffers,
      workgroups: [Math.ceil(p.N / 4 / WG_X), Math.ceil(p.M / 4 / WG_Y), p.batch],
    });
  }
}
