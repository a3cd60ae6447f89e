// In-memory classification data sets and the batches training draws from them.
import { Rng } from '@tabfleet/protocol';

export interface Dataset {
  /** Row-major features, `features` floats per example (f32), or token windows (i32). */
  x: Float32Array | Int32Array;
  /** One label per example, or `labelsPerExample` next-token ids per window. */
  y: Int32Array;
  count: number;
  features: number;
  labelsPerExample: number;
  classes: number;
}

export interface Batch {
  x: Float32Array | Int32Array;
  y: Int32Array;
  size: number;
}

/** Copies the examples at `indices` into one batch. */
export function gather(ds: Dataset, indices: ArrayLike<number>): Batch {
  const n = indices.length, F = ds.features, L = ds.labelsPerExample;
  const x = ds.x instanceof Int32Array ? new Int32Array(n * F) : new Float32Array(n * F);
  const y = new Int32Array(n * L);
  for (let i = 0; i < n; i++) {
    const j = indices[i];
    x.set(ds.x.subarray(j * F, (j + 1) * F), i * F);
    y.set(ds.y.subarray(j * L, (j + 1) * L), i * L);
  }
  return { x, y, size: n };
}

/** Examples [from, to) of a batch. */
export function sliceBatch(b: Batch, from: number, to: number): Batch {
  const F = b.x.length / b.size, L = b.y.length / b.size;
  return { x: b.x.slice(from * F, to * F), y: b.y.slice(from * L, to * L), size: to - from };
}

/** One batch of the examples of `parts`, in order. */
export function concatBatches(parts: Batch[]): Batch {
  if (parts.length === 1) return parts[0];
  const size = parts.reduce((n, b) => n + b.size, 0);
  const x = parts[0].x instanceof Int32Array ? new Int32Array(parts.reduce((n, b) => n + b.x.length, 0)) : new Float32Array(parts.reduce((n, b) => n + b.x.length, 0));
  const y = new Int32Array(parts.reduce((n, b) => n + b.y.length, 0));
  let xo = 0, yo = 0;
  for (const b of parts) {
    x.set(b.x, xo);
    y.set(b.y, yo);
    xo += b.x.length;
    yo += b.y.length;
  }
  return { x, y, size };
}

/**
 * This worker's share of the examples: a seeded permutation dealt round-robin by rank, so shards are
 * disjoint, cover the set, and are the same on every machine for the same (seed, world size).
 */
export function shardIndices(count: number, rank: number, worldSize: number, seed: number): Int32Array {
  if (!(worldSize >= 1 && rank >= 0 && rank < worldSize)) throw new Error(`rank ${rank} not in a world of ${worldSize}`);
  const perm = new Rng(seed).shuffle(Int32Array.from({ length: count }, (_, i) => i));
  const n = Math.floor((count - rank + worldSize - 1) / worldSize);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = perm[rank + i * worldSize];
  return out;
}

/** Shuffled batches of `indices` for one epoch; order depends only on (seed, epoch). Drops a ragged tail. */
export function* epochBatches(ds: Dataset, indices: Int32Array, batchSize: number, seed: number, epoch: number): Generator<Batch> {
  const order = new Rng(seed * 1000003 + epoch).shuffle(Int32Array.from(indices));
  for (let i = 0; i + batchSize <= order.length; i += batchSize) yield gather(ds, order.subarray(i, i + batchSize));
}

/** In-order batches over the whole set, the last one possibly smaller (evaluation). */
export function* sequentialBatches(ds: Dataset, batchSize: number): Generator<Batch> {
  for (let i = 0; i < ds.count; i += batchSize) {
    const n = Math.min(batchSize, ds.count - i);
    yield gather(ds, Int32Array.from({ length: n }, (_, k) => i + k));
  }
}
