// Star-fallback aggregation of members' update vectors, and the checks every inbound tensor passes:
// length, finite values, and an L2 norm bound against the round's median (outliers are rejected).
import { ProtocolError } from '@tabfleet/protocol';

/** An update whose norm exceeds this multiple of the round's median norm is rejected as an outlier. */
export const NORM_OUTLIER_FACTOR = 10;

/** Reads little-endian f32 bytes; throws `bad_tensor` on a length that is not a whole, matching vector. */
export function decodeUpdate(bytes: Uint8Array, expectedLength: number | null): Float32Array {
  if (bytes.byteLength === 0 || bytes.byteLength % 4 !== 0) throw new ProtocolError('bad_tensor', `update is ${bytes.byteLength} bytes: not a non-empty f32 vector`);
  const length = bytes.byteLength / 4;
  if (expectedLength !== null && length !== expectedLength) throw new ProtocolError('bad_tensor', `update has ${length} values, the round's vectors have ${expectedLength}`);
  const copy = new Float32Array(length);
  new Uint8Array(copy.buffer).set(bytes);
  for (let i = 0; i < length; i++) {
    if (!Number.isFinite(copy[i])) throw new ProtocolError('bad_tensor', `update value ${i} is ${copy[i]}: not finite`);
  }
  return copy;
}

export function l2norm(v: Float32Array): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  return Math.sqrt(s);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Splits updates into accepted and norm outliers (only meaningful with 3 or more updates). */
export function rejectOutliers(updates: Float32Array[]): { accepted: Float32Array[]; rejected: number } {
  if (updates.length < 3) return { accepted: updates, rejected: 0 };
  const norms = updates.map(l2norm);
  const bound = NORM_OUTLIER_FACTOR * Math.max(median(norms), 1e-12);
  const accepted = updates.filter((_, i) => norms[i] <= bound);
  return { accepted, rejected: updates.length - accepted.length };
}

export function mean(updates: Float32Array[]): Float32Array {
  const out = new Float32Array(updates[0].length);
  for (const u of updates) for (let i = 0; i < out.length; i++) out[i] += u[i];
  for (let i = 0; i < out.length; i++) out[i] /= updates.length;
  return out;
}

/** Coordinate-wise trimmed mean: drops the `trim` fraction of lowest and highest values per coordinate. */
export function trimmedMean(updates: Float32Array[], trim: number): Float32Array {
  const n = updates.length;
  const k = Math.min(Math.floor(n * trim), Math.floor((n - 1) / 2));
  if (k === 0) return mean(updates);
  const out = new Float32Array(updates[0].length);
  const column = new Float64Array(n);
  for (let i = 0; i < out.length; i++) {
    for (let j = 0; j < n; j++) column[j] = updates[j][i];
    column.sort();
    let s = 0;
    for (let j = k; j < n - k; j++) s += column[j];
    out[i] = s / (n - 2 * k);
  }
  return out;
}

export function aggregate(updates: Float32Array[], rule: 'mean' | 'trimmed-mean', trim: number): Float32Array {
  return rule === 'mean' ? mean(updates) : trimmedMean(updates, trim);
}
