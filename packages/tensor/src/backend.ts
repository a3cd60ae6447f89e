// The contract every compute backend implements. Shapes are passed explicitly; a backend never
// sees autograd. Ops write fresh outputs unless a destination is named.

export type DType = 'f32' | 'i32';

/** Backend-owned memory for `size` elements of 4 bytes. */
export interface Storage {
  readonly size: number;
}

export type UnaryOp = 'neg' | 'exp' | 'log' | 'sqrt' | 'relu' | 'gelu' | 'tanh' | 'scale' | 'addScalar' | 'square' | 'copy';
/** Binary ops with broadcasting. `reluGrad(dy, x)`, `geluGrad(dy, x)`, `tanhGrad(dy, y)` are gradient helpers. */
export type BinaryOp = 'add' | 'sub' | 'mul' | 'div' | 'reluGrad' | 'geluGrad' | 'tanhGrad';
export type ReduceOp = 'sum' | 'max' | 'mean';
export type Activation = 'none' | 'relu';

/** C[b] = op(A[b]) · op(B[b]) (+ bias[N]) then activation. A: [batch?, M, K] (or [K, M] if transA). */
export interface MatmulParams {
  M: number;
  N: number;
  K: number;
  batch: number;
  transA: boolean;
  transB: boolean;
  /** Elements between consecutive batch matrices; 0 broadcasts one matrix over the batch. */
  strideA: number;
  strideB: number;
  activation: Activation;
  /** Bias indexed by output row [M] instead of column [N] (conv channels). */
  biasPerRow?: boolean;
}

export interface Conv2dParams {
  batch: number;
  inC: number;
  inH: number;
  inW: number;
  outC: number;
  kH: number;
  kW: number;
  stride: number;
  pad: number;
  outH: number;
  outW: number;
  /** Fused epilogue (default none). */
  activation?: Activation;
}

export interface Pool2dParams {
  batch: number;
  channels: number;
  inH: number;
  inW: number;
  k: number;
  stride: number;
  outH: number;
  outW: number;
}

export interface SgdParams {
  lr: number;
  momentum: number;
  nesterov: boolean;
  weightDecay: number;
}

export interface AdamWParams {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** 1-based step count, for bias correction. */
  step: number;
}

// DGC (packages/distributed) ---------------------------------------------------------------------
// Kernels behind packages/distributed's DgcCompressor. They share one u32 result buffer `out`:
//   out[0] selected count (dgc_select's atomic counter), out[1] threshold (f32 bits),
//   out[2] the sampled rank-th largest magnitude (f32 bits), out[3..64) spare;
//   the sample at [sampleOffset, sampleOffset + count) (magnitudes as f32 bits);
//   pairs (index u32, value f32 bits) at [pairsOffset, pairsOffset + 2·capacity).
// Offsets are in 4-byte words. On the CPU backend `out` is an i32 storage holding the same bits.

/** Words before the first region of a DGC result buffer (256 bytes, so regions can be views). */
export const DGC_HEADER_WORDS = 64;

export interface DgcAccumulateParams {
  /** Scalars in g, u and v. */
  n: number;
  /** 0 means no momentum: u is neither read nor written (it may be a 1-element storage). */
  momentum: number;
  /** > 0: g ← g · min(1, clipNorm / sqrt(sumSq[0])) (sumSq must be given). */
  clipNorm: number;
  /**
   * Momentum factor masking for what the previous selection sent: where |v_i| > maskThreshold, or
   * |v_i| = maskThreshold and i ≤ maskTieIndex, u_i and v_i are zeroed before accumulating.
   * maskThreshold ≤ 0 disables the mask.
   */
  maskThreshold: number;
  maskTieIndex: number;
}

export interface DgcSampleParams {
  n: number;
  /** Sample size: ceil(n / stride) (one position per stratum of `stride` scalars). */
  count: number;
  stride: number;
  /** u32; new positions per seed. */
  seed: number;
  /** Word offset of the sample region in `out`. */
  offset: number;
}

export interface DgcSelectParams {
  n: number;
  /** Pairs that fit at pairsOffset. */
  capacity: number;
  pairsOffset: number;
}

/** Bytes: live tensors and parameters, the peak and the largest tensor since the last reset, buffers that exist, the tab's budget. */
export interface MemoryUse {
  liveBytes: number;
  peakBytes: number;
  largestBytes: number;
  createdBytes: number;
  budgetBytes: number;
}

export interface Backend {
  readonly kind: 'cpu' | 'webgpu';
  /** Human-readable description, e.g. the adapter or "cpu reference (f64)". */
  readonly description: string;

  alloc(size: number, dtype: DType): Storage;
  upload(data: Float32Array | Int32Array): Storage;
  /** Writes host data into an existing storage (same length). */
  write(dst: Storage, data: Float32Array | Int32Array): void;
  read(s: Storage, dtype: DType): Promise<Float32Array | Int32Array>;
  release(s: Storage): void;
  /** GPU memory held and its peak (GPU backends; the CPU reference leaves memory to the garbage collector). */
  memory?(): MemoryUse;
  /** Starts a new memory peak at what is live now. */
  resetPeakMemory?(): void;
  /** A view of `size` elements at element `offset` of `s`; never released on its own. */
  view(s: Storage, offset: number, size: number): Storage;
  fill(dst: Storage, value: number): void;
  /** dst[i] = src[i] (same sizes). */
  copy(dst: Storage, src: Storage): void;

