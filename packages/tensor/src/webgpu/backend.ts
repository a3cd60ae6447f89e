// The WebGPU backend: every op is a WGSL kernel dispatched into the runtime's current command buffer.
import type {
  AdamWParams, Backend, BinaryOp, Conv2dParams, DType, MatmulParams, Pool2dParams, ReduceOp, SgdParams, Storage, UnaryOp,
} from '../backend';
import type { DgcAccumulateParams, DgcSampleParams, DgcSelectParams, MemoryUse } from '../backend';
import { contiguousStrides } from '../shape';
import { requestGpuDevice, type AdapterSummary } from './device';
import { f, grid1d, packUniforms, u } from './kernels/common';
import { dgcAccumulateKernel, dgcSampleKernel, dgcSelectKernel, dgcSumSquaresKernel, dgcThresholdKernel } from './kernels/dgc';
import { conv2dBackwardFilterKernel, conv2dBackwardInputKernel, conv2dKernel } from './kernels/conv';
import { embeddingBackwardKernel, embeddingBackwardRowsKernel, embeddingKernel } from './kernels/embedding';
import { matmulKernel, type MatmulVariant } from './kernels/matmul';
import { conv2dBackwardFilterGemm, conv2dBackwardInputGemm, conv2dGemm, gemmFits } from './kernels/conv-gemm';

export type ConvVariant = 'gemm' | 'direct';
import { layerNormBackwardKernel, layerNormKernel } from './kernels/norm';
import { permuteKernel } from './kernels/permute';
import { copyRangeKernel } from './kernels/copy-range';
import { maxPool2dBackwardKernel, maxPool2dKernel } from './kernels/pool';
import { softmaxBackwardKernel, softmaxKernel, type RowVariant } from './kernels/softmax';
import { causalAttentionKernel, FUSED_ATTENTION_DEFAULT } from './kernels/attention';
import { GpuRuntime, GpuStorage } from './runtime';

const UNARY_CODES: Record<UnaryOp, number> = { neg: 0, exp: 1, log: 2, sqrt: 3, relu: 4, gelu: 5, tanh: 6, scale: 7, addScalar: 8, square: 9, copy: 10 };
const BINARY_CODES: Record<BinaryOp, number> = { add: 0, sub: 1, mul: 2, div: 3, reluGrad: 4, geluGrad: 5, tanhGrad: 6 };
const REDUCE_CODES: Record<ReduceOp, number> = { sum: 0, max: 1, mean: 2 };

export interface WebGpuBackendOptions {
  /** Force a matmul variant (benchmarks compare them); default picks by adapter. */
  matmulVariant?: MatmulVariant;
  /** conv2d as im2col + matmul ('gemm', CPU adapters) or direct implicit GEMM ('direct'). */
  convVariant?: ConvVariant;
  /** Softmax and layernorm rows: one invocation each, or one workgroup each (kernels/softmax.ts). */
  rowVariant?: RowVariant;
  /** Causal attention as one fused kernel, or matmul + softmax + matmul (the default: see kernels/attention.ts). */
  fusedAttention?: boolean;
  /** Live GPU bytes this tab allows itself (GpuRuntime.memoryBudgetBytes); default unbounded. */
  memoryBudgetBytes?: number;
  /** Keep WebGPU's default buffer limits (128 MiB per binding, 256 MiB per buffer) instead of the adapter's. */
  defaultMemoryLimits?: boolean;
}

export class WebGpuBackend implements Backend {
  readonly kind = 'webgpu' as const;
  readonly description: string;
  readonly matmulVariant: MatmulVariant;
  readonly convVariant: ConvVariant;
  readonly rowVariant: RowVariant;
  readonly fusedAttention: boolean;
  /** Bound where a shader declares an optional input that an op does not use. */
  private readonly dummy: GpuStorage;

