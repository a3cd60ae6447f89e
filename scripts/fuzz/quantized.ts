// The block-quantized codec (@tabfleet/protocol quantize.ts): int8 and E2M1 pseudo-gradients with a
// scale per block, as a peer would send them. Decoding either refuses (QuantizeError) or returns
// finite values no larger than their block's scale × the largest code.
import fc from 'fast-check';
import { decodeQuantized, encodeQuantized, QUANT_FORMATS, quantizedBytes, QuantizeError, type QuantFormat } from '@tabfleet/protocol';
import { containerArb, inContainer, mutated } from './bytes';
import { decodeOrRefuse, type FuzzTarget } from './target';

const LARGEST = { int8: 127, e2m1: 6 };
const formatArb = fc.constantFrom(...QUANT_FORMATS);
const blockArb = fc.constantFrom(2, 8, 64, 256);

/** Finite f32 vectors of any magnitude (subnormals and the largest finite included). */
const valuesArb = fc.array(fc.float({ noNaN: true, noDefaultInfinity: true }), { maxLength: 300 }).map((v) => Float32Array.from(v));

function checkDecoded(values: Float32Array, bytes: Uint8Array, format: QuantFormat, block: number): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < values.length; i++) {
    const scale = view.getFloat32(Math.floor(i / block) * 4, true);
    if (!Number.isFinite(values[i])) throw new Error(`value ${i} is ${values[i]}`);
    if (Math.abs(values[i]) > scale * LARGEST[format] * (1 + 1e-6)) throw new Error(`value ${i} = ${values[i]} exceeds scale ${scale} × ${LARGEST[format]}`);
  }
}

export const QUANTIZED_TARGETS: FuzzTarget[] = [
  {
    decoder: 'quantized',
    name: 'finite vectors round-trip within half a step of their block\'s largest code, in every container',
    quickRuns: 300,
    open: () => ({
      property: fc.property(valuesArb, formatArb, blockArb, containerArb, (values, format, block, container) => {
        const bytes = inContainer(encodeQuantized(values, format, block), container);
        const back = decodeQuantized(bytes, values.length, format, block);
        checkDecoded(back, bytes, format, block);
        const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        for (let i = 0; i < values.length; i++) {
          const scale = view.getFloat32(Math.floor(i / block) * 4, true);
          // The coarsest half step: int8's ½, E2M1's 1 (between 4 and 6); plus f32 rounding of the products,
          // and a block below about 127 × f32's least subnormal, which flushes to zero.
          const bound = (format === 'int8' ? 0.5 : 1) * scale * (1 + 1e-5) + Math.abs(values[i]) * 1e-6 + 2e-43;
          if (Math.abs(back[i] - values[i]) > bound) throw new Error(`${format} ${values[i]} → ${back[i]} (scale ${scale})`);
        }
      }),
    }),
  },
  {
    decoder: 'quantized',
    name: 'mutated and random bytes decode to bounded finite values or give a QuantizeError',
    quickRuns: 1500,
    open: () => ({
      property: fc.property(
        fc.oneof(mutated(valuesArb.map((v) => encodeQuantized(v, 'int8', 64))), mutated(valuesArb.map((v) => encodeQuantized(v, 'e2m1', 64))), fc.uint8Array({ maxLength: 400 })),
        formatArb,
        fc.oneof(fc.integer({ min: 0, max: 400 }), fc.constantFrom(-1, 1.5, 2 ** 32)),
        containerArb,
        (b, format, n, container) => {
          const bytes = inContainer(b, container);
          const values = decodeOrRefuse(() => decodeQuantized(bytes, n, format, 64), QuantizeError);
          if (values) {
            if (bytes.byteLength !== quantizedBytes(n, format, 64)) throw new Error('accepted a wrong length');
            checkDecoded(values, bytes, format, 64);
          }
        },
      ),
    }),
  },
];
