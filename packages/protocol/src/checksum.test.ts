import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { checkpointDigest, checkpointDigestAsync, modelDigest, modelDigestAsync } from './checksum';
import { sha256Hex } from './sha256';

test('sha256Hex matches node:crypto at every tail length around the block boundaries, and on a model-sized input', () => {
  for (let n = 0; n <= 200; n++) {
    const data = randomBytes(n);
    assert.equal(sha256Hex(data), createHash('sha256').update(data).digest('hex'), `${n} bytes`);
  }
  const big = randomBytes(203_530 * 4 + 3);
  assert.equal(sha256Hex(big), createHash('sha256').update(big).digest('hex'));
  assert.equal(sha256Hex(new TextEncoder().encode('abc')), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
});

test('modelDigest is the first 128 bits of SHA-256 of the f32 bytes, view offsets respected', () => {
  const backing = new Float32Array(10).map((_, i) => i * 0.5);
  const view = backing.subarray(3, 8);
  assert.equal(modelDigest(view), createHash('sha256').update(new Uint8Array(backing.buffer, 12, 20)).digest('hex').slice(0, 32));
  assert.notEqual(modelDigest(view), modelDigest(backing.subarray(3, 7)));
});

test('modelDigestAsync and checkpointDigestAsync (WebCrypto) give the synchronous digests, read the bytes when called, and take shared memory', async () => {
  const backing = new Float32Array(203_531).map((_, i) => Math.sin(i));
  const view = backing.subarray(1, 203_531);
  assert.equal(await modelDigestAsync(view), modelDigest(view));
  for (let n = 0; n <= 40; n++) assert.equal(await modelDigestAsync(backing.subarray(7, 7 + n)), modelDigest(backing.subarray(7, 7 + n)), `${n} values`);
  // The bytes as they were at the call: the caller may overwrite them at once.
  const before = modelDigest(view);
  const pending = modelDigestAsync(view);
  view.fill(0);
  assert.equal(await pending, before);
  const state = { momentum: new Float32Array([1, 2, 3]), 'adam.v': new Float32Array([0.5]) };
  assert.equal(await checkpointDigestAsync(view, state), checkpointDigest(view, state));
  assert.equal(await checkpointDigestAsync(view), modelDigest(view));
  // WebCrypto refuses views of shared memory (a worker's parameters may live there): the portable code takes them.
  const shared = new Float32Array(new SharedArrayBuffer(64)).fill(1.5);
  assert.equal(await modelDigestAsync(shared), modelDigest(shared));
});
