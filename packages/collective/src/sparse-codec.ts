// Sparse (index, value) lists on the wire (frame dtypes idx_f32 / idx_f16). One chunk is
//   u32 n | n values (f32 or f16) | n indices as LEB128 varints, the first absolute, then the gap to the previous
// with indices strictly increasing, so a chunk decodes on its own. Top-k indices are spread evenly, so
// the gaps are about 1/density: one byte up to 99.2% sparsity, two up to 99.99%, instead of four.
import { decodeF16, encodeF16 } from '@tabfleet/protocol';

/** A sparse chunk that does not decode: wrong count, truncated or repeated index, index out of range. */
export class SparseCodecError extends Error {
  override name = 'SparseCodecError';
}

/** Longest LEB128 encoding of a u32. */
const MAX_VARINT_BYTES = 5;

/** Pairs that always fit in `payloadBytes`, whatever the gaps. */
export function maxSparsePairs(payloadBytes: number, valueBytes: 2 | 4): number {
  return Math.floor((payloadBytes - 4) / (valueBytes + MAX_VARINT_BYTES));
}

/** Copies of the pairs sorted by index; throws on a repeated index (a list holds each index once). */
export function sortedPairs(indices: Uint32Array, values: Float32Array): { indices: Uint32Array; values: Float32Array } {
  // DGC's lists come sorted: check that in one pass before paying for a sort.
  let increasing = true;
  for (let i = 1; i < indices.length && increasing; i++) increasing = indices[i] > indices[i - 1];
  if (increasing) return { indices: indices.slice(), values: values.slice() };
  const order = Array.from(indices.keys()).sort((a, b) => indices[a] - indices[b]);
  const idx = new Uint32Array(order.length);
  const val = new Float32Array(order.length);
  order.forEach((from, to) => {
    idx[to] = indices[from];
    val[to] = values[from];
  });
  for (let i = 1; i < idx.length; i++) if (idx[i] === idx[i - 1]) throw new Error(`index ${idx[i]} appears twice`);
  return { indices: idx, values: val };
}

/** Encodes sorted pairs as chunks of at most `perChunk` pairs (at least one chunk, maybe empty). */
export function encodeSparseChunks(indices: Uint32Array, values: Float32Array, valueBytes: 2 | 4, perChunk: number): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  const scratch = new Uint8Array(4 + perChunk * (valueBytes + MAX_VARINT_BYTES));
  for (let at = 0; at < indices.length || chunks.length === 0; at += perChunk) {
    const n = Math.min(perChunk, indices.length - at);
    new DataView(scratch.buffer).setUint32(0, n, true);
    const vals = new Uint8Array(scratch.buffer, 4, n * valueBytes);
    if (valueBytes === 4) vals.set(new Uint8Array(values.buffer, values.byteOffset + at * 4, n * 4));
    else {
      const h = new Uint16Array(n);
      encodeF16(values, at, n, h);
      vals.set(new Uint8Array(h.buffer));
    }
    let w = 4 + n * valueBytes;
    let prev = 0;
    for (let i = at; i < at + n; i++) {
      let v = i === at ? indices[i] : indices[i] - prev;
      prev = indices[i];
      while (v >= 0x80) {
        scratch[w++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      scratch[w++] = v;
    }
    chunks.push(scratch.slice(0, w));
  }
  return chunks;
}

/**
 * Decodes one chunk, checking its shape and that every index is below `length`; throws SparseCodecError
 * with the reason. The count is checked against the chunk's size before anything is allocated.
 */
export function decodeSparseChunk(p: Uint8Array, valueBytes: 2 | 4, length: number): { indices: Uint32Array; values: Float32Array } {
  if (p.byteLength < 4) throw new SparseCodecError(`sparse chunk of ${p.byteLength} bytes has no count`);
  const n = new DataView(p.buffer, p.byteOffset, p.byteLength).getUint32(0, true);
  let r = 4 + n * valueBytes;
  if (r + n > p.byteLength) throw new SparseCodecError(`sparse chunk of ${p.byteLength} bytes cannot hold ${n} pairs`);
  const values = new Float32Array(n);
  // Uint8Array's own slice copies: a Node Buffer's (what simple-peer delivers) is a view, whose
  // .buffer is the whole message, header included.
  const raw = Uint8Array.prototype.slice.call(p, 4, r).buffer;
  if (valueBytes === 4) values.set(new Float32Array(raw));
  else decodeF16(new Uint16Array(raw), values);
  const indices = new Uint32Array(n);
  let prev = 0;
  for (let i = 0; i < n; i++) {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      if (r >= p.byteLength || shift >= 7 * MAX_VARINT_BYTES) throw new SparseCodecError('sparse chunk has a truncated or overlong index');
      const b = p[r++];
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    if (i > 0 && v === 0) throw new SparseCodecError('sparse chunk repeats an index');
    const index = i === 0 ? v : prev + v;
    if (index >= length) throw new SparseCodecError(`sparse index ${index} is outside [0, ${length})`);
    indices[i] = prev = index;
  }
  if (r !== p.byteLength) throw new SparseCodecError(`sparse chunk has ${p.byteLength - r} bytes after its ${n} pairs`);
  return { indices, values };
}
