import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { epochBatches, gather, sequentialBatches, shardIndices } from './dataset';
import { FASHION_MNIST_FILES, loadFashionMnist } from './fashion-mnist';
import { encodeIdx, IdxError, parseIdx } from './idx';
import { gaussianBlobs } from './synthetic';
import { CHARSET, decodeText, encodeText, generateCorpus, textWindows } from './text';

const FASHION_DIR = process.env.FASHION_MNIST_DIR ?? '/usr/share/datasets/fashion-mnist';

/** An IDX file with element type `type` (only 0x08 is valid). */
function idx(type: number, dims: number[], data: number[]): Uint8Array {
  const out = encodeIdx(dims, Uint8Array.from(data));
  out[2] = type;
  return out;
}

test('parseIdx reads dims and data', () => {
  const r = parseIdx(idx(0x08, [2, 3], [1, 2, 3, 4, 5, 6]));
  assert.deepEqual(r.dims, [2, 3]);
  assert.deepEqual([...r.data], [1, 2, 3, 4, 5, 6]);
});

const malformedIdx: [string, Uint8Array, RegExp][] = [
  ['too short', new Uint8Array(2), /too short/],
  ['gzip bytes', Uint8Array.from([0x1f, 0x8b, 8, 0, 0, 0]), /magic/],
  ['float element type', idx(0x0d, [1], [0, 0, 0, 0]), /element type/],
  ['truncated dims', idx(0x08, [2, 3], []).subarray(0, 9), /dimensions/],
  ['data shorter than dims', idx(0x08, [2, 3], [1, 2, 3]), /need 6/],
];
for (const [name, bytes, err] of malformedIdx) {
  test(`parseIdx rejects ${name}`, () => assert.throws(() => parseIdx(bytes), (e: Error) => e instanceof IdxError && err.test(e.message)));
}

test('Fashion-MNIST loads 60k/10k normalized images with balanced labels', async () => {
  const { train, test: t } = await loadFashionMnist(async (name) => readFileSync(join(FASHION_DIR, name)));
  assert.equal(train.count, 60000);
  assert.equal(t.count, 10000);
  assert.equal(train.features, 784);
  const counts = new Array(10).fill(0);
  for (const y of train.y) counts[y]++;
  assert.deepEqual(counts, new Array(10).fill(6000));
  let sum = 0;
  for (let i = 0; i < 784 * 1000; i++) sum += (train.x as Float32Array)[i];
  assert.ok(Math.abs(sum / (784 * 1000)) < 0.2, 'normalized pixels have mean near 0');
  assert.ok(Object.keys(FASHION_MNIST_FILES).length === 4);
});

test('shards are disjoint, cover the set and depend only on (seed, world size)', () => {
  const world = 3, n = 1000;
  const shards = [0, 1, 2].map((r) => shardIndices(n, r, world, 42));
  const all = shards.flatMap((s) => [...s]).sort((a, b) => a - b);
  assert.deepEqual(all, Array.from({ length: n }, (_, i) => i));
  assert.deepEqual([...shardIndices(n, 1, world, 42)], [...shards[1]]);
  assert.notDeepEqual([...shardIndices(n, 1, world, 43)], [...shards[1]]);
  assert.throws(() => shardIndices(n, 3, 3, 1), /rank 3/);
});

test('epoch batches are deterministic per (seed, epoch), differ across epochs and drop the ragged tail', () => {
  const ds = gaussianBlobs(103, 4, 3, 1);
  const idxs = shardIndices(ds.count, 0, 1, 1);
  const e0 = [...epochBatches(ds, idxs, 10, 7, 0)];
  const again = [...epochBatches(ds, idxs, 10, 7, 0)];
  const e1 = [...epochBatches(ds, idxs, 10, 7, 1)];
  assert.equal(e0.length, 10);
  assert.deepEqual(e0.map((b) => [...b.y]), again.map((b) => [...b.y]));
  assert.notDeepEqual(e0.map((b) => [...b.x]), e1.map((b) => [...b.x]));
  const seq = [...sequentialBatches(ds, 10)];
  assert.equal(seq.length, 11);
  assert.equal(seq.at(-1)!.size, 3);
  assert.deepEqual([...gather(ds, [2]).y], [ds.y[2]]);
});

test('generated corpus round-trips through the charset and windows shift targets by one', () => {
  const text = generateCorpus(50, 3);
  assert.equal(generateCorpus(50, 3), text);
  const ids = encodeText(text);
  assert.equal(decodeText(ids), text);
  assert.ok(ids.every((i) => i >= 0 && i < CHARSET.length));
  const w = textWindows(ids, 16, CHARSET.length);
  assert.equal(w.x[1], w.y[0]);
  assert.equal(w.x[17], w.y[16]);
  assert.throws(() => encodeText('Ω'), /not in the charset/);
});