  constructor(readonly rt: GpuRuntime, opts: WebGpuBackendOptions = {}) {
    this.matmulVariant = opts.matmulVariant ?? (rt.adapter.isCpu ? 'unrolled' : 'tiled');
    this.convVariant = opts.convVariant ?? (rt.adapter.isCpu ? 'gemm' : 'direct');
    this.rowVariant = opts.rowVariant ?? (rt.adapter.isCpu ? 'invocation' : 'workgroup');
    this.fusedAttention = opts.fusedAttention ?? FUSED_ATTENTION_DEFAULT;
    const a = rt.adapter;
    this.description = `webgpu (${[a.vendor, a.architecture, a.description].filter(Boolean).join(' ') || 'unknown adapter'})`;
    this.dummy = rt.allocDedicated(4, 'dummy');
    if (opts.memoryBudgetBytes !== undefined) rt.memoryBudgetBytes = opts.memoryBudgetBytes;
  }

  memory(): MemoryUse {
    return this.rt.memory();
  }

  resetPeakMemory(): void {
    this.rt.resetPeakMemory();
  }

  static async create(gpu: GPU | undefined, opts: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
    const { device, adapter } = await requestGpuDevice(gpu, { defaultMemoryLimits: opts.defaultMemoryLimits });
    return new WebGpuBackend(new GpuRuntime(device, adapter), opts);
  }

  get adapter(): AdapterSummary {
    return this.rt.adapter;
  }

  private g(s: Storage): GpuStorage {
    if (!(s instanceof GpuStorage)) throw new Error('storage from another backend passed to the WebGPU backend');
    return s;
  }

  alloc(size: number): Storage {
    return this.rt.alloc(size);
  }
  upload(data: Float32Array | Int32Array): Storage {
    const s = this.rt.alloc(data.length);
    this.rt.write(s, data);
    return s;
  }
  write(dst: Storage, data: Float32Array | Int32Array): void {
    if (data.length !== dst.size) throw new Error(`write: ${data.length} elements into storage of ${dst.size}`);
    this.rt.write(this.g(dst), data);
  }
  async read(s: Storage, dtype: DType): Promise<Float32Array | Int32Array> {
    const bytes = await this.rt.read(this.g(s));
    return dtype === 'i32' ? new Int32Array(bytes) : new Float32Array(bytes);
  }
  release(s: Storage): void {
    this.rt.release(this.g(s));
  }
  view(s: Storage, offset: number, size: number): Storage {
    return this.rt.view(this.g(s), offset, size);
  }
  flush(): void {
    this.rt.flush();
  }

  /** Dispatch for the vec4 element-wise kernels, whose uniforms start with (vec4 count, rowStride). */
  private elementwise(
    shader: 'unary' | 'fill' | 'sgd' | 'adamw' | 'lamb_moments', elements: number, rest: ReturnType<typeof f>[], buffers: GpuStorage[], constants: Record<string, number> = {},
  ): void {
    const WG = 64;
    const n = Math.ceil(elements / 4);
    const { workgroups, rowStride } = grid1d(n, WG);
    this.rt.dispatch({ shader, constants: { ...constants, WG }, uniforms: packUniforms([u(n), u(rowStride), ...rest]), buffers, workgroups });
  }

  fill(dst: Storage, value: number): void {
    this.elementwise('fill', dst.size, [f(value)], [this.g(dst)]);
  }
  copy(dst: Storage, src: Storage): void {
    this.elementwise('unary', dst.size, [f(0)], [this.g(src), this.g(dst)], { OP: UNARY_CODES.copy });
  }

  matmul(a: Storage, b: Storage, bias: Storage | null, p: MatmulParams): Storage {
    const out = this.rt.alloc(p.batch * p.M * p.N);
    matmulKernel(this.rt, this.matmulVariant, this.g(a), this.g(b), bias ? this.g(bias) : null, out, this.dummy, p);
    return out;
  }

