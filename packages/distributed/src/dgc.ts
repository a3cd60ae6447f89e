// Deep Gradient Compression (Lin et al., ICLR 2018) over a flat f32 vector of length L, on any Backend.
//
// One compress call records, into the caller's open command buffer:
//   [‖g‖² (2 dispatches, only with clipNorm > 0)] → accumulate (momentum factor masking of the previous
//   call's selection, local clipping, u ← m·u + g, v ← v + u) → sample |v| (~1%, stratified, seeded)
//   → threshold (radix select of the sample, on the GPU) → select + compact (|v_i| ≥ thr, atomic slots)
// and then reads back ONE small buffer: count, threshold, the sample and the candidate pairs. The
// sampled threshold deliberately over-selects (~1.5k plus a margin); the host trims the candidates to
// exactly the top k by magnitude (ties broken by lower index), so the result does not depend on the
// sample's noise. If the candidates are far off — fewer than k/2 or more than the capacity — the host
// picks a new threshold from the sample it already has and re-selects (one more dispatch and readback).
// Masking of what was sent happens at the start of the next call (fused into accumulate), with the
// exact rule "|v_i| > thr ∨ (|v_i| = thr ∧ i ≤ tieIndex)" that describes the sent set.
//
// For parameter deltas (LocalSGD, DiLoCo) use momentum 0 and clipNorm 0: v then accumulates exactly
// what was not sent (error feedback), and Σ sent + v = Σ inputs.
import { DGC_HEADER_WORDS, type Backend, type Storage } from '@tabfleet/tensor';
import { sparsityAt, topKCount } from './sparsity';

export interface DgcConfig {
  /** Momentum of the correction (u ← m·u + g); 0 accumulates g directly (use 0 for deltas). */
  momentum: number;
  /** Local gradient clipping: g ← g · min(1, clipNorm/‖g‖₂) before accumulation; 0 turns it off. */
  clipNorm: number;
  /** Sparsity after warm-up, e.g. 0.999 (k = 0.1% of L). */
  finalSparsity: number;
  /** Steps of the 75% → 93.75% → 98.4375% → 99.6% warm-up; 0 starts at finalSparsity. */
  warmupSteps: number;
  /** Fraction of L sampled for the threshold (default 0.01, at least 2048 samples or all of L). */
  sampleFraction?: number;
}

/** A top-k update: unique indices in increasing order with their values (v_i at selection). */
export interface SparseUpdate {
  indices: Uint32Array;
  values: Float32Array;
  /** L, the dense length. */
  length: number;
  /** Scheduled sparsity of this call (k = ceil((1 − sparsity)·L)). */
  sparsity: number;
  /** Smallest |value| sent (the trimmed threshold); 0 when nothing was sent. */
  threshold: number;
}

/** What the last compress call did (tests, benchmarks, logs). */
export interface DgcCallStats {
  /** Target count ceil((1 − sparsity)·L). */
  k: number;
  /** Elements sent (k unless fewer candidates were found, see `candidates`). */
  sent: number;
  /** Elements at or above the final selection threshold (before trimming to k). */
  candidates: number;
  /** Pair slots in the result buffer. */
  capacity: number;
  /** Selection passes: 1 in the common case, more when the sampled threshold was far off. */
  passes: number;
  /** GPU → host reads (= passes). */
  readbacks: number;
  /** The threshold the GPU estimated from the sample, and the one the last pass used. */
  sampledThreshold: number;
  selectThreshold: number;
}

const FLT_MIN = 1.1754943508222875e-38;
const MIN_SAMPLE = 2048;
/** Selection passes before accepting an under-selection (or falling back to full capacity). */
const MAX_PASSES = 4;

const f32Bits = new Float32Array(1);
const u32Bits = new Uint32Array(f32Bits.buffer);
function bitsToF32(b: number): number {
  u32Bits[0] = b;
  return f32Bits[0];
}
function f32ToBits(x: number): number {
  f32Bits[0] = x;
  return u32Bits[0];
}

