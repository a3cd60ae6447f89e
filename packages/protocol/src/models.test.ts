import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkpointDigest, modelDigest } from './checksum';
import { ProtocolError } from './events';
import { FIXED_PRESETS, PRESET_FLAT_LENGTHS } from './jobs';
import { PRESET_LAYOUTS, verifyCheckpoint } from './models';
import { encodeSafetensors, f32Tensor, type NamedTensor } from './safetensors';

function checkpointOf(preset: 'cnn-fashion', fill: (name: string, i: number) => number): Record<string, NamedTensor> {
  return Object.fromEntries(PRESET_LAYOUTS[preset].entries.map((p) => [p.name, f32Tensor(p.shape, Float32Array.from({ length: p.size }, (_, i) => fill(p.name, i)))]));
}

const refused = (re: RegExp) => (e: unknown) => e instanceof ProtocolError && e.code === 'bad_tensor' && re.test(e.message);

test('every preset layout has the flat length the protocol states', () => {
  for (const p of FIXED_PRESETS) assert.equal(PRESET_LAYOUTS[p].length, PRESET_FLAT_LENGTHS[p], p);
});

test('a checkpoint of the model reads to its flat parameters (zero padding) and the digest of them and its state', () => {
  const tensors = checkpointOf('cnn-fashion', (_, i) => i * 1e-3);
  const momentum = Float32Array.of(0, 1, 2, 3);
  const { params, digest } = verifyCheckpoint('cnn-fashion', encodeSafetensors({ ...tensors, 'diloco.outer_momentum': f32Tensor([4], momentum) }));
  assert.equal(params.length, PRESET_FLAT_LENGTHS['cnn-fashion']);
  const conv2 = PRESET_LAYOUTS['cnn-fashion'].entries[2];
  assert.equal(params[conv2.offset + 5], Math.fround(5e-3));
  assert.equal(params[conv2.offset - 1], 0, 'padding before an aligned offset is zero');
  assert.equal(digest, checkpointDigest(params, { 'diloco.outer_momentum': momentum }));
  // The state counts: another momentum is another digest; without state the digest is the parameters'.
  assert.notEqual(digest, checkpointDigest(params, { 'diloco.outer_momentum': Float32Array.of(0, 1, 2, 4) }));
  assert.notEqual(digest, modelDigest(params));
  assert.equal(verifyCheckpoint('cnn-fashion', encodeSafetensors(tensors)).digest, modelDigest(params));
});

test('a checkpoint at any byte offset (a pooled Buffer) reads to the same parameters, and the file is left as it was', () => {
  const file = encodeSafetensors({ ...checkpointOf('cnn-fashion', (_, i) => i * 1e-3), 'diloco.outer_momentum': f32Tensor([2], Float32Array.of(4, 5)) });
  const odd = Buffer.concat([Buffer.from([7]), Buffer.from(file)]).subarray(1);
  const before = Buffer.from(odd);
  const aligned = verifyCheckpoint('cnn-fashion', file);
  const unaligned = verifyCheckpoint('cnn-fashion', odd);
  assert.equal(unaligned.digest, aligned.digest);
  assert.deepEqual(unaligned.params, aligned.params);
  assert.ok(before.equals(odd));
  const nan = new Float32Array(PRESET_LAYOUTS['cnn-fashion'].entries[0].size).fill(0.5);
  nan[7] = Number.NaN;
  const withNan = encodeSafetensors({
    ...checkpointOf('cnn-fashion', () => 0),
    'conv1.weight': f32Tensor(PRESET_LAYOUTS['cnn-fashion'].entries[0].shape, nan),
  });
  const bad = Buffer.concat([Buffer.from([7]), Buffer.from(withNan)]).subarray(1);
  assert.throws(() => verifyCheckpoint('cnn-fashion', bad), refused(/conv1.weight has a non-finite value at 7/));
});

test('a checkpoint that is not the job model is refused with the reason', () => {
  const good = checkpointOf('cnn-fashion', () => 0.5);
  // The reproduced attack: one tensor evil.weight = [1e30, -1e30].
  assert.throws(() => verifyCheckpoint('cnn-fashion', encodeSafetensors({ 'evil.weight': f32Tensor([2], Float32Array.of(1e30, -1e30)) })), refused(/lacks conv1.weight/));
  assert.throws(() => verifyCheckpoint('mlp-fashion', encodeSafetensors(good)), refused(/lacks layers.0.weight/));
  assert.throws(() => verifyCheckpoint('cnn-fashion', encodeSafetensors({ ...good, 'fc2.bias': f32Tensor([11], new Float32Array(11)) })), refused(/fc2.bias is F32\[11\]/));
  assert.throws(() => verifyCheckpoint('cnn-fashion', encodeSafetensors({ ...good, 'evil.weight': f32Tensor([1], new Float32Array(1)) })), refused(/not a parameter/));
  assert.throws(() => verifyCheckpoint('cnn-fashion', encodeSafetensors({ ...good, 'diloco.outer_momentum': f32Tensor([1e6], new Float32Array(1e6)) })), refused(/at most/));
  const nan = checkpointOf('cnn-fashion', (name, i) => (name === 'fc1.bias' && i === 3 ? NaN : 0));
  assert.throws(() => verifyCheckpoint('cnn-fashion', encodeSafetensors(nan)), refused(/fc1.bias has a non-finite value at 3/));
  assert.throws(() => verifyCheckpoint('cnn-fashion', new Uint8Array([1, 2, 3])), refused(/not valid safetensors/));
});
