// conv2d as im2col + the unrolled matmul, for CPU adapters: SwiftShader pays per storage load, and
// the matmul's 8×16 register tile reuses each loaded value far more than a direct convolution can.
// Per batch image b, with K = inC·kH·kW and P = outH·outW:
//   forward         y_b [outC, P] = W [outC, K] · cols_b [K, P] (+ bias per row)   → NCHW as it is
//   backward input  dcols_b [K, P] = Wᵀ · dy_b [outC, P], then col2im → dx
//   backward filter dW = Σ_b dy_b · cols_bᵀ (a batched product, then a reduce over b)
import type { Conv2dParams, MatmulParams } from '../../backend';
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';
import { matmulKernel } from './matmul';

const WG = 64;

const K = (p: Conv2dParams) => p.inC * p.kH * p.kW;
const P = (p: Conv2dParams) => p.outH * p.outW;

/** Which passes can take the GEMM route (the unrolled matmul reads 16 bytes along contiguous dims). */
export const gemmFits = {
  forward: (p: Conv2dParams) => K(p) % 4 === 0 && P(p) % 4 === 0,
  backwardInput: (p: Conv2dParams) => K(p) % 4 === 0 && P(p) % 4 === 0 && p.outC % 4 === 0,
  backwardFilter: (p: Conv2dParams) => P(p) % 4 === 0,
};

/** Grid and uniforms for im2col/col2im, which take one invocation per row of `rows`. */
function foldParams(p: Conv2dParams, rows: number) {
  const { workgroups, rowStride } = grid1d(rows, WG);
  const uniforms = packUniforms([p.batch, p.inC, p.inH, p.inW, p.kH, p.kW, p.stride, p.pad, p.outH, p.outW, rowStride, rows].map(u));
  return { workgroups, uniforms };
}

/** x [B, inC, inH, inW] → cols [B, K, P] (caller releases). */
function im2col(rt: GpuRuntime, x: GpuStorage, p: Conv2dParams): GpuStorage {
  const cols = rt.alloc(p.batch * K(p) * P(p), 'im2col');
  rt.dispatch({ shader: 'im2col', constants: { WG }, ...foldParams(p, p.batch * K(p) * p.outH), buffers: [x, cols] });
  return cols;
}

function gemm(M: number, N: number, Kg: number, batch: number, transA: boolean, transB: boolean, strideA: number, strideB: number, extra: Partial<MatmulParams> = {}): MatmulParams {
  return { M, N, K: Kg, batch, transA, transB, strideA, strideB, activation: 'none', ...extra };
}

export function conv2dGemm(rt: GpuRuntime, x: GpuStorage, w: GpuStorage, bias: GpuStorage | null, y: GpuStorage, dummy: GpuStorage, p: Conv2dParams): void {
  const cols = im2col(rt, x, p);
  matmulKernel(rt, 'unrolled', w, cols, bias, y, dummy, gemm(p.outC, P(p), K(p), p.batch, false, false, 0, K(p) * P(p), { biasPerRow: true, activation: p.activation ?? 'none' }));
  rt.release(cols);
}

export function conv2dBackwardInputGemm(rt: GpuRuntime, dy: GpuStorage, w: GpuStorage, dx: GpuStorage, dummy: GpuStorage, p: Conv2dParams): void {
  const dcols = rt.alloc(p.batch * K(p) * P(p), 'dcols');
  matmulKernel(rt, 'unrolled', w, dy, null, dcols, dummy, gemm(K(p), P(p), p.outC, p.batch, true, false, 0, p.outC * P(p)));
  rt.dispatch({ shader: 'col2im', constants: { WG }, ...foldParams(p, p.batch * p.inC * p.inH), buffers: [dcols, dx] });
  rt.release(dcols);
}

export function conv2dBackwardFilterGemm(rt: GpuRuntime, dy: GpuStorage, x: GpuStorage, dw: GpuStorage, dummy: GpuStorage, p: Conv2dParams): void {
  const cols = im2col(rt, x, p);
  const MN = p.outC * K(p);
  const perImage = rt.alloc(p.batch * MN, 'dw-per-image');
  matmulKernel(rt, 'unrolled', dy, cols, null, perImage, dummy, gemm(p.outC, K(p), P(p), p.batch, false, true, p.outC * P(p), K(p) * P(p)));
  // [1, B, MN] → [MN]: sum over the batch in a fixed order.
  const { workgroups, rowStride } = grid1d(MN, 64);
  rt.dispatch({
    shader: 'reduce', constants: { OP: 0, WG: 64 }, uniforms: packUniforms([u(1), u(p.batch), u(MN), u(rowStride)]),
    buffers: [perImage, dw], workgroups,
  });
  rt.release(cols);
  rt.release(perImage);
}
