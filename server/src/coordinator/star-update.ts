// The check every star update passes on arrival: a whole f32 vector of the round's length, every
// value finite. Screening by norm and the aggregation rules are protocol's robust.ts.
import { ProtocolError } from '@tabfleet/protocol';

/** Reads little-endian f32 bytes; throws `bad_tensor` on a length that is not a whole, matching vector. */
export function decodeUpdate(bytes: Uint8Array, expectedLength: number | null): Float32Array {
  if (bytes.byteLength === 0 || bytes.byteLength % 4 !== 0) throw new ProtocolError('bad_tensor', `update is ${bytes.byteLength} bytes: not a non-empty f32 vector`);
  const length = bytes.byteLength / 4;
  if (expectedLength !== null && length !== expectedLength) throw new ProtocolError('bad_tensor', `update has ${length} values, the round's vectors have ${expectedLength}`);
  const copy = new Float32Array(length);
  new Uint8Array(copy.buffer).set(bytes);
  for (let i = 0; i < length; i++) {
    if (!Number.isFinite(copy[i])) throw new ProtocolError('bad_tensor', `update value ${i} is ${copy[i]}: not finite`);
  }
  return copy;
}
