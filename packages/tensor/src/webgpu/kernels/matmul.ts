// Matmul wrapper. CPU adapters ('unrolled'): matmul_unrolled, 8×16 outputs per invocation, when the
// shapes are 4-aligned, else matmul_reg, 4×4 per invocation; real GPUs ('tiled'): the shared-memory
// tiled kernel. Each wins several-fold on its own kind of adapter (bench/results/kernels.json, where
// runs before the rename call 'unrolled' 'reg').
// A: [batch?, M, K] (or [K, M]), B: [batch?, K, N] (or [N, K]), bias [N] → C [batch, M, N].
import type { MatmulParams } from '../../backend';
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

export type MatmulVariant = 'unrolled' | 'tiled';

/**
 * matmul_unrolled reads 16 bytes at a time along each operand's contiguous dim, which must be a
 * multiple of 4, and steps K by 4.
 */
export function unrolledFits(p: MatmulParams): boolean {
  return p.K % 4 === 0 && (!p.transA || p.M % 4 === 0) && (p.transB || p.N % 4 === 0) && p.strideA % 4 === 0 && p.strideB % 4 === 0;
}

/** Must match scripts/gen-matmul-unrolled.ts (a test checks the shader is current). */
const UNROLLED_TILE_ROWS = 8, UNROLLED_TILE_COLS = 16, UNROLLED_LANES = 16;
/** Bits of its uniforms' flags word, as the generator's FLAGS. */
const UNROLLED_FLAGS = { hasBias: 1, biasPerRow: 2, relu: 4 };

/**
 * matmul_unrolled's uniforms: the shapes, the output's 8×16 tiles, and the epilogue as flags, so one
 * pipeline serves every product of a layout (an MLP tab compiled 4, the char transformer 12 and the
 * CNN 11, each 0.4–0.8 s of SwiftShader's LLVM, before they were uniforms).
 */
export function unrolledUniforms(p: MatmulParams, hasBias: boolean): { uniforms: ArrayBuffer; workgroups: [number, number] } {
  const tileCols = Math.ceil(p.N / UNROLLED_TILE_COLS), tiles = tileCols * Math.ceil(p.M / UNROLLED_TILE_ROWS);
  const { workgroups, rowStride } = grid1d(tiles * p.batch, UNROLLED_LANES);
  const flags = (hasBias ? UNROLLED_FLAGS.hasBias : 0) | (p.biasPerRow ? UNROLLED_FLAGS.biasPerRow : 0) | (p.activation === 'relu' ? UNROLLED_FLAGS.relu : 0);
  const uniforms = packUniforms([u(p.M), u(p.N), u(p.K), u(p.strideA), u(p.strideB), u(tileCols), u(tiles), u(p.batch), u(rowStride), u(flags)]);
  return { uniforms, workgroups };
}

export function matmulKernel(rt: GpuRuntime, variant: MatmulVariant, a: GpuStorage, b: GpuStorage, bias: GpuStorage | null, out: GpuStorage, dummy: GpuStorage, p: MatmulParams): void {
  if (p.biasPerRow && (variant === 'tiled' || !unrolledFits(p))) throw new Error('per-row bias is only implemented by matmul_unrolled');
  const buffers = [a, b, bias ?? dummy, out];
  if (variant !== 'tiled' && unrolledFits(p)) {
    const { uniforms, workgroups } = unrolledUniforms(p, bias !== null);
    rt.dispatch({ shader: 'matmul_unrolled', entryPoint: `main_${p.transA ? 't' : 'n'}${p.transB ? 't' : 'n'}`, uniforms, buffers, workgroups });
    return;
  }
  // The tiled and register kernels take the epilogue as override constants and the shapes alone as uniforms.
  const epilogue = { HAS_BIAS: bias !== null, RELU: p.activation === 'relu' };
  const uniforms = packUniforms([u(p.M), u(p.N), u(p.K), u(p.strideA), u(p.strideB)]);
  if (variant === 'tiled') {
    rt.dispatch({
      shader: 'matmul_tiled', constants: { ...epilogue, TRANS_A: p.transA, TRANS_B: p.transB }, uniforms, buffers,
      workgroups: [Math.ceil(p.N / 64), Math.ceil(p.M / 64), p.batch],
    });
  } else {
    const WG_X = 8, WG_Y = 8;
    rt.dispatch({
      shader: 'matmul_reg', constants: { ...epilogue, TRANS_A: p.transA, TRANS_B: p.transB, WG_X, WG_Y }, uniforms, buffers,
      workgroups: [Math.ceil(p.N / 4 / WG_X), Math.ceil(p.M / 4 / WG_Y), p.batch],
    });
  }
}
