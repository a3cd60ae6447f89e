import { test } from 'node:test';
import assert from 'node:assert/strict';
import { modelDigest } from './checksum';
import { portableSha256Hex, sha256Hex, useNativeSha256 } from './sha256';

test('useNativeSha256 routes sha256Hex (and so modelDigest) to the runtime\'s implementation; null restores the portable one', () => {
  const bytes = new Uint8Array([1, 2, 3, 4]);
  const values = new Float32Array([0.5, -1, 2]);
  const portable = portableSha256Hex(bytes);
  const calls: number[] = [];
  useNativeSha256((data) => {
    calls.push(data.byteLength);
    return 'ab'.repeat(32);
  });
  try {
    assert.equal(sha256Hex(bytes), 'ab'.repeat(32));
    assert.equal(modelDigest(values), 'ab'.repeat(16));
    assert.deepEqual(calls, [4, 12]);
  } finally {
    useNativeSha256(null);
  }
  assert.equal(sha256Hex(bytes), portable);
  assert.equal(portable, '9f64a747e1b97f131fabb6b447296c9b6f0201e79fb3c5356e6c77e89b6a806a');
});
