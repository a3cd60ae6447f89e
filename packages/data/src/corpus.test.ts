import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSafetensors } from '@tabfleet/protocol';
import { decodeTextShard, encodeTextShard, evenlySpaced, fortuneRecords, splitRecords, tokenize, tuningSplit } from './corpus';
import { loadFortunes } from './node';
import { textWindows } from './text';
import { bytesTokenizer, loadTokenizer } from './tokenizers';

test('fortune files: records between % lines, overstriking dropped, empty records skipped', () => {
  const text = 'First one.\n%\nSecond,\n  two lines.\n%\n%\n_\bB_\bo_\bl_\bd words.\n%\n';
  assert.deepEqual(fortuneRecords(text), ['First one.', 'Second,\n  two lines.', 'Bold words.']);
});

test('the split is by record, stable, disjoint and about 5% validation', () => {
  const records = Array.from({ length: 4000 }, (_, i) => `record number ${i}, with some words`);
  const a = splitRecords(records), b = splitRecords([...records].reverse());
  assert.equal(a.records.train + a.records.validation, 4000);
  assert.ok(Math.abs(a.records.validation / 4000 - 0.05) < 0.015, `${a.records.validation} of 4000`);
  assert.deepEqual(new Set(b.validation.split('\n\n')), new Set(a.validation.split('\n\n')), 'the same records, whatever their order');
  const train = new Set(a.train.split('\n\n'));
  assert.ok(a.validation.split('\n\n').every((r) => !train.has(r)));
});

test('the tuning split: about 5% of the records, disjoint from training, and never a validation record', () => {
  const records = Array.from({ length: 4000 }, (_, i) => `record number ${i}, with some words`);
  const { validation } = splitRecords(records), t = tuningSplit(records);
  const split = (text: string) => new Set(text.split('\n\n'));
  const held = split(validation), tuning = split(t.validation), train = split(t.train);
  assert.ok(Math.abs(t.records.validation / 4000 - 0.05) < 0.015, `${t.records.validation} of 4000`);
  assert.equal(t.records.train + t.records.validation + held.size, 4000, 'every record once: training, tuning or validation');
  assert.ok([...tuning].every((r) => !held.has(r) && !train.has(r)));
  assert.ok([...train].every((r) => !held.has(r)));
});

test('text shards: windows round-trip through safetensors; ids outside the vocabulary and other tensors are refused', () => {
  const ids = bytesTokenizer.encode('the quick brown fox jumps over the lazy dog, again and again.');
  const windows = textWindows(ids, 8, 256);
  const shard = decodeTextShard(encodeTextShard(windows, [2, 0]), 256);
  assert.equal(shard.count, 2);
  assert.deepEqual([...shard.x.subarray(0, 8)], [...windows.x.subarray(16, 24)]);
  assert.deepEqual([...shard.y.subarray(8, 16)], [...windows.y.subarray(0, 8)]);
  assert.throws(() => decodeTextShard(encodeTextShard(windows, [0]), 100), /token id 116 at 0 is outside the vocabulary of 100/);
  assert.throws(() => decodeTextShard(encodeSafetensors({ x: { dtype: 'U8', shape: [1, 1], data: new Uint8Array(1) } }), 256), /x and y, I32/);
  assert.deepEqual([...evenlySpaced(10, 4)], [0, 2, 5, 7]);
  assert.deepEqual([...evenlySpaced(3, 4)], [0, 1, 2]);
});

test('the fortunes corpus from its Debian package: thousands of records, 5% held out, GPT-2 BPE at 3–4 bytes a token', async () => {
  const corpus = await loadFortunes();
  assert.ok(corpus.files.includes('people') && !corpus.files.includes('art') && !corpus.files.some((f) => f.includes('.')), corpus.files.join());
  assert.ok(corpus.records.train > 10_000 && corpus.records.validation > 500, JSON.stringify(corpus.records));
  const val = tokenize(corpus.validation, await loadTokenizer('gpt2'));
  const perToken = val.bytes / val.ids.length;
  assert.ok(perToken > 3 && perToken < 4.5, `${perToken} bytes per GPT-2 token`);
  assert.ok(val.ids.every((id) => id >= 0 && id < 50_257));
});
