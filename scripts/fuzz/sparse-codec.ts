// The sparse codec (@tabfleet/collective sparse-codec.ts): gap-coded (index, value) chunks that a ring
// neighbour forwards in sparse allgather (DGC), inside idx_f32 / idx_f16 frames.
import fc from 'fast-check';
import { decodeSparseChunk, encodeSparseChunks, maxSparsePairs, SparseCodecError } from '@tabfleet/collective';
import { decodeF16, decodeFrame, encodeF16, encodeFrame, MAX_FRAME_PAYLOAD } from '@tabfleet/protocol';
import { containerArb, inContainer, mutated, nastyU32 } from './bytes';
import { decodeOrRefuse, type FuzzTarget } from './target';

export interface SparseCase {
  length: number;
  indices: Uint32Array;
  values: Float32Array;
  valueBytes: 2 | 4;
  perChunk: number;
}

/** Sorted distinct indices below `length`, any f32 values (NaN, ±Inf and −0 included), any chunking. */
export const sparseCaseArb: fc.Arbitrary<SparseCase> = fc
  .record({
    length: fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1, max: 1 << 24 }), fc.constant(0xffffffff)),
    picks: fc.array(fc.nat({ max: 0xffffffff }), { maxLength: 200 }),
    valueBytes: fc.constantFrom(2 as const, 4 as const),
    perChunkPick: fc.nat(),
    seedValues: fc.array(fc.float(), { maxLength: 200 }),
  })
  .map(({ length, picks, valueBytes, perChunkPick, seedValues }) => {
    const indices = Uint32Array.from(new Set(picks.map((p) => p % length))).sort();
    const values = Float32Array.from(indices, (_, i) => seedValues[i % Math.max(1, seedValues.length)] ?? 0);
    const perChunk = 1 + (perChunkPick % maxSparsePairs(MAX_FRAME_PAYLOAD, valueBytes));
    return { length, indices, values, valueBytes, perChunk };
  });

export function encodeCase(c: SparseCase): Uint8Array[] {
  return encodeSparseChunks(c.indices, c.values, c.valueBytes, c.perChunk);
}

/** What a decoded chunk must satisfy: pairs within the bound its size allows, indices strictly increasing and in range. */
export function checkDecodedChunk(d: { indices: Uint32Array; values: Float32Array }, bytes: Uint8Array, valueBytes: 2 | 4, length: number): void {
  const n = d.indices.length;
  if (d.values.length !== n) throw new Error(`${n} indices but ${d.values.length} values`);
  // Each pair takes its value bytes and at least one index byte: the allocation bound.
  if (4 + n * (valueBytes + 1) > bytes.byteLength) throw new Error(`${n} pairs from ${bytes.byteLength} bytes`);
  for (let i = 0; i < n; i++) {
    if (d.indices[i] >= length) throw new Error(`index ${d.indices[i]} ≥ ${length}`);
    if (i > 0 && d.indices[i] <= d.indices[i - 1]) throw new Error('indices not strictly increasing');
  }
}

const sameF32 = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));

export const SPARSE_TARGETS: FuzzTarget[] = [
  {
    decoder: 'sparse-codec',
    name: 'sparse chunks round-trip (f32 exact, f16 rounded) through frames, in every container',
    quickRuns: 300,
    open: () => ({
      property: fc.property(sparseCaseArb, containerArb, (c, container) => {
        const chunks = encodeCase(c);
        const idx: number[] = [];
        const val: number[] = [];
        for (const [i, p] of chunks.entries()) {
          if (p.byteLength > MAX_FRAME_PAYLOAD) throw new Error(`chunk of ${p.byteLength} bytes does not fit a frame`);
          // As a neighbour's data channel delivers it: a whole frame, then its payload view.
          const frame = encodeFrame({ kind: 'sparseAllgather', dtype: c.valueBytes === 4 ? 'idx_f32' : 'idx_f16', flags: 0, job: 1, round: 1, op: 0, step: 0, segment: 0, chunk: i }, p);
          const d = decodeSparseChunk(decodeFrame(inContainer(frame, container)).payload, c.valueBytes, c.length);
          idx.push(...d.indices);
          val.push(...d.values);
        }
        let expected = c.values;
        if (c.valueBytes === 2) {
          const h = new Uint16Array(c.values.length);
          encodeF16(c.values, 0, c.values.length, h);
          expected = new Float32Array(h.length);
          decodeF16(h, expected);
        }
        if (!sameF32(Float32Array.from(idx), Float32Array.from(c.indices))) throw new Error('indices differ');
        if (!sameF32(Float32Array.from(val), expected)) throw new Error(`values differ: ${val.slice(0, 4)} vs ${[...expected.slice(0, 4)]}`);
      }),
    }),
  },
  {
    decoder: 'sparse-codec',
    name: 'mutated chunks (count field, gaps, truncation) decode within bounds or give a SparseCodecError',
    quickRuns: 1500,
    open: () => ({
      property: fc.property(
        mutated(sparseCaseArb.map((c) => encodeCase({ ...c, valueBytes: 4 })[0]), [0]),
        fc.constantFrom(2 as const, 4 as const),
        fc.oneof(fc.integer({ min: 1, max: 1 << 24 }), nastyU32),
        containerArb,
        (b, vb, length, container) => {
          const bytes = inContainer(b, container);
          const d = decodeOrRefuse(() => decodeSparseChunk(bytes, vb, length), SparseCodecError);
          if (d) checkDecodedChunk(d, bytes, vb, length);
        },
      ),
    }),
  },
  {
    decoder: 'sparse-codec',
    name: 'random bytes decode within bounds or give a SparseCodecError',
    quickRuns: 800,
    open: () => ({
      property: fc.property(
        fc.uint8Array({ maxLength: 256 }),
        fc.constantFrom(2 as const, 4 as const),
        fc.oneof(fc.integer({ min: 0, max: 300 }), nastyU32),
        containerArb,
        (b, vb, length, container) => {
          const bytes = inContainer(b, container);
          const d = decodeOrRefuse(() => decodeSparseChunk(bytes, vb, length), SparseCodecError);
          if (d) checkDecodedChunk(d, bytes, vb, length);
        },
      ),
    }),
  },
];
