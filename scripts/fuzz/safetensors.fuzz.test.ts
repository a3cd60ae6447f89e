import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeSafetensors, SafetensorsError } from '@tabfleet/protocol';
import { SAFETENSORS_TARGETS } from './safetensors';
import { assertTarget } from './target';

for (const t of SAFETENSORS_TARGETS) test(`fuzz safetensors: ${t.name}`, () => assertTarget(t));

function file(header: string, dataBytes: number): Uint8Array {
  const h = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + h.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8);
  return out;
}
const refused = (re: RegExp) => (e: Error) => e instanceof SafetensorsError && re.test(e.message);

// Counterexamples the properties found in the old decoder, each kept as a case.
test('tensors whose byte ranges overlap are refused: 1,000 names over the same 8 bytes decoded into 8,000', () => {
  const header = `{${Array.from({ length: 1000 }, (_, i) => `"t${i}":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}`).join(',')}}`;
  assert.throws(() => decodeSafetensors(file(header, 8)), refused(/overlap/));
});

test('a data section with a hole or trailing bytes is refused (the format indexes every byte)', () => {
  assert.throws(() => decodeSafetensors(file('{"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', 4)), refused(/hole at 0/));
  assert.throws(() => decodeSafetensors(file('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', 4)), refused(/cover 2 of the 4/));
});

test('__metadata__ must map strings to strings', () => {
  assert.throws(() => decodeSafetensors(file('{"__metadata__":5}', 0)), refused(/not a JSON object/));
  assert.throws(() => decodeSafetensors(file('{"__metadata__":{"a":{"b":1}}}', 0)), refused(/__metadata__\.a is not a string/));
});

test('a tensor named __proto__ is refused instead of replacing the prototype of the tensors object', () => {
  assert.throws(() => decodeSafetensors(file('{"__proto__":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8)), refused(/__proto__/));
});

test('dtype must be one of the names themselves, not an array or an inherited property', () => {
  assert.throws(() => decodeSafetensors(file('{"w":{"dtype":["F32"],"shape":[2],"data_offsets":[0,8]}}', 8)), refused(/unsupported dtype/));
  assert.throws(() => decodeSafetensors(file('{"w":{"dtype":"toString","shape":[2],"data_offsets":[0,8]}}', 8)), refused(/unsupported dtype/));
});