  unary(op: UnaryOp, x: Storage, size: number, alpha: number): Storage {
    const out = this.rt.alloc(size);
    this.elementwise('unary', size, [f(alpha)], [this.g(x), out], { OP: UNARY_CODES[op] });
    return out;
  }

  binary(op: BinaryOp, a: Storage, b: Storage, outShape: number[], aStrides: number[], bStrides: number[]): Storage {
    if (outShape.length > 4) throw new Error('binary ops support rank ≤ 4');
    const pad = 4 - outShape.length;
    const shape = [...Array(pad).fill(1), ...outShape];
    const as = [...Array(pad).fill(0), ...aStrides];
    const bs = [...Array(pad).fill(0), ...bStrides];
    const n = outShape.reduce((x, y) => x * y, 1);
    const out = this.rt.alloc(n);
    const WG = 256;
    const { workgroups, rowStride } = grid1d(n, WG);
    const uniforms = packUniforms([u(n), u(rowStride), u(0), u(0), ...shape.map(u), ...as.map(u), ...bs.map(u)]);
    const contiguous = as.every((st, i) => st === bs[i]) && as.join() === contiguousStrides(shape).join();
    this.rt.dispatch({ shader: 'binary', constants: { OP: BINARY_CODES[op], WG, CONTIGUOUS: contiguous }, uniforms, buffers: [this.g(a), this.g(b), out], workgroups });
    return out;
  }

  reduce(op: ReduceOp, x: Storage, outer: number, reduce: number, inner: number): Storage {
    const out = this.rt.alloc(outer * inner);
    const WG = 64;
    const { workgroups, rowStride } = grid1d(outer * inner, WG);
    this.rt.dispatch({
      shader: 'reduce', constants: { OP: REDUCE_CODES[op], WG }, uniforms: packUniforms([u(outer), u(reduce), u(inner), u(rowStride)]),
      buffers: [this.g(x), out], workgroups,
    });
    return out;
  }

  softmaxCrossEntropy(logits: Storage, labels: Storage, B: number, C: number): { loss: Storage; probs: Storage } {
    const loss = this.rt.alloc(B), probs = this.rt.alloc(B * C);
    this.rt.dispatch({
      shader: 'softmax_ce', uniforms: packUniforms([u(B), u(C)]),
      buffers: [this.g(logits), this.g(labels), loss, probs], workgroups: [Math.ceil(B / 64)],
    });
    return { loss, probs };
  }

  softmaxCrossEntropyBackward(probs: Storage, labels: Storage, dmean: Storage, B: number, C: number): Storage {
    const out = this.rt.alloc(B * C);
    const { workgroups, rowStride } = grid1d(B * C, 256);
    this.rt.dispatch({
      shader: 'softmax_ce_backward', uniforms: packUniforms([u(B), u(C), u(rowStride)]),
      buffers: [this.g(probs), this.g(labels), this.g(dmean), out], workgroups,
    });
    return out;
  }

