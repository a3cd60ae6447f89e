import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeSafetensors, encodeSafetensors, f32Tensor, f32Values, SafetensorsError } from './safetensors';

test('safetensors round-trips tensors and metadata with an 8-byte aligned data section', () => {
  const a = Float32Array.from([1, -2.5, 3e-8, Infinity]);
  const b = Float32Array.from({ length: 6 }, (_, i) => i);
  const bytes = encodeSafetensors({ 'layer.weight': f32Tensor([2, 2], a), bias: f32Tensor([6], b) }, { model: 'mlp' });
  const headerLen = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal(headerLen % 8, 0);
  const d = decodeSafetensors(bytes);
  assert.deepEqual(d.metadata, { model: 'mlp' });
  assert.deepEqual(d.tensors['layer.weight'].shape, [2, 2]);
  assert.deepEqual([...f32Values(d.tensors['layer.weight'])], [...a]);
  assert.deepEqual([...f32Values(d.tensors.bias)], [...b]);
});

const good = encodeSafetensors({ w: f32Tensor([2], Float32Array.from([1, 2])) });
function withHeader(json: string, data = new Uint8Array(8)): Uint8Array {
  const h = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
}

const malformed: [string, Uint8Array, RegExp][] = [
  ['empty file', new Uint8Array(0), /shorter/],
  ['header length past the end', good.slice(0, 12), /does not fit/],
  ['header not JSON', withHeader('{nope'), /not valid JSON/],
  ['header is an array', withHeader('[1,2]'), /not a JSON object/],
  ['unknown dtype', withHeader('{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}'), /unsupported dtype/],
  // Found by the fuzzer: naming the dtype with String() threw a TypeError for this one.
  ['a dtype with no string form', withHeader('{"toString":{"dtype":{"toString":0}}}'), /toString: unsupported dtype \{"toString":0\}/],
  ['negative shape', withHeader('{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}'), /bad shape/],
  ['offsets past the data', withHeader('{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'), /out of range/],
  ['size does not match shape', withHeader('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}'), /does not match/],
];
for (const [name, bytes, err] of malformed) {
  test(`safetensors rejects ${name}`, () => {
    assert.throws(() => decodeSafetensors(bytes), (e: Error) => e instanceof SafetensorsError && err.test(e.message));
  });
}

test('decoding a Node Buffer from a shared pool copies each tensor (a Buffer slice would be a view)', () => {
  const values = new Float32Array([1.5, -2, 3.25]);
  const file = encodeSafetensors({ w: f32Tensor([3], values) });
  // Small Buffers live at odd offsets inside one shared ArrayBuffer, as socket.io hands them over.
  const pooled = Buffer.concat([Buffer.from([7]), Buffer.from(file)]).subarray(1);
  const decoded = decodeSafetensors(pooled);
  assert.equal(decoded.tensors.w.data.byteOffset, 0);
  assert.deepEqual([...f32Values(decoded.tensors.w)], [...values]);
});

test('decoding with views hands out each tensor as a view into the file, checked as strictly', () => {
  const file = encodeSafetensors({ a: f32Tensor([2], Float32Array.of(1, 2)), b: f32Tensor([1], Float32Array.of(3)) });
  const decoded = decodeSafetensors(file, { views: true });
  assert.equal(decoded.tensors.b.data.buffer, file.buffer, 'no copy');
  assert.deepEqual([...f32Values(decoded.tensors.b)], [3]);
  const cut = file.subarray(0, file.byteLength - 4);
  assert.throws(() => decodeSafetensors(cut, { views: true }), /data_offsets out of range/);
});