export class DgcCompressor {
  readonly length: number;
  /** Sample geometry: one position per stratum of `sampleStride` scalars, `sampleCount` in all. */
  readonly sampleStride: number;
  readonly sampleCount: number;
  private readonly sampleWords: number;
  private u: Storage;
  private v: Storage;
  private sumSq: Storage | null;
  private out: Storage | null = null;
  /** The previous call's sent set, masked at the start of the next accumulate (threshold 0 = none). */
  private pendingMask = { threshold: 0, tieIndex: 0 };
  private calls = 0;
  private busy = false;
  private disposed = false;
  lastStats: DgcCallStats | null = null;
  /** Totals over the compressor's life. */
  readonly totals = { calls: 0, passes: 0, readbacks: 0 };

  constructor(readonly backend: Backend, length: number, readonly cfg: DgcConfig) {
    if (!Number.isInteger(length) || length < 1) throw new Error(`DgcCompressor: length must be a positive integer, got ${length}`);
    if (!(cfg.momentum >= 0 && cfg.momentum < 1)) throw new Error(`DgcCompressor: momentum must be in [0, 1), got ${cfg.momentum}`);
    if (!(cfg.clipNorm >= 0)) throw new Error(`DgcCompressor: clipNorm must be ≥ 0, got ${cfg.clipNorm}`);
    sparsityAt(0, cfg); // validates finalSparsity
    const fraction = cfg.sampleFraction ?? 0.01;
    if (!(fraction > 0 && fraction <= 1)) throw new Error(`DgcCompressor: sampleFraction must be in (0, 1], got ${fraction}`);
    this.length = length;
    const want = Math.min(length, Math.max(Math.ceil(fraction * length), MIN_SAMPLE));
    this.sampleStride = Math.max(1, Math.floor(length / want));
    this.sampleCount = Math.ceil(length / this.sampleStride);
    this.sampleWords = Math.ceil(this.sampleCount / DGC_HEADER_WORDS) * DGC_HEADER_WORDS;
    this.v = backend.alloc(length, 'f32');
    this.u = backend.alloc(cfg.momentum !== 0 ? length : 1, 'f32');
    this.sumSq = cfg.clipNorm > 0 ? backend.alloc(1, 'f32') : null;
    // The result buffer at the schedule's largest selection (its first sync), now: a memory plan made
    // after the compressor counts it. It grows past that only when a selection falls back to more.
    this.ensureOut(this.plan(topKCount(length, sparsityAt(0, cfg))).capacity);
    this.reset();
  }

