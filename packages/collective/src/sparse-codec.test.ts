import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_FRAME_PAYLOAD } from '@tabfleet/protocol';
import { decodeSparseChunk, encodeSparseChunks, maxSparsePairs, sortedPairs } from './sparse-codec';

test('sparse chunks round-trip sorted pairs, f32 exactly and f16 rounded, with gap-coded indices', () => {
  const length = 3_000_000;
  const indices = Uint32Array.from([0, 1, 127, 128, 16_383, 16_384, 2_999_999]);
  const values = Float32Array.from([1.5, -2, 3.25, 1e-3, -7, 0.1, 65_504]);
  for (const vb of [4, 2] as const) {
    for (const per of [1, 3, 100]) {
      const chunks = encodeSparseChunks(indices, values, vb, per);
      assert.equal(chunks.length, Math.ceil(indices.length / per));
      const got = chunks.map((c) => decodeSparseChunk(c, vb, length));
      assert.deepEqual(got.flatMap((g) => [...g.indices]), [...indices]);
      const vals = got.flatMap((g) => [...g.values]);
      values.forEach((v, i) => assert.ok(Math.abs(vals[i] - v) <= (vb === 4 ? 0 : Math.abs(v) * 2 ** -11), `${vb} ${i}`));
    }
  }
  // One pair of a 99.9%-sparse list: 2 index bytes (gap ~1000) + 2 value bytes.
  const k = 1000;
  const spread = Uint32Array.from({ length: k }, (_, i) => i * 1000 + (i % 7));
  const [chunk] = encodeSparseChunks(spread, new Float32Array(k).fill(1), 2, maxSparsePairs(MAX_FRAME_PAYLOAD, 2));
  assert.equal(chunk.byteLength, 4 + k * 2 + 1 + (k - 1) * 2);
  assert.deepEqual(encodeSparseChunks(new Uint32Array(0), new Float32Array(0), 4, 10).map((c) => c.byteLength), [4]);
});

test('the worst case fits a frame', () => {
  for (const vb of [4, 2] as const) {
    const n = maxSparsePairs(MAX_FRAME_PAYLOAD, vb);
    const indices = Uint32Array.from({ length: n }, (_, i) => i * 2 ** 20);
    const chunks = encodeSparseChunks(indices, new Float32Array(n), vb, n);
    assert.equal(chunks.length, 1);
    assert.ok(chunks[0].byteLength <= MAX_FRAME_PAYLOAD);
  }
});

test('sortedPairs sorts by index and refuses a repeated index', () => {
  const s = sortedPairs(Uint32Array.from([9, 2, 5]), Float32Array.from([0.9, 0.2, 0.5]));
  assert.deepEqual([...s.indices], [2, 5, 9]);
  assert.deepEqual([...s.values], [Math.fround(0.2), 0.5, Math.fround(0.9)]);
  assert.throws(() => sortedPairs(Uint32Array.from([3, 1, 3]), new Float32Array(3)), /appears twice/);
});

test('malformed sparse chunks are refused with the reason', () => {
  const good = encodeSparseChunks(Uint32Array.from([4, 9]), Float32Array.from([1, 2]), 4, 10)[0];
  const patched = (f: (b: Uint8Array) => Uint8Array) => f(good.slice());
  const cases: [string, Uint8Array, RegExp][] = [
    ['no count', new Uint8Array(3), /no count/],
    ['count too large', patched((b) => (b[0] = 200, b)), /cannot hold/],
    ['truncated varint', patched((b) => (b[b.length - 1] = 0x85, b)), /truncated or overlong/],
    ['overlong varint', (() => { const b = new Uint8Array(4 + 4 + 6); b[0] = 1; b.fill(0x80, 8, 13); return b; })(), /truncated or overlong/],
    ['repeated index', patched((b) => (b[b.length - 1] = 0, b)), /repeats/],
    ['index out of range', patched((b) => (b[b.length - 1] = 100, b)), /outside \[0, 20\)/],
    ['trailing bytes', (() => { const b = new Uint8Array(good.length + 1); b.set(good); return b; })(), /bytes after/],
  ];
  for (const [name, bytes, message] of cases) assert.throws(() => decodeSparseChunk(bytes, 4, 20), message, name);
});
