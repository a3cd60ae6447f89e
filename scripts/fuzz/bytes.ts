// Byte-level generators shared by the decoders' properties: mutations of valid encodings (bit flips,
// truncations, appended junk, overwritten bytes and length fields) and the containers a decoder
// receives bytes in (a plain array, a view at an offset, a Node Buffer from the shared pool).
import fc from 'fast-check';
import { mulberry32 } from '@tabfleet/protocol';

export type Mutation =
  | { kind: 'flip'; at: number; bit: number }
  | { kind: 'set'; at: number; value: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'append'; bytes: Uint8Array }
  | { kind: 'splice'; at: number; remove: number; insert: Uint8Array }
  | { kind: 'u32'; field: number; value: number };

/** u32 values that break length fields: 0, off by one, sign bit, all ones, anything. */
export const nastyU32 = fc.oneof(
  fc.constantFrom(0, 1, 2, 3, 4, 0x7f, 0x80, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff),
  fc.nat({ max: 0xffffffff }),
  fc.nat({ max: 70_000 }),
);

/** Mutations; `u32` ones overwrite one of `fields` (byte offsets of the format's length fields). */
export function mutationArb(fields: number[]): fc.Arbitrary<Mutation> {
  const arbs: fc.Arbitrary<Mutation>[] = [
    fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.nat(7) }),
    fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: fc.nat(255) }),
    fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
    fc.record({ kind: fc.constant('append' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
    fc.record({ kind: fc.constant('splice' as const), at: fc.nat(), remove: fc.nat(8), insert: fc.uint8Array({ maxLength: 8 }) }),
  ];
  if (fields.length) arbs.push(fc.record({ kind: fc.constant('u32' as const), field: fc.constantFrom(...fields), value: nastyU32 }));
  return fc.oneof(...arbs);
}

export function applyMutation(b: Uint8Array, m: Mutation): Uint8Array {
  const at = (n: number) => (b.length === 0 ? 0 : n % b.length);
  switch (m.kind) {
    case 'flip': {
      if (b.length === 0) return b;
      const out = b.slice();
      out[at(m.at)] ^= 1 << m.bit;
      return out;
    }
    case 'set': {
      if (b.length === 0) return b;
      const out = b.slice();
      out[at(m.at)] = m.value;
      return out;
    }
    case 'truncate':
      return b.slice(0, m.at % (b.length + 1));
    case 'append': {
      const out = new Uint8Array(b.length + m.bytes.length);
      out.set(b);
      out.set(m.bytes, b.length);
      return out;
    }
    case 'splice': {
      const p = at(m.at);
      return Uint8Array.from([...b.subarray(0, p), ...m.insert, ...b.subarray(Math.min(b.length, p + m.remove))]);
    }
    case 'u32': {
      if (m.field + 4 > b.length) return b;
      const out = b.slice();
      new DataView(out.buffer).setUint32(m.field, m.value, true);
      return out;
    }
  }
}

/** A valid encoding with one to four mutations applied. */
export function mutated(valid: fc.Arbitrary<Uint8Array>, fields: number[] = []): fc.Arbitrary<Uint8Array> {
  return fc.tuple(valid, fc.array(mutationArb(fields), { minLength: 1, maxLength: 4 })).map(([b, ms]) => ms.reduce(applyMutation, b));
}

/** Bytes from a seed: cheap for large payloads (fc.uint8Array of 64 KiB would dominate the run). */
export function seededBytes(n: number, seed: number): Uint8Array {
  const rng = mulberry32(seed);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (rng() * 256) | 0;
  return out;
}

export type Container = 'plain' | 'offset' | 'buffer' | 'pooled';
export const containerArb: fc.Arbitrary<Container> = fc.constantFrom('plain', 'offset', 'buffer', 'pooled');

/**
 * The same bytes as a decoder may receive them: a plain Uint8Array, a view at an odd offset into a
 * larger buffer, a Node Buffer over the whole message (what simple-peer delivers), or a small Buffer
 * from Node's shared allocation pool.
 */
export function inContainer(b: Uint8Array, c: Container): Uint8Array {
  switch (c) {
    case 'plain':
      return b;
    case 'offset': {
      const big = new Uint8Array(b.length + 7).fill(0xa5);
      big.set(b, 3);
      return big.subarray(3, 3 + b.length);
    }
    case 'buffer':
      return Buffer.from(b.slice().buffer);
    case 'pooled':
      return Buffer.from(b);
  }
}
