import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeSparseChunk, encodeSparseChunks, SparseCodecError } from '@tabfleet/collective';
import { decodeFrame, encodeFrame } from '@tabfleet/protocol';
import { SPARSE_TARGETS } from './sparse-codec';
import { assertTarget } from './target';

for (const t of SPARSE_TARGETS) test(`fuzz sparse-codec: ${t.name}`, () => assertTarget(t));

// Found by the round-trip property: simple-peer delivers each message as a Node Buffer, whose slice()
// is a view, so the values were read from the start of the message (the frame header): a RangeError
// for f32 and silently wrong sums for f16.
for (const [vb, dtype] of [[4, 'idx_f32'], [2, 'idx_f16']] as const) {
  test(`a sparse ${dtype} chunk inside a frame delivered as a Node Buffer decodes to its own values`, () => {
    const [chunk] = encodeSparseChunks(Uint32Array.from([1, 5, 9]), Float32Array.from([1, 2, 3]), vb, 100);
    const frame = encodeFrame({ kind: 'sparseAllgather', dtype, flags: 1, job: 7, round: 3, op: 0, step: 0, segment: 0, chunk: 0 }, chunk);
    const delivered = Buffer.from(frame.buffer); // what simple-peer's 'data' event hands over
    const d = decodeSparseChunk(decodeFrame(delivered).payload, vb, 10);
    assert.deepEqual([...d.indices], [1, 5, 9]);
    assert.deepEqual([...d.values], [1, 2, 3]);
  });
}

test('a chunk whose count claims 2^31 pairs is refused with a SparseCodecError before anything is allocated', () => {
  const b = new Uint8Array(16);
  new DataView(b.buffer).setUint32(0, 2 ** 31, true);
  assert.throws(() => decodeSparseChunk(b, 4, 100), (e: Error) => e instanceof SparseCodecError && /cannot hold 2147483648 pairs/.test(e.message));
});
