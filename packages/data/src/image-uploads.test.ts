import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSafetensors, type NamedTensor } from '@tabfleet/protocol';
import { checkIdxImageUpload, checkImageSafetensors, imageSplit, MIN_IMAGE_UPLOAD_EXAMPLES } from './image-uploads';
import { encodeIdx } from './idx';
import { UploadError } from './uploads';

const N = MIN_IMAGE_UPLOAD_EXAMPLES;
const pixels = (n: number, side = 28) => Uint8Array.from({ length: n * side * side }, (_, i) => (i * 7) % 256);
const u8 = (shape: number[], data: Uint8Array): NamedTensor => ({ dtype: 'U8', shape, data });
const i64Labels = (values: number[]): NamedTensor => ({ dtype: 'I64', shape: [values.length], data: new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer) });
const labels = (n: number) => Array.from({ length: n }, (_, i) => i % 10);

const idx = encodeIdx;

test('an image set is accepted as safetensors (torch int64 labels, a channel axis) or as an IDX pair', () => {
  const st = checkImageSafetensors(encodeSafetensors({ images: u8([N, 1, 28, 28], pixels(N)), labels: i64Labels(labels(N)) }));
  assert.deepEqual(st.images.dims, [N, 28, 28]);
  assert.deepEqual([...st.labels.data.subarray(0, 12)], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
  const pair = checkIdxImageUpload(idx([N, 28, 28], pixels(N)), idx([N], Uint8Array.from(labels(N))));
  assert.deepEqual(pair.images.data, st.images.data);
  assert.deepEqual(pair.labels.data, st.labels.data);
});

test('what is wrong with an image set is said', () => {
  const st = (t: Record<string, NamedTensor>) => () => checkImageSafetensors(encodeSafetensors(t));
  const cases: [string, () => unknown, RegExp][] = [
    ['empty', () => checkImageSafetensors(new Uint8Array(0)), /^the file is empty$/],
    ['not safetensors', () => checkImageSafetensors(new TextEncoder().encode('hello, this is text')), /^not a safetensors file: header length \d+ does not fit/],
    ['missing labels', st({ images: u8([N, 28, 28], pixels(N)), targets: u8([N], Uint8Array.from(labels(N))) }), /holds the tensors "images" and "labels"; this file holds "images", "targets"/],
    ['float pixels', st({ images: { dtype: 'F32', shape: [N, 28, 28], data: new Uint8Array(N * 784 * 4) }, labels: u8([N], Uint8Array.from(labels(N))) }), /"images" is F32; store pixels as U8/],
    ['colour', st({ images: u8([N, 3, 28, 28], pixels(N * 3)), labels: u8([N], Uint8Array.from(labels(N))) }), /shape \[200,3,28,28\]; give \[N, 28, 28\] grey images/],
    ['wrong size', st({ images: u8([N, 32, 32], pixels(N, 32)), labels: u8([N], Uint8Array.from(labels(N))) }), /the images are 32×32; the image models take 28×28/],
    ['count mismatch', st({ images: u8([N, 28, 28], pixels(N)), labels: u8([N - 1], Uint8Array.from(labels(N - 1))) }), /200 images but 199 labels/],
    ['too few', st({ images: u8([20, 28, 28], pixels(20)), labels: u8([20], Uint8Array.from(labels(20))) }), /only 20 images; at least 200/],
    ['label out of range', st({ images: u8([N, 28, 28], pixels(N)), labels: i64Labels([...labels(N - 1), 12]) }), /label 12 of image 199 is not a class in 0\.\.9/],
    ['negative label', st({ images: u8([N, 28, 28], pixels(N)), labels: i64Labels([-1, ...labels(N - 1)]) }), /label -1 of image 0/],
    ['IDX still gzip', () => checkIdxImageUpload(Uint8Array.from([0x1f, 0x8b, 8, 0, 0, 0]), idx([N], Uint8Array.from(labels(N)))), /the images file is not IDX: bad IDX magic/],
    [
      'IDX truncated',
      () => checkIdxImageUpload(idx([N, 28, 28], pixels(N)).subarray(0, 5000), idx([N], Uint8Array.from(labels(N)))),
      /the images file is not IDX: IDX data has 4984 bytes, dims \[200,28,28\] need 156800/,
    ],
    ['IDX swapped', () => checkIdxImageUpload(idx([N], Uint8Array.from(labels(N))), idx([N, 28, 28], pixels(N))), /the images file has dimensions \[200\]; give \[N, 28, 28\]/],
  ];
  for (const [name, run, message] of cases) {
    assert.throws(run, (e: unknown) => e instanceof UploadError && message.test(e.message), name);
  }
});

test('every tenth image is held out for validation', () => {
  const { train, validation } = imageSplit(25);
  assert.deepEqual([...validation], [9, 19]);
  assert.equal(train.length, 23);
  assert.ok(!train.includes(9));
});
