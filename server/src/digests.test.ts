import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { modelDigest, portableSha256Hex } from '@tabfleet/protocol';
import { useNodeSha256 } from './digests';

test('with node:crypto\'s SHA-256 the model digests are the portable ones, around the block boundaries and model-sized', () => {
  useNodeSha256();
  for (const floats of [0, 1, 13, 14, 15, 16, 17, 32, 1000, 203_612]) {
    const values = new Float32Array(randomBytes(floats * 4).buffer);
    assert.equal(modelDigest(values), portableSha256Hex(new Uint8Array(values.buffer)).slice(0, 32), `${floats} floats`);
  }
});