  /** Zeroes the momentum u and the accumulator v and forgets the pending mask. */
  reset(): void {
    this.backend.fill(this.u, 0);
    this.backend.fill(this.v, 0);
    this.pendingMask = { threshold: 0, tieIndex: 0 };
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const s of [this.u, this.v, this.sumSq, this.out]) if (s) this.backend.release(s);
    this.out = null;
  }

  /** Sample rank whose magnitude becomes the GPU threshold, and the pair capacity, for target k. */
  private plan(k: number): { rank: number; capacity: number } {
    const L = this.length, s = this.sampleCount;
    if (this.sampleStride === 1) return { rank: k, capacity: Math.min(L, 2 * k + 64) }; // the sample is v itself
    const qs = (k / L) * s; // expected sample elements in the top k
    // Aim above k so that falling below k (let alone k/2) is rare: at 99.9% of the MLP (qs ≈ 2) rank 9,
    // ~4.4k candidates expected; P(fewer than k) ≈ 6e-4.
    const rank = Math.min(s, Math.max(1, Math.ceil(1.5 * qs + 2.5 * Math.sqrt(qs) + 2)));
    // Candidates ≈ L·Beta(rank, s − rank + 1): mean L·rank/s, sd ≈ L·√rank/s.
    const mean = (L * rank) / s, sd = (L * Math.sqrt(rank)) / s;
    return { rank, capacity: Math.min(L, Math.ceil(mean + 6 * sd + 64)) };
  }

  private pairsOffset(): number {
    return DGC_HEADER_WORDS + this.sampleWords;
  }

  /** The result buffer, grown (never shrunk) to hold `capacity` pairs. */
  private ensureOut(capacity: number): Storage {
    const words = this.pairsOffset() + 2 * capacity;
    if (!this.out || this.out.size < words) {
      if (this.out) this.backend.release(this.out);
      this.out = this.backend.alloc(words, 'i32');
    }
    return this.out;
  }

  private async readOut(capacity: number): Promise<{ u32: Uint32Array; f32: Float32Array }> {
    const words = await this.backend.read(this.backend.view(this.out!, 0, this.pairsOffset() + 2 * capacity), 'i32');
    return { u32: new Uint32Array(words.buffer, words.byteOffset, words.length), f32: new Float32Array(words.buffer, words.byteOffset, words.length) };
  }

  /**
   * grad: [≥ L] on this backend (e.g. ParamStore.flatGrads, or a parameter delta). Records clipping,
   * momentum correction, accumulation, sampling, threshold and selection, and reads back only the
   * candidate pairs (one readback unless a correction pass is needed). Sends the top k of |v| at the
   * scheduled sparsity for `step`; what was sent is masked out of u and v before the next call.
   * One call at a time (the mask of one call is applied by the next).
   */
  async compress(grad: Storage, step: number): Promise<SparseUpdate> {
    if (this.disposed) throw new Error('DgcCompressor: compress after dispose');
    if (grad.size < this.length) throw new Error(`DgcCompressor: gradient has ${grad.size} elements, expected ${this.length}`);
    if (this.busy) throw new Error('DgcCompressor: compress called again before the previous call finished');
    this.busy = true;
    try {
      return await this.compressOnce(grad, step);
    } finally {
      this.busy = false;
    }
  }

  private async compressOnce(grad: Storage, step: number): Promise<SparseUpdate> {
    const be = this.backend, L = this.length;
    const sparsity = sparsityAt(step, this.cfg);
    const k = topKCount(L, sparsity);
    const plan = this.plan(k);
    let capacity = plan.capacity;
    const out = this.ensureOut(capacity);
    const pairsOffset = this.pairsOffset();

    if (this.sumSq) be.dgcSumSquares(grad, L, this.sumSq);
    be.dgcAccumulate(grad, this.u, this.v, this.sumSq, {
      n: L, momentum: this.cfg.momentum, clipNorm: this.cfg.clipNorm,
      maskThreshold: this.pendingMask.threshold, maskTieIndex: this.pendingMask.tieIndex,
    });
    this.pendingMask = { threshold: 0, tieIndex: 0 };
    be.dgcSample(this.v, out, { n: L, count: this.sampleCount, stride: this.sampleStride, seed: this.calls++, offset: DGC_HEADER_WORDS });
    be.dgcThreshold(out, this.sampleCount, plan.rank, DGC_HEADER_WORDS);
    be.dgcSelect(this.v, out, { n: L, capacity, pairsOffset });
    let r = await this.readOut(capacity);
    let passes = 1;
    const sampledThreshold = bitsToF32(r.u32[1]);
    let sortedSample: Float32Array | null = null;

    // Corrections keep the thresholds bracketed: tooHigh gave < k/2 candidates, tooLow over capacity.
    let tooHigh = Infinity, tooLow = 0;
    for (;;) {
      const count = r.u32[0], thr = bitsToF32(r.u32[1]);
      const over = count > capacity;
      const under = count < Math.ceil(k / 2) && thr > FLT_MIN;
      if (!over && (!under || passes >= MAX_PASSES)) break;
      if (over) tooLow = Math.max(tooLow, thr);
      else tooHigh = Math.min(tooHigh, thr);
      let next: number | null = null;
      if (passes < MAX_PASSES) {
        sortedSample ??= Float32Array.from(r.f32.subarray(DGC_HEADER_WORDS, DGC_HEADER_WORDS + this.sampleCount)).sort().reverse();
        next = this.correctedThreshold(sortedSample, thr, count, k, capacity);
        if (next !== null && !(next > tooLow && next < tooHigh)) next = tooHigh === Infinity ? null : Math.max(Math.sqrt(Math.max(tooLow, FLT_MIN) * tooHigh), FLT_MIN);
        if (next !== null && !(next > tooLow && next < tooHigh)) next = null;
      }
      if (next === null) {
        if (!over) break; // nothing better to try: accept the under-selection
        // Ties or the last pass: every candidate at this threshold (capacity L always fits).
        capacity = L;
        next = thr;
        tooLow = 0;
      }
      this.ensureOut(capacity);
      const header = new Int32Array(DGC_HEADER_WORDS);
      header[1] = f32ToBits(Math.max(next, FLT_MIN));
      be.write(be.view(this.out!, 0, DGC_HEADER_WORDS), header); // count 0, new threshold
      be.dgcSelect(this.v, this.out!, { n: L, capacity, pairsOffset });
      r = await this.readOut(capacity);
      passes++;
    }

    const count = r.u32[0], selectThreshold = bitsToF32(r.u32[1]);
    const update = this.finish(r, count, k, selectThreshold, sparsity, pairsOffset);
    this.lastStats = { k, sent: update.indices.length, candidates: count, capacity, passes, readbacks: passes, sampledThreshold, selectThreshold };
    this.totals.calls++;
    this.totals.passes += passes;
    this.totals.readbacks += passes;
    return update;
  }

  /**
   * A new threshold after `count` candidates at `thr` were out of bounds, from the sample (sorted
   * descending): scale the sample rank of thr by target/count, and step to the next distinct sample
   * value when that makes no progress (under: else thr/16; over: else null, i.e. ties at thr).
   */
  private correctedThreshold(sorted: Float32Array, thr: number, count: number, k: number, capacity: number): number | null {
    const s = sorted.length;
    let rankAtThr = 0; // sample elements ≥ thr
    while (rankAtThr < s && sorted[rankAtThr] >= thr) rankAtThr++;
    if (count > capacity) {
      const target = Math.min(capacity / 2, 1.5 * k);
      const r = Math.max(1, Math.floor((Math.max(rankAtThr, 1) * target) / count));
      if (sorted[r - 1] > thr) return sorted[r - 1];
      for (let i = rankAtThr - 1; i >= 0; i--) if (sorted[i] > thr) return sorted[i];
      return null; // ties: no larger sample value
    }
    const target = Math.min(capacity * 0.75, 1.5 * k);
    const r = Math.min(s, Math.ceil((Math.max(rankAtThr, 1) * target) / Math.max(count, 1)));
    if (sorted[r - 1] < thr && sorted[r - 1] > 0) return sorted[r - 1];
    for (let i = rankAtThr; i < s; i++) if (sorted[i] < thr && sorted[i] > 0) return sorted[i];
    return thr / 16;
  }

  /** Trims candidates to the top k (ties → lower index), sorts by index, sets the pending mask. */
  private finish(r: { u32: Uint32Array; f32: Float32Array }, count: number, k: number, selectThreshold: number, sparsity: number, pairsOffset: number): SparseUpdate {
    const idx = (j: number) => r.u32[pairsOffset + 2 * j];
    const val = (j: number) => r.f32[pairsOffset + 2 * j + 1];
    let keep: number[] | null = null; // slots, when trimming
    let threshold = selectThreshold, tieIndex = 0xffffffff;
    if (count > k) {
      const mags = new Float32Array(count);
      for (let j = 0; j < count; j++) mags[j] = Math.abs(val(j));
      mags.sort();
      threshold = mags[count - k]; // the k-th largest magnitude
      keep = [];
      const ties: number[] = [];
      for (let j = 0; j < count; j++) {
        const a = Math.abs(val(j));
        if (a > threshold) keep.push(j);
        else if (a === threshold) ties.push(j);
      }
      ties.sort((a, b) => idx(a) - idx(b));
      // Fewer than k magnitudes exceed the k-th largest, so at least one tie is sent.
      const need = k - keep.length;
      for (let t = 0; t < need; t++) keep.push(ties[t]);
      tieIndex = idx(ties[need - 1]);
    }
    const n = keep ? keep.length : count;
    // Sort by index: key = index · 2^B + slot, exact in f64 for L·capacity < 2^52.
    const B = Math.max(1, Math.ceil(Math.log2(count + 1)));
    const scaleB = 2 ** B;
    const keys = new Float64Array(n);
    for (let t = 0; t < n; t++) {
      const j = keep ? keep[t] : t;
      keys[t] = idx(j) * scaleB + j;
    }
    keys.sort();
    const indices = new Uint32Array(n), values = new Float32Array(n);
    let minAbs = Infinity;
    for (let t = 0; t < n; t++) {
      const j = keys[t] % scaleB;
      indices[t] = idx(j);
      values[t] = val(j);
      minAbs = Math.min(minAbs, Math.abs(values[t]));
    }
    this.pendingMask = n > 0 ? { threshold, tieIndex } : { threshold: 0, tieIndex: 0 };
    return { indices, values, length: this.length, sparsity, threshold: n > 0 ? minAbs : 0 };
  }

  /**
   * The state the next compress call starts from (the pending mask applied), read back whole: for
   * tests and debugging only (2 readbacks of L floats). u is null when momentum is 0.
   */
  async readState(): Promise<{ u: Float32Array | null; v: Float32Array }> {
    const v = (await this.backend.read(this.v, 'f32')) as Float32Array;
    const u = this.cfg.momentum !== 0 ? ((await this.backend.read(this.u, 'f32')) as Float32Array) : null;
    const { threshold, tieIndex } = this.pendingMask;
    if (threshold > 0) {
      for (let i = 0; i < this.length; i++) {
        const a = Math.abs(v[i]);
        if (a > threshold || (a === threshold && i <= tieIndex)) {
          v[i] = 0;
          if (u) u[i] = 0;
        }
      }
    }
    return { u: u ? u.slice(0, this.length) : null, v: v.slice(0, this.length) };
  }
}