  matmul(a: Storage, b: Storage, bias: Storage | null, p: MatmulParams): Storage;
  unary(op: UnaryOp, x: Storage, size: number, alpha: number): Storage;
  /** out has shape outShape; aStrides/bStrides are element strides per out dim (0 = broadcast). */
  binary(op: BinaryOp, a: Storage, b: Storage, outShape: number[], aStrides: number[], bStrides: number[]): Storage;
  /** x viewed as [outer, reduce, inner] → [outer, inner]. */
  reduce(op: ReduceOp, x: Storage, outer: number, reduce: number, inner: number): Storage;
  /** logits [B, C], labels i32 [B] → { loss: [B] per-row loss, probs: [B, C] }. */
  softmaxCrossEntropy(logits: Storage, labels: Storage, B: number, C: number): { loss: Storage; probs: Storage };
  /** Gradient of the mean loss: dlogits[b, c] = (probs[b, c] − [c = label_b]) · dmean[0] / B. */
  softmaxCrossEntropyBackward(probs: Storage, labels: Storage, dmean: Storage, B: number, C: number): Storage;
  /** Row softmax over the last dim of [rows, C]; with causal, row r of each T×T block masks columns > r mod T. */
  softmax(x: Storage, rows: number, C: number, causalT: number): Storage;
  /** dx = y · (dy − Σ dy·y) per row. */
  softmaxBackward(y: Storage, dy: Storage, rows: number, C: number): Storage;
  /**
   * Causal scaled dot-product attention, fused: q, k, v [batch, T, D] → out [batch, T, D] and the
   * probabilities [batch, T, T] (softmax(scale · q·kᵀ), row t over keys ≤ t) that backward reuses.
   */
  causalAttention(q: Storage, k: Storage, v: Storage, batch: number, T: number, D: number, scale: number): { out: Storage; probs: Storage };
  /** Whether `causalAttention` pays on this backend (measured per adapter) or the model should compose matmul and softmax. */
  readonly fusedAttention: boolean;

  conv2d(x: Storage, w: Storage, bias: Storage | null, p: Conv2dParams): Storage;
  conv2dBackwardInput(dy: Storage, w: Storage, p: Conv2dParams): Storage;
  conv2dBackwardFilter(dy: Storage, x: Storage, p: Conv2dParams): Storage;
  /** Max pooling; returns the output and, per output, the flat input index of the max. */
  maxPool2d(x: Storage, p: Pool2dParams): { y: Storage; argmax: Storage };
  maxPool2dBackward(dy: Storage, argmax: Storage, p: Pool2dParams): Storage;

  /** Row layer norm over the last dim: y = (x − mean)·rstd·gamma + beta; returns mean and rstd per row. */
  layerNorm(x: Storage, gamma: Storage, beta: Storage, rows: number, C: number, eps: number): { y: Storage; mean: Storage; rstd: Storage };
  layerNormBackward(dy: Storage, x: Storage, gamma: Storage, mean: Storage, rstd: Storage, rows: number, C: number): { dx: Storage; dgamma: Storage; dbeta: Storage };

  /** ids i32 [T], table [V, D] → [T, D]. */
  embedding(table: Storage, ids: Storage, T: number, V: number, D: number): Storage;
  /** dtable[v, d] = Σ_{t: ids[t] = v} dy[t, d]; `groups` (the ids' positions grouped by id, see groupIds) makes it O(T·D). */
  embeddingBackward(dy: Storage, ids: Storage, T: number, V: number, D: number, groups?: { index: Storage; rows: number }): Storage;

  /** dst[dstOffset .. dstOffset + n) = src[srcOffset .. srcOffset + n), in place (f32). */
  copyRange(src: Storage, srcOffset: number, dst: Storage, dstOffset: number, n: number): void;

  /** Permutes a tensor of rank ≤ 4: out dim i is input dim perm[i]. */
  permute(x: Storage, shape: number[], perm: number[]): Storage;

  /** In-place optimizer updates over flat vectors of equal length. */
  sgdStep(param: Storage, grad: Storage, velocity: Storage, p: SgdParams): void;
  adamwStep(param: Storage, grad: Storage, m: Storage, v: Storage, p: AdamWParams): void;
  /**
   * LAMB (You et al. 2019): the AdamW update u = m̂/(√v̂+ε) + wd·w of every element (into `update`),
   * then for each tensor s of `segments` (i32 pairs offset, size) w −= lr·r_s·u with the trust ratio
   * r_s = ‖w_s‖/‖u_s‖, 1 when either is 0. `norms` holds 2 floats per segment.
   */
  lambStep(param: Storage, grad: Storage, m: Storage, v: Storage, update: Storage, segments: Storage, norms: Storage, segmentCount: number, p: AdamWParams): void;

  // DGC (packages/distributed) -------------------------------------------------------------------
  /** dst[0] = Σ_{i<n} x[i]² (x: [n] → dst: [1]), reduced in a fixed order without a readback. */
  dgcSumSquares(x: Storage, n: number, dst: Storage): void;
  /** In place over [n]: momentum factor masking, clipping, u ← m·u + g, v ← v + u (see DgcAccumulateParams). */
  dgcAccumulate(g: Storage, u: Storage, v: Storage, sumSq: Storage | null, p: DgcAccumulateParams): void;
  /** out[offset + j] = bits(|v[pos_j]|), pos_j a seeded position in stratum j (NaN → 0). v: [n]. */
  dgcSample(v: Storage, out: Storage, p: DgcSampleParams): void;
  /** out[0] = 0, out[2] = rank-th largest of the count sample words at offset, out[1] = max(that, FLT_MIN). */
  dgcThreshold(out: Storage, count: number, rank: number, offset: number): void;
  /** Appends (i, v_i) for every |v_i| ≥ bits→f32(out[1]) at slots from the counter out[0] (see DgcSelectParams). */
  dgcSelect(v: Storage, out: Storage, p: DgcSelectParams): void;
  // end DGC ---------------------------------------------------------------------------------------

  /** Submits pending work (no-op on CPU). */
  flush(): void;
}
