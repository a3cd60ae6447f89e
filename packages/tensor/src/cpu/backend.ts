// Plain-TS reference backend: the definition of every op's semantics, used to test the WGSL kernels
// and as an explicit, reported fallback when WebGPU is missing. Precision 'f64' is for gradient checks.
import type {
  AdamWParams, Backend, BinaryOp, Conv2dParams, DType, MatmulParams, Pool2dParams, ReduceOp, SgdParams, Storage, UnaryOp,
} from '../backend';
import type { DgcAccumulateParams, DgcSampleParams, DgcSelectParams } from '../backend';
import { contiguousStrides, numel } from '../shape';
import { conv2dBackwardFilterRef, conv2dBackwardInputRef, conv2dRef, maxPool2dBackwardRef, maxPool2dRef } from './conv';
import { dgcAccumulateRef, dgcSampleRef, dgcSelectRef, dgcSumSquaresRef, dgcThresholdRef } from './dgc';
import { layerNormBackwardRef, layerNormRef } from './layernorm';

export type FloatArray = Float32Array | Float64Array;

export class CpuStorage implements Storage {
  constructor(readonly data: FloatArray | Int32Array) {}
  get size(): number {
    return this.data.length;
  }
}

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
export function gelu(x: number): number {
  return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}
export function geluDerivative(x: number): number {
  const u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
  const t = Math.tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x);
}

function unaryFn(op: UnaryOp, alpha: number): (x: number) => number {
  switch (op) {
    case 'neg': return (x) => -x;
    case 'exp': return Math.exp;
    case 'log': return Math.log;
    case 'sqrt': return Math.sqrt;
    case 'relu': return (x) => (x > 0 ? x : 0);
    case 'gelu': return gelu;
    case 'tanh': return Math.tanh;
    case 'scale': return (x) => x * alpha;
    case 'addScalar': return (x) => x + alpha;
    case 'square': return (x) => x * x;
    case 'copy': return (x) => x;
  }
}

function binaryFn(op: BinaryOp): (a: number, b: number) => number {
  switch (op) {
    case 'add': return (a, b) => a + b;
    case 'sub': return (a, b) => a - b;
    case 'mul': return (a, b) => a * b;
    case 'div': return (a, b) => a / b;
    case 'reluGrad': return (dy, x) => (x > 0 ? dy : 0);
    case 'geluGrad': return (dy, x) => dy * geluDerivative(x);
    case 'tanhGrad': return (dy, y) => dy * (1 - y * y);
  }
}

export class CpuBackend implements Backend {
  readonly kind = 'cpu' as const;
  readonly description: string;
  /** The reference composes attention from matmul and softmax in models; `causalAttention` is the fused kernel's reference. */
  readonly fusedAttention = false;
  private readonly Float: Float32ArrayConstructor | Float64ArrayConstructor;

  constructor(readonly precision: 'f32' | 'f64' = 'f32') {
    this.Float = precision === 'f64' ? Float64Array : Float32Array;
    this.description = `cpu reference (${precision})`;
  }

  private f(size: number): FloatArray {
    return new this.Float(size);
  }
  private d(s: Storage): FloatArray {
    return (s as CpuStorage).data as FloatArray;
  }
  private i(s: Storage): Int32Array {
    const data = (s as CpuStorage).data;
    if (!(data instanceof Int32Array)) throw new Error('expected an i32 tensor');
    return data;
  }
  private out(data: FloatArray | Int32Array): CpuStorage {
    return new CpuStorage(data);
  }

  alloc(size: number, dtype: DType): Storage {
    return this.out(dtype === 'i32' ? new Int32Array(size) : this.f(size));
  }
  upload(data: Float32Array | Int32Array): Storage {
    return this.out(data instanceof Int32Array ? Int32Array.from(data) : this.Float.from(data));
  }
  write(dst: Storage, data: Float32Array | Int32Array): void {
    if (data.length !== dst.size) throw new Error(`write: ${data.length} elements into storage of ${dst.size}`);
    (dst as CpuStorage).data.set(data);
  }
  async read(s: Storage, dtype: DType): Promise<Float32Array | Int32Array> {
    const data = (s as CpuStorage).data;
    return dtype === 'i32' ? Int32Array.from(data) : Float32Array.from(data);
  }
  /** The backing array itself, at full precision (tests). */
  raw(s: Storage): FloatArray | Int32Array {
    return (s as CpuStorage).data;
  }
  release(): void {}
  view(s: Storage, offset: number, size: number): Storage {
    return this.out((s as CpuStorage).data.subarray(offset, offset + size));
  }
  fill(dst: Storage, value: number): void {
    (dst as CpuStorage).data.fill(value);
  }
  copy(dst: Storage, src: Storage): void {
    (dst as CpuStorage).data.set((src as CpuStorage).data.subarray(0, dst.size));
  }
  flush(): void {}