/**
 * Dense vector from sparse updates (host side, for applying): out[i] = scale · Σ_u values at i, summed
 * in the order given (members in fixed ring order), in f64 and rounded once, so every member that sums
 * the same updates in the same order gets the same bits.
 */
export function densify(updates: readonly Pick<SparseUpdate, 'indices' | 'values' | 'length'>[], length: number, scale: number): Float32Array {
  const acc = new Float64Array(length);
  for (const up of updates) {
    if (up.length !== length) throw new Error(`densify: update of length ${up.length}, expected ${length}`);
    if (up.indices.length !== up.values.length) throw new Error('densify: indices and values differ in length');
    for (let j = 0; j < up.indices.length; j++) {
      const i = up.indices[j];
      if (i >= length) throw new Error(`densify: index ${i} out of range ${length}`);
      acc[i] += up.values[j];
    }
  }
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) out[i] = acc[i] * scale;
  return out;
}

/** Checks an inbound sparse update: strictly increasing indices below length, finite values. Null if fine. */
export function checkSparseUpdate(indices: Uint32Array, values: Float32Array, length: number): string | null {
  if (indices.length !== values.length) return `indices (${indices.length}) and values (${values.length}) differ in length`;
  for (let j = 0; j < indices.length; j++) {
    if (indices[j] >= length) return `index ${indices[j]} out of range ${length}`;
    if (j > 0 && indices[j] <= indices[j - 1]) return `indices not strictly increasing at ${j}`;
    if (!Number.isFinite(values[j])) return `non-finite value at ${j}`;
  }
  return null;
}
