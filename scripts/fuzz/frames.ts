// Binary ring frames (@tabfleet/protocol frames.ts): what a ring neighbour's data channel delivers.
import fc from 'fast-check';
import {
  decodeFrame, encodeFrame, FrameDType, FrameError, FrameKind, FRAME_DTYPE_BYTES, FRAME_HEADER_BYTES, MAX_FRAME_BYTES, MAX_FRAME_PAYLOAD, maxChunkElements,
  type Frame, type FrameDTypeName, type FrameHeader, type FrameKindName,
} from '@tabfleet/protocol';
import { containerArb, inContainer, mutated, seededBytes } from './bytes';
import { decodeOrRefuse, type FuzzTarget } from './target';

const u32 = fc.nat({ max: 0xffffffff });
const u16 = fc.nat({ max: 0xffff });

export const headerArb: fc.Arbitrary<FrameHeader> = fc.record({
  kind: fc.constantFrom(...(Object.keys(FrameKind) as FrameKindName[])),
  dtype: fc.constantFrom(...(Object.keys(FrameDType) as FrameDTypeName[])),
  flags: fc.constantFrom(0, 1),
  job: u32,
  round: u32,
  op: u32,
  step: u16,
  segment: u16,
  chunk: u32,
});

/** A valid frame: mostly small payloads, sometimes a full one. */
export const validFrameArb = fc
  .tuple(headerArb, fc.oneof(fc.nat(64), fc.nat(MAX_FRAME_PAYLOAD), fc.constant(Infinity)), fc.integer())
  .map(([h, n, seed]) => {
    const elements = Math.min(Math.floor(n / FRAME_DTYPE_BYTES[h.dtype]), maxChunkElements(h.dtype));
    return { header: h, payload: seededBytes(elements * FRAME_DTYPE_BYTES[h.dtype], seed) };
  });

/** Byte offsets of the frame's length-like fields: chunk and payload length. */
const FRAME_FIELDS = [20, 24];

/** What a decoded frame must satisfy, whatever the input: it describes exactly the bytes it came from. */
export function checkDecodedFrame(f: Frame, bytes: Uint8Array): void {
  if (f.payload.byteLength !== bytes.byteLength - FRAME_HEADER_BYTES) throw new Error(`payload of ${f.payload.byteLength} bytes from a ${bytes.byteLength}-byte frame`);
  if (bytes.byteLength > MAX_FRAME_BYTES) throw new Error(`accepted a ${bytes.byteLength}-byte frame`);
  if (f.payload.byteLength % FRAME_DTYPE_BYTES[f.dtype] !== 0) throw new Error('payload is not whole elements');
  if (f.flags & ~1) throw new Error(`flags ${f.flags}`);
  // Decoding loses nothing: encoding the frame again gives the same bytes.
  const again = encodeFrame(f, f.payload);
  if (Buffer.compare(again, bytes) !== 0) throw new Error('re-encoding the decoded frame gives other bytes');
}

const decode = (b: Uint8Array) => decodeOrRefuse(() => decodeFrame(b), FrameError);

export const FRAME_TARGETS: FuzzTarget[] = [
  {
    decoder: 'frames',
    name: 'valid frames round-trip (encode ∘ decode = id) in every container',
    quickRuns: 300,
    open: () => ({
      property: fc.property(validFrameArb, containerArb, ({ header, payload }, c) => {
        const bytes = inContainer(encodeFrame(header, payload), c);
        const f = decodeFrame(bytes);
        const { payload: got, ...h } = f;
        if (JSON.stringify(h) !== JSON.stringify({
          kind: header.kind, dtype: header.dtype, flags: header.flags, job: header.job, round: header.round,
          op: header.op, step: header.step, segment: header.segment, chunk: header.chunk,
        })) {
          throw new Error(`header ${JSON.stringify(h)} != ${JSON.stringify(header)}`);
        }
        if (Buffer.compare(got, payload) !== 0) throw new Error('payload differs');
      }),
    }),
  },
  {
    decoder: 'frames',
    name: 'mutated frames (bit flips, truncation, junk, length fields) decode to themselves or a FrameError',
    quickRuns: 1500,
    open: () => ({
      property: fc.property(mutated(validFrameArb.map(({ header, payload }) => encodeFrame(header, payload)), FRAME_FIELDS), containerArb, (b, c) => {
        const bytes = inContainer(b, c);
        const f = decode(bytes);
        if (f) checkDecodedFrame(f, bytes);
      }),
    }),
  },
  {
    decoder: 'frames',
    name: 'random bytes decode to themselves or a FrameError',
    quickRuns: 1000,
    open: () => ({
      property: fc.property(fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.tuple(fc.nat(MAX_FRAME_BYTES + 64), fc.integer()).map(([n, s]) => seededBytes(n, s))), containerArb, (b, c) => {
        const bytes = inContainer(b, c);
        const f = decode(bytes);
        if (f) checkDecodedFrame(f, bytes);
      }),
    }),
  },
];
