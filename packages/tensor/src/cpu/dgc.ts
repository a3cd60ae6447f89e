// Reference DGC kernels (Deep Gradient Compression, packages/distributed): squared norm for clipping,
// momentum-corrected accumulation with momentum factor masking, the threshold sample, the k-th largest
// sampled |value|, and selection into (index, value) pairs. The WGSL kernels (shaders/dgc_*.wgsl)
// are tested against these word for word. `words` is the u32 header-and-pairs buffer; `floats` is the
// same memory read as f32.
import type { DgcAccumulateParams, DgcSampleParams, DgcSelectParams } from '../backend';
import type { FloatArray } from './backend';

export function dgcSumSquaresRef(x: FloatArray, n: number): number {
  let acc = 0;
  for (let i = 0; i < n; i++) acc += x[i] * x[i];
  return acc;
}

/** v ← (v unless sent) + (u ← momentum·(u unless sent) + clip(g)); with momentum 0, v ← v + clip(g). */
export function dgcAccumulateRef(G: FloatArray, U: FloatArray, V: FloatArray, sumSq: number | null, p: DgcAccumulateParams): void {
  let scale = 1;
  if (p.clipNorm > 0) {
    if (sumSq === null) throw new Error('dgcAccumulate: clipping needs sumSq');
    const norm = Math.sqrt(sumSq);
    if (norm > p.clipNorm) scale = p.clipNorm / norm;
  }
  const thr = p.maskThreshold, fr = Math.fround;
  for (let i = 0; i < p.n; i++) {
    const a = Math.abs(V[i]);
    const sent = thr > 0 && (a > thr || (a === thr && i <= p.maskTieIndex));
    const gi = fr(G[i] * scale);
    const vi = sent ? 0 : V[i];
    if (p.momentum !== 0) {
      U[i] = fr(fr(p.momentum * (sent ? 0 : U[i])) + gi);
      V[i] = vi + U[i];
    } else {
      V[i] = vi + gi;
    }
  }
}

/** One |value| per stride-long stratum at a hashed position, as f32 bits (NaN and Inf sample as 0). */
export function dgcSampleRef(V: FloatArray, words: Uint32Array, p: DgcSampleParams): void {
  const bits = new Uint32Array(new Float32Array(1).buffer), f = new Float32Array(bits.buffer);
  const mix = Math.imul(p.seed >>> 0, 0x9e3779b9) >>> 0;
  for (let j = 0; j < p.count; j++) {
    const start = j * p.stride, len = Math.min(p.stride, p.n - start);
    f[0] = V[start + (dgcHash((j ^ mix) >>> 0) % len)];
    const b = bits[0] & 0x7fffffff;
    words[p.offset + j] = b > 0x7f800000 ? 0 : b;
  }
}

/** Header words: [0] pair count (reset), [1] threshold (at least the smallest normal), [2] the k-th sample. */
export function dgcThresholdRef(words: Uint32Array, count: number, rank: number, offset: number): void {
  const sorted = words.slice(offset, offset + count).sort();
  const r = Math.min(Math.max(rank, 1), Math.max(count, 1));
  const kth = count === 0 ? 0 : sorted[count - r];
  words[0] = 0;
  words[1] = Math.max(kth, 0x00800000);
  words[2] = kth;
}

/** Appends (index, value) for |value| ≥ threshold, up to capacity; the count goes on past it. */
export function dgcSelectRef(V: FloatArray, words: Uint32Array, floats: Float32Array, p: DgcSelectParams): void {
  const thr = floats[1];
  let count = words[0];
  for (let i = 0; i < p.n; i++) {
    const x = Math.fround(V[i]);
    if (!(Math.abs(x) >= thr)) continue;
    if (count < p.capacity) {
      words[p.pairsOffset + 2 * count] = i;
      floats[p.pairsOffset + 2 * count + 1] = x;
    }
    count++;
  }
  words[0] = count;
}

/** lowbias32, the integer hash dgc_sample.wgsl uses for its sample positions. */
export function dgcHash(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}