  softmax(x: Storage, rows: number, C: number, causalT: number): Storage {
    const y = this.rt.alloc(rows * C);
    softmaxKernel(this.rt, this.g(x), y, rows, C, causalT, this.rowVariant);
    return y;
  }
  softmaxBackward(y: Storage, dy: Storage, rows: number, C: number): Storage {
    const dx = this.rt.alloc(rows * C);
    softmaxBackwardKernel(this.rt, this.g(y), this.g(dy), dx, rows, C, this.rowVariant);
    return dx;
  }
  causalAttention(q: Storage, k: Storage, v: Storage, batch: number, T: number, D: number, scale: number): { out: Storage; probs: Storage } {
    const out = this.rt.alloc(batch * T * D), probs = this.rt.alloc(batch * T * T);
    causalAttentionKernel(this.rt, this.g(q), this.g(k), this.g(v), out, probs, batch, T, D, scale);
    return { out, probs };
  }
  conv2d(x: Storage, w: Storage, bias: Storage | null, p: Conv2dParams): Storage {
    const y = this.rt.alloc(p.batch * p.outC * p.outH * p.outW);
    if (this.convVariant === 'gemm' && gemmFits.forward(p)) conv2dGemm(this.rt, this.g(x), this.g(w), bias ? this.g(bias) : null, y, this.dummy, p);
    else {
      conv2dKernel(this.rt, this.g(x), this.g(w), bias ? this.g(bias) : null, y, this.dummy, p);
      if (p.activation === 'relu') {
        const z = this.unary('relu', y, y.size, 0);
        this.release(y);
        return z;
      }
    }
    return y;
  }
  conv2dBackwardInput(dy: Storage, w: Storage, p: Conv2dParams): Storage {
    const dx = this.rt.alloc(p.batch * p.inC * p.inH * p.inW);
    if (this.convVariant === 'gemm' && gemmFits.backwardInput(p)) conv2dBackwardInputGemm(this.rt, this.g(dy), this.g(w), dx, this.dummy, p);
    else conv2dBackwardInputKernel(this.rt, this.g(dy), this.g(w), dx, p);
    return dx;
  }
  conv2dBackwardFilter(dy: Storage, x: Storage, p: Conv2dParams): Storage {
    const dw = this.rt.alloc(p.outC * p.inC * p.kH * p.kW);
    if (this.convVariant === 'gemm' && gemmFits.backwardFilter(p)) conv2dBackwardFilterGemm(this.rt, this.g(dy), this.g(x), dw, this.dummy, p);
    else conv2dBackwardFilterKernel(this.rt, this.g(dy), this.g(x), dw, p);
    return dw;
  }
  maxPool2d(x: Storage, p: Pool2dParams): { y: Storage; argmax: Storage } {
    const n = p.batch * p.channels * p.outH * p.outW;
    const y = this.rt.alloc(n), argmax = this.rt.alloc(n);
    maxPool2dKernel(this.rt, this.g(x), y, argmax, p);
    return { y, argmax };
  }
  maxPool2dBackward(dy: Storage, argmax: Storage, p: Pool2dParams): Storage {
    const dx = this.rt.alloc(p.batch * p.channels * p.inH * p.inW);
    maxPool2dBackwardKernel(this.rt, this.g(dy), this.g(argmax), dx, p);
    return dx;
  }
  layerNorm(x: Storage, gamma: Storage, beta: Storage, rows: number, C: number, eps: number): { y: Storage; mean: Storage; rstd: Storage } {
    const y = this.rt.alloc(rows * C), mean = this.rt.alloc(rows), rstd = this.rt.alloc(rows);
    layerNormKernel(this.rt, this.g(x), this.g(gamma), this.g(beta), y, mean, rstd, rows, C, eps, this.rowVariant);
    return { y, mean, rstd };
  }
  layerNormBackward(dy: Storage, x: Storage, gamma: Storage, mean: Storage, rstd: Storage, rows: number, C: number): { dx: Storage; dgamma: Storage; dbeta: Storage } {
    const dx = this.rt.alloc(rows * C), dgamma = this.rt.alloc(C), dbeta = this.rt.alloc(C);
    layerNormBackwardKernel(this.rt, this.g(dy), this.g(x), this.g(gamma), this.g(mean), this.g(rstd), dx, dgamma, dbeta, rows, C);
    return { dx, dgamma, dbeta };
  }
  embedding(table: Storage, ids: Storage, T: number, V: number, D: number): Storage {
    const out = this.rt.alloc(T * D);
    embeddingKernel(this.rt, this.g(table), this.g(ids), out, T, V, D);
    return out;
  }
  embeddingBackward(dy: Storage, ids: Storage, T: number, V: number, D: number, groups?: { index: Storage; rows: number }): Storage {
    const dtable = this.rt.alloc(V * D);
    if (groups) {
      this.fill(dtable, 0);
      embeddingBackwardRowsKernel(this.rt, this.g(dy), this.g(groups.index), groups.rows, dtable, V, D);
    } else {
      embeddingBackwardKernel(this.rt, this.g(dy), this.g(ids), dtable, T, V, D);
    }
    return dtable;
  }
  copyRange(src: Storage, srcOffset: number, dst: Storage, dstOffset: number, n: number): void {
    copyRangeKernel(this.rt, this.g(src), srcOffset, this.g(dst), dstOffset, n);
  }