  matmul(a: Storage, b: Storage, bias: Storage | null, p: MatmulParams): Storage {
    const A = this.d(a), B = this.d(b), out = this.f(p.batch * p.M * p.N);
    const bb = bias ? this.d(bias) : null;
    const { M, N, K } = p;
    // Every output sums its K products in f64 in ascending k, whatever the loop order: the same bits
    // as the plain triple loop. The order only keeps the innermost reads contiguous (several times faster).
    const row = new Float64Array(N);
    for (let z = 0; z < p.batch; z++) {
      const oa = z * p.strideA, ob = z * p.strideB, oc = z * M * N;
      for (let i = 0; i < M; i++) {
        if (p.transB) {
          // Dot products along k: four of B's rows at a time share each read of A's row i.
          const ai = oa + i * K, sa = p.transA ? M : 1, a0 = p.transA ? oa + i : ai;
          let j = 0;
          for (; j + 4 <= N; j += 4) {
            const b0 = ob + j * K, b1 = b0 + K, b2 = b1 + K, b3 = b2 + K;
            let c0 = 0, c1 = 0, c2 = 0, c3 = 0;
            for (let k = 0, ak = a0; k < K; k++, ak += sa) {
              const av = A[ak];
              c0 += av * B[b0 + k];
              c1 += av * B[b1 + k];
              c2 += av * B[b2 + k];
              c3 += av * B[b3 + k];
            }
            row[j] = c0;
            row[j + 1] = c1;
            row[j + 2] = c2;
            row[j + 3] = c3;
          }
          for (; j < N; j++) {
            let acc = 0;
            const bj = ob + j * K;
            for (let k = 0, ak = a0; k < K; k++, ak += sa) acc += A[ak] * B[bj + k];
            row[j] = acc;
          }
        } else {
          // Axpy over B's rows, row += A[i, k] · B[k, :], four k at a time in ascending order.
          row.fill(0);
          const aAt = (k: number) => (p.transA ? A[oa + k * M + i] : A[oa + i * K + k]);
          let k = 0;
          for (; k + 4 <= K; k += 4) {
            const v0 = aAt(k), v1 = aAt(k + 1), v2 = aAt(k + 2), v3 = aAt(k + 3);
            const b0 = ob + k * N, b1 = b0 + N, b2 = b1 + N, b3 = b2 + N;
            for (let j = 0; j < N; j++) row[j] = row[j] + v0 * B[b0 + j] + v1 * B[b1 + j] + v2 * B[b2 + j] + v3 * B[b3 + j];
          }
          for (; k < K; k++) {
            const av = aAt(k), bk = ob + k * N;
            for (let j = 0; j < N; j++) row[j] += av * B[bk + j];
          }
        }
        const oi = oc + i * N;
        for (let j = 0; j < N; j++) {
          let acc = row[j];
          if (bb) acc += p.biasPerRow ? bb[i] : bb[j];
          if (p.activation === 'relu' && acc < 0) acc = 0;
          out[oi + j] = acc;
        }
      }
    }
    return this.out(out);
  }

  unary(op: UnaryOp, x: Storage, size: number, alpha: number): Storage {
    const X = this.d(x), out = this.f(size), fn = unaryFn(op, alpha);
    for (let i = 0; i < size; i++) out[i] = fn(X[i]);
    return this.out(out);
  }

  binary(op: BinaryOp, a: Storage, b: Storage, outShape: number[], aStrides: number[], bStrides: number[]): Storage {
    const A = this.d(a), B = this.d(b), n = numel(outShape), out = this.f(n), fn = binaryFn(op);
    const strides = contiguousStrides(outShape);
    for (let i = 0; i < n; i++) {
      let ia = 0, ib = 0, rem = i;
      for (let d = 0; d < outShape.length; d++) {
        const c = Math.floor(rem / strides[d]);
        rem -= c * strides[d];
        ia += c * aStrides[d];
        ib += c * bStrides[d];
      }
      out[i] = fn(A[ia], B[ib]);
    }
    return this.out(out);
  }

