// safetensors decode (@tabfleet/protocol safetensors.ts): checkpoints a volunteer uploads and the
// model files a joiner loads.
import fc from 'fast-check';
import { decodeSafetensors, encodeSafetensors, SafetensorsError, type DecodedSafetensors, type NamedTensor, type SafetensorsDType } from '@tabfleet/protocol';
import { containerArb, inContainer, mutated, seededBytes } from './bytes';
import { decodeOrRefuse, type FuzzTarget } from './target';

const DTYPES: Record<SafetensorsDType, number> = { F32: 4, F16: 2, I32: 4, I64: 8, U8: 1 };
const nameArb = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }).filter((s) => s !== '__metadata__' && s !== '__proto__');

const tensorArb: fc.Arbitrary<NamedTensor> = fc
  .record({ dtype: fc.constantFrom(...(Object.keys(DTYPES) as SafetensorsDType[])), shape: fc.array(fc.nat(6), { maxLength: 3 }), seed: fc.integer() })
  .map(({ dtype, shape, seed }) => ({ dtype, shape, data: seededBytes(shape.reduce((a, d) => a * d, 1) * DTYPES[dtype], seed) }));

export const fileArb = fc.record({
  tensors: fc.dictionary(nameArb, tensorArb, { maxKeys: 5 }),
  metadata: fc.dictionary(nameArb, fc.string({ unit: 'grapheme', maxLength: 16 }), { maxKeys: 3 }),
});

/** Headers built from parts that are each nearly right: offsets that overlap or leave holes, odd dtypes, junk metadata. */
const junkHeaderArb = fc
  .record({
    entries: fc.array(
      fc.tuple(
        fc.oneof(nameArb, fc.constantFrom('__proto__', '__metadata__', 'constructor', 'toString')),
        fc.oneof(
          fc.record({
            dtype: fc.oneof(fc.constantFrom('F32', 'F16', 'I32', 'U8', 'F64', 'toString', 'constructor'), fc.constant(['F32']), fc.jsonValue()),
            shape: fc.oneof(fc.array(fc.nat(8), { maxLength: 3 }), fc.array(fc.integer({ min: -2, max: 2 ** 31 })), fc.jsonValue()),
            data_offsets: fc.oneof(fc.tuple(fc.nat(40), fc.nat(40)), fc.array(fc.integer({ min: -1, max: 2 ** 53 }), { maxLength: 3 }), fc.jsonValue()),
          }, { requiredKeys: [] }),
          fc.dictionary(fc.string(), fc.oneof(fc.string(), fc.jsonValue()), { maxKeys: 3 }),
          fc.jsonValue(),
        ),
      ),
      { maxLength: 6 },
    ),
    dataBytes: fc.nat(48),
  })
  .map(({ entries, dataBytes }) => {
    const json = `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`).join(',')}}`;
    const h = new TextEncoder().encode(json);
    const out = new Uint8Array(8 + h.length + dataBytes);
    new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
    out.set(h, 8);
    return out;
  });

/** What a decoded file must satisfy: typed entries, sizes that match shapes, and no more bytes than the input holds. */
export function checkDecodedFile(d: DecodedSafetensors, bytes: Uint8Array): void {
  if (Object.getPrototypeOf(d.tensors) !== Object.prototype) throw new Error('tensors object has another prototype');
  let total = 0;
  for (const [name, t] of Object.entries(d.tensors)) {
    if (typeof t.dtype !== 'string' || !Object.hasOwn(DTYPES, t.dtype)) throw new Error(`${name}: dtype ${JSON.stringify(t.dtype)}`);
    if (!Array.isArray(t.shape) || !t.shape.every((x) => Number.isInteger(x) && x >= 0)) throw new Error(`${name}: shape ${JSON.stringify(t.shape)}`);
    if (t.data.byteLength !== t.shape.reduce((a, x) => a * x, 1) * DTYPES[t.dtype]) throw new Error(`${name}: ${t.data.byteLength} bytes for ${t.dtype}[${t.shape}]`);
    total += t.data.byteLength;
  }
  // The allocation bound: tensors never hold more bytes than the file's data section.
  const dataLen = bytes.byteLength - 8 - Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  if (total > dataLen) throw new Error(`decoded ${total} tensor bytes from a ${dataLen}-byte data section`);
  if (!d.metadata || typeof d.metadata !== 'object' || !Object.values(d.metadata).every((v) => typeof v === 'string')) throw new Error(`metadata ${JSON.stringify(d.metadata)}`);
}

const decode = (b: Uint8Array) => decodeOrRefuse(() => decodeSafetensors(b), SafetensorsError);

/** Any bytes from `arb`, in any container: a SafetensorsError, or a file within the input's bounds. */
const decodesWithinBounds = (arb: fc.Arbitrary<Uint8Array>) =>
  fc.property(arb, containerArb, (b, c) => {
    const bytes = inContainer(b, c);
    const d = decode(bytes);
    if (d) checkDecodedFile(d, bytes);
  });

export const SAFETENSORS_TARGETS: FuzzTarget[] = [
  {
    decoder: 'safetensors',
    name: 'valid files round-trip (tensors, shapes, bytes and metadata) in every container',
    quickRuns: 300,
    open: () => ({
      property: fc.property(fileArb, containerArb, ({ tensors, metadata }, c) => {
        const d = decodeSafetensors(inContainer(encodeSafetensors(tensors, metadata), c));
        if (JSON.stringify(d.metadata) !== JSON.stringify(metadata)) throw new Error('metadata differs');
        if (JSON.stringify(Object.keys(d.tensors)) !== JSON.stringify(Object.keys(tensors))) throw new Error('tensor names differ');
        for (const [name, t] of Object.entries(tensors)) {
          const g = d.tensors[name];
          if (g.dtype !== t.dtype || JSON.stringify(g.shape) !== JSON.stringify(t.shape) || Buffer.compare(g.data, t.data) !== 0) throw new Error(`${name} differs`);
        }
      }),
    }),
  },
  {
    decoder: 'safetensors',
    name: 'mutated files (header length, JSON bytes, data) decode within bounds or give a SafetensorsError',
    quickRuns: 1200,
    open: () => ({
      property: decodesWithinBounds(mutated(fileArb.map(({ tensors, metadata }) => encodeSafetensors(tensors, metadata)), [0, 4])),
    }),
  },
  {
    decoder: 'safetensors',
    name: 'headers of near-valid entries (overlaps, holes, odd dtypes, __proto__, junk metadata) decode within bounds or give a SafetensorsError',
    quickRuns: 1200,
    open: () => ({
      property: decodesWithinBounds(junkHeaderArb),
    }),
  },
  {
    decoder: 'safetensors',
    name: 'random bytes give a SafetensorsError or a valid file',
    quickRuns: 500,
    open: () => ({
      property: decodesWithinBounds(fc.uint8Array({ maxLength: 200 })),
    }),
  },
];