  permute(x: Storage, shape: number[], perm: number[]): Storage {
    const out = this.rt.alloc(shape.reduce((a, b) => a * b, 1));
    permuteKernel(this.rt, this.g(x), out, shape, perm);
    return out;
  }

  sgdStep(param: Storage, grad: Storage, velocity: Storage, p: SgdParams): void {
    this.elementwise('sgd', param.size, [f(p.lr), f(p.momentum), f(p.weightDecay), u(p.nesterov ? 1 : 0)], [this.g(param), this.g(grad), this.g(velocity)]);
  }

  lambStep(param: Storage, grad: Storage, m: Storage, v: Storage, update: Storage, segments: Storage, norms: Storage, segmentCount: number, p: AdamWParams): void {
    const c1 = 1 - Math.pow(p.beta1, p.step), c2 = 1 - Math.pow(p.beta2, p.step);
    const W = this.g(param), U = this.g(update), S = this.g(segments), N = this.g(norms);
    this.elementwise('lamb_moments', param.size, [f(p.beta1), f(p.beta2), f(p.eps), f(p.weightDecay), f(c1), f(c2)], [W, this.g(grad), this.g(m), this.g(v), U]);
    this.rt.dispatch({ shader: 'lamb_norms', constants: { WG: 64 }, uniforms: packUniforms([u(segmentCount), u(0), u(0), u(0)]), buffers: [W, U, S, N], workgroups: [segmentCount, 1] });
    // Enough invocations per tensor to keep the adapter busy; each loops over the rest of its tensor.
    const WG = 256, X = 64;
    this.rt.dispatch({ shader: 'lamb_apply', constants: { WG }, uniforms: packUniforms([f(p.lr), u(X * WG), u(0), u(0)]), buffers: [W, U, S, N], workgroups: [X, segmentCount] });
  }

  adamwStep(param: Storage, grad: Storage, m: Storage, v: Storage, p: AdamWParams): void {
    const c1 = 1 - Math.pow(p.beta1, p.step), c2 = 1 - Math.pow(p.beta2, p.step);
    this.elementwise('adamw', param.size, [f(p.lr), f(p.beta1), f(p.beta2), f(p.eps), f(p.weightDecay), f(c1), f(c2)], [this.g(param), this.g(grad), this.g(m), this.g(v)]);
  }

  // DGC (packages/distributed) -------------------------------------------------------------------
  dgcSumSquares(x: Storage, n: number, dst: Storage): void {
    dgcSumSquaresKernel(this.rt, this.g(x), n, this.g(dst));
  }
  dgcAccumulate(g: Storage, u: Storage, v: Storage, sumSq: Storage | null, p: DgcAccumulateParams): void {
    if (p.clipNorm > 0 && !sumSq) throw new Error('dgcAccumulate: clipping needs sumSq');
    dgcAccumulateKernel(this.rt, this.g(g), this.g(u), this.g(v), sumSq ? this.g(sumSq) : this.dummy, p);
  }
  dgcSample(v: Storage, out: Storage, p: DgcSampleParams): void {
    dgcSampleKernel(this.rt, this.g(v), this.g(out), p);
  }
  dgcThreshold(out: Storage, count: number, rank: number, offset: number): void {
    dgcThresholdKernel(this.rt, this.g(out), count, rank, offset);
  }
  dgcSelect(v: Storage, out: Storage, p: DgcSelectParams): void {
    dgcSelectKernel(this.rt, this.g(v), this.g(out), p);
  }
  // end DGC ---------------------------------------------------------------------------------------
}