  reduce(op: ReduceOp, x: Storage, outer: number, reduce: number, inner: number): Storage {
    const X = this.d(x), out = this.f(outer * inner);
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < inner; j++) {
        let acc = op === 'max' ? -Infinity : 0;
        for (let r = 0; r < reduce; r++) {
          const v = X[(o * reduce + r) * inner + j];
          acc = op === 'max' ? Math.max(acc, v) : acc + v;
        }
        out[o * inner + j] = op === 'mean' ? acc / reduce : acc;
      }
    }
    return this.out(out);
  }

  softmaxCrossEntropy(logits: Storage, labels: Storage, B: number, C: number): { loss: Storage; probs: Storage } {
    const X = this.d(logits), Y = this.i(labels), loss = this.f(B), probs = this.f(B * C);
    for (let b = 0; b < B; b++) {
      let max = -Infinity;
      for (let c = 0; c < C; c++) max = Math.max(max, X[b * C + c]);
      let sum = 0;
      for (let c = 0; c < C; c++) sum += Math.exp(X[b * C + c] - max);
      const logSum = Math.log(sum);
      for (let c = 0; c < C; c++) probs[b * C + c] = Math.exp(X[b * C + c] - max - logSum);
      const y = Y[b];
      if (y < 0 || y >= C) throw new Error(`label ${y} out of range [0, ${C})`);
      loss[b] = logSum - (X[b * C + y] - max);
    }
    return { loss: this.out(loss), probs: this.out(probs) };
  }

  softmaxCrossEntropyBackward(probs: Storage, labels: Storage, dmean: Storage, B: number, C: number): Storage {
    const P = this.d(probs), Y = this.i(labels), g = this.d(dmean)[0] / B, out = this.f(B * C);
    for (let b = 0; b < B; b++) {
      for (let c = 0; c < C; c++) out[b * C + c] = (P[b * C + c] - (c === Y[b] ? 1 : 0)) * g;
    }
    return this.out(out);
  }

  softmax(x: Storage, rows: number, C: number, causalT: number): Storage {
    const X = this.d(x), out = this.f(rows * C);
    for (let r = 0; r < rows; r++) {
      const limit = causalT > 0 ? (r % causalT) + 1 : C;
      let max = -Infinity;
      for (let c = 0; c < limit; c++) max = Math.max(max, X[r * C + c]);
      let sum = 0;
      for (let c = 0; c < limit; c++) sum += Math.exp(X[r * C + c] - max);
      for (let c = 0; c < C; c++) out[r * C + c] = c < limit ? Math.exp(X[r * C + c] - max) / sum : 0;
    }
    return this.out(out);
  }

  softmaxBackward(y: Storage, dy: Storage, rows: number, C: number): Storage {
    const Y = this.d(y), D = this.d(dy), out = this.f(rows * C);
    for (let r = 0; r < rows; r++) {
      let dot = 0;
      for (let c = 0; c < C; c++) dot += D[r * C + c] * Y[r * C + c];
      for (let c = 0; c < C; c++) out[r * C + c] = Y[r * C + c] * (D[r * C + c] - dot);
    }
    return this.out(out);
  }

  causalAttention(q: Storage, k: Storage, v: Storage, batch: number, T: number, D: number, scale: number): { out: Storage; probs: Storage } {
    const Q = this.d(q), K = this.d(k), V = this.d(v), out = this.f(batch * T * D), P = this.f(batch * T * T);
    for (let b = 0; b < batch; b++) {
      for (let t = 0; t < T; t++) {
        const row = (b * T + t) * T;
        let max = -Infinity;
        for (let j = 0; j <= t; j++) {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += Q[(b * T + t) * D + d] * K[(b * T + j) * D + d];
          P[row + j] = dot * scale;
          max = Math.max(max, P[row + j]);
        }
        let sum = 0;
        for (let j = 0; j <= t; j++) {
          P[row + j] = Math.exp(P[row + j] - max);
          sum += P[row + j];
        }
        for (let j = 0; j <= t; j++) P[row + j] /= sum;
        for (let d = 0; d < D; d++) {
          let acc = 0;
          for (let j = 0; j <= t; j++) acc += P[row + j] * V[(b * T + j) * D + d];
          out[(b * T + t) * D + d] = acc;
        }
      }
    }
    return { out: this.out(out), probs: this.out(P) };
  }

  conv2d(x: Storage, w: Storage, bias: Storage | null, p: Conv2dParams): Storage {
    const y = conv2dRef(this.d(x), this.d(w), bias ? this.d(bias) : null, p, this.f(p.batch * p.outC * p.outH * p.outW));
    if (p.activation === 'relu') for (let i = 0; i < y.length; i++) y[i] = y[i] > 0 ? y[i] : 0;
    return this.out(y);
  }
  conv2dBackwardInput(dy: Storage, w: Storage, p: Conv2dParams): Storage {
    return this.out(conv2dBackwardInputRef(this.d(dy), this.d(w), p, this.f(p.batch * p.inC * p.inH * p.inW)));
  }
  conv2dBackwardFilter(dy: Storage, x: Storage, p: Conv2dParams): Storage {
    return this.out(conv2dBackwardFilterRef(this.d(dy), this.d(x), p, this.f(p.outC * p.inC * p.kH * p.kW)));
  }
  maxPool2d(x: Storage, p: Pool2dParams): { y: Storage; argmax: Storage } {
    const n = p.batch * p.channels * p.outH * p.outW;
    const { y, argmax } = maxPool2dRef(this.d(x), p, this.f(n), new Int32Array(n));
    return { y: this.out(y), argmax: this.out(argmax) };
  }
  maxPool2dBackward(dy: Storage, argmax: Storage, p: Pool2dParams): Storage {
    return this.out(maxPool2dBackwardRef(this.d(dy), this.i(argmax), p, this.f(p.batch * p.channels * p.inH * p.inW)));
  }

  layerNorm(x: Storage, gamma: Storage, beta: Storage, rows: number, C: number, eps: number) {
    const r = layerNormRef(this.d(x), this.d(gamma), this.d(beta), rows, C, eps, this.f(rows * C), this.f(rows), this.f(rows));
    return { y: this.out(r.y), mean: this.out(r.mean), rstd: this.out(r.rstd) };
  }
  layerNormBackward(dy: Storage, x: Storage, gamma: Storage, mean: Storage, rstd: Storage, rows: number, C: number) {
    const r = layerNormBackwardRef(this.d(dy), this.d(x), this.d(gamma), this.d(mean), this.d(rstd), rows, C, this.f(rows * C), this.f(C), this.f(C));
    return { dx: this.out(r.dx), dgamma: this.out(r.dgamma), dbeta: this.out(r.dbeta) };
  }

  embedding(table: Storage, ids: Storage, T: number, V: number, D: number): Storage {
    const W = this.d(table), I = this.i(ids), out = this.f(T * D);
    for (let t = 0; t < T; t++) {
      const v = I[t];
      if (v < 0 || v >= V) throw new Error(`embedding id ${v} out of range [0, ${V})`);
      for (let d = 0; d < D; d++) out[t * D + d] = W[v * D + d];
    }
    return this.out(out);
  }
  embeddingBackward(dy: Storage, ids: Storage, T: number, V: number, D: number): Storage {
    const G = this.d(dy), I = this.i(ids), out = this.f(V * D);
    for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) out[I[t] * D + d] += G[t * D + d];
    return this.out(out);
  }

  copyRange(src: Storage, srcOffset: number, dst: Storage, dstOffset: number, n: number): void {
    (dst as CpuStorage).data.set((src as CpuStorage).data.subarray(srcOffset, srcOffset + n), dstOffset);
  }

  permute(x: Storage, shape: number[], perm: number[]): Storage {
    const X = (x as CpuStorage).data, n = numel(shape);
    const outShape = perm.map((p) => shape[p]);
    const inStrides = contiguousStrides(shape);
    const outStrides = contiguousStrides(outShape);
    const out = X instanceof Int32Array ? new Int32Array(n) : this.f(n);
    for (let i = 0; i < n; i++) {
      let rem = i, src = 0;
      for (let d = 0; d < outShape.length; d++) {
        const c = Math.floor(rem / outStrides[d]);
        rem -= c * outStrides[d];
        src += c * inStrides[perm[d]];
      }
      out[i] = X[src];
    }
    return this.out(out);
  }

  sgdStep(param: Storage, grad: Storage, velocity: Storage, p: SgdParams): void {
    const P = this.d(param), G = this.d(grad), V = this.d(velocity);
    for (let i = 0; i < P.length; i++) {
      const g = G[i] + p.weightDecay * P[i];
      const v = p.momentum * V[i] + g;
      V[i] = v;
      P[i] -= p.lr * (p.nesterov ? g + p.momentum * v : v);
    }
  }

  adamwStep(param: Storage, grad: Storage, m: Storage, v: Storage, p: AdamWParams): void {
    const P = this.d(param), G = this.d(grad), M = this.d(m), V = this.d(v);
    const c1 = 1 - Math.pow(p.beta1, p.step), c2 = 1 - Math.pow(p.beta2, p.step);
    for (let i = 0; i < P.length; i++) {
      const g = G[i];
      M[i] = p.beta1 * M[i] + (1 - p.beta1) * g;
      V[i] = p.beta2 * V[i] + (1 - p.beta2) * g * g;
      const update = M[i] / c1 / (Math.sqrt(V[i] / c2) + p.eps);
      P[i] -= p.lr * (update + p.weightDecay * P[i]);
    }
  }

  lambStep(param: Storage, grad: Storage, m: Storage, v: Storage, update: Storage, segments: Storage, norms: Storage, segmentCount: number, p: AdamWParams): void {
    const P = this.d(param), G = this.d(grad), M = this.d(m), V = this.d(v), U = this.d(update), N = this.d(norms);
    const S = (segments as CpuStorage).data;
    const c1 = 1 - Math.pow(p.beta1, p.step), c2 = 1 - Math.pow(p.beta2, p.step);
    for (let i = 0; i < P.length; i++) {
      M[i] = p.beta1 * M[i] + (1 - p.beta1) * G[i];
      V[i] = p.beta2 * V[i] + (1 - p.beta2) * G[i] * G[i];
      U[i] = M[i] / c1 / (Math.sqrt(V[i] / c2) + p.eps) + p.weightDecay * P[i];
    }
    for (let s = 0; s < segmentCount; s++) {
      const off = S[2 * s], size = S[2 * s + 1];
      let sw = 0, su = 0;
      for (let k = off; k < off + size; k++) {
        sw += P[k] * P[k];
        su += U[k] * U[k];
      }
      N[2 * s] = Math.sqrt(sw);
      N[2 * s + 1] = Math.sqrt(su);
      const ratio = N[2 * s] > 0 && N[2 * s + 1] > 0 ? N[2 * s] / N[2 * s + 1] : 1;
      for (let k = off; k < off + size; k++) P[k] -= p.lr * ratio * U[k];
    }
  }

  // DGC (packages/distributed): the reference kernels are in ./dgc.ts. The header/pair buffer is u32
  // words, read as f32 where a word holds a value.
  private words(out: Storage): { u32: Uint32Array; f32: Float32Array } {
    const d = this.i(out);
    return { u32: new Uint32Array(d.buffer, d.byteOffset, d.length), f32: new Float32Array(d.buffer, d.byteOffset, d.length) };
  }
  dgcSumSquares(x: Storage, n: number, dst: Storage): void {
    this.d(dst)[0] = dgcSumSquaresRef(this.d(x), n);
  }
  dgcAccumulate(g: Storage, u: Storage, v: Storage, sumSq: Storage | null, p: DgcAccumulateParams): void {
    dgcAccumulateRef(this.d(g), this.d(u), this.d(v), sumSq ? this.d(sumSq)[0] : null, p);
  }
  dgcSample(v: Storage, out: Storage, p: DgcSampleParams): void {
    dgcSampleRef(this.d(v), this.words(out).u32, p);
  }
  dgcThreshold(out: Storage, count: number, rank: number, offset: number): void {
    dgcThresholdRef(this.words(out).u32, count, rank, offset);
  }
  dgcSelect(v: Storage, out: Storage, p: DgcSelectParams): void {
    const { u32, f32 } = this.words(out);
    dgcSelectRef(this.d(v), u32, f32, p);
  }
}
