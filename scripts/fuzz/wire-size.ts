// The guard's size measure (`measureWire`, @tabfleet/protocol wire-size.ts), which every Socket.IO
// event passes before anything parses it, against a reference that serializes: on any wire value
// (binaries at any depth included) it never throws, agrees with the reference wherever the value is
// within its budget, says `over` wherever it is not, and never reads a byte of a binary (each one is
// a Proxy that throws on anything but its byteLength, which may claim up to 64 MiB it does not hold):
// its time follows the JSON it walks, not the size of the binaries in it.
import fc from 'fast-check';
import { eventSizeLimit, isBinary, measureWire, VOLUNTEER_EVENTS, type SizeLimit } from '@tabfleet/protocol';
import { buried, payloadArb, wireValueArb } from './events';
import type { FuzzTarget } from './target';

/** JSON.stringify with each binary written as null; bytes of binary outside the attachment, and of the attachment. */
function reference(v: unknown, limit: SizeLimit): { json: number; binary: number; attachment: number } {
  let binary = 0, attachment = 0;
  const field = limit.attachment?.field;
  const strip = (x: unknown, top: boolean): unknown => {
    if (isBinary(x)) {
      binary += x.byteLength;
      return null;
    }
    if (Array.isArray(x)) return x.map((y) => strip(y, false));
    if (x && typeof x === 'object') {
      return Object.fromEntries(Object.entries(x).map(([k, y]) => {
        if (top && k === field && isBinary(y)) {
          attachment = y.byteLength;
          return [k, null];
        }
        return [k, strip(y, false)];
      }));
    }
    return x;
  };
  const text = JSON.stringify(strip(v, true));
  return { json: text?.length ?? 0, binary, attachment };
}

/** Replaces every binary in `v` with a tripwire: byteLength may be read (and claims `claimed` bytes if given), nothing else. */
function tripwired(v: unknown, claimed: (real: number) => number, reads: { bytes: number }): unknown {
  if (isBinary(v)) {
    const byteLength = claimed(v.byteLength);
    return new Proxy(v, {
      get(target, key) {
        if (key === 'byteLength') return byteLength;
        reads.bytes++;
        throw new Error(`read ${String(key)} of a binary`);
      },
      ownKeys() {
        reads.bytes++;
        throw new Error('listed the bytes of a binary');
      },
    });
  }
  if (Array.isArray(v)) return v.map((y) => tripwired(y, claimed, reads));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, y]) => [k, tripwired(y, claimed, reads)]));
  return v;
}

const eventArb = fc.constantFrom(...Object.keys(VOLUNTEER_EVENTS));
const valueArb = fc.oneof(
  { weight: 3, arbitrary: eventArb.chain((event) => payloadArb(event).map((value) => ({ event, value }))) },
  { weight: 1, arbitrary: fc.tuple(eventArb, wireValueArb).map(([event, value]) => ({ event, value })) },
  // A model attachment buried below its field (the finding's star:update with data: [Buffer]).
  {
    weight: 1,
    arbitrary: fc.tuple(eventArb, fc.array(fc.option(fc.constantFrom('data', 'x', 'y'), { nil: null }), { minLength: 1, maxLength: 20 }))
      .map(([event, path]) => ({ event, value: { jobId: 'job-1', roundId: 1, data: buried(new Uint8Array(8), path) } })),
  },
);
/** Budgets from a few bytes to the real ones, so both sides of every bound are reached. */
const limitArb = fc.oneof(
  eventArb.map((e) => eventSizeLimit(e)),
  fc.record({ bytes: fc.integer({ min: 0, max: 400 }), attachment: fc.option(fc.record({ field: fc.constant('data'), bytes: fc.integer({ min: 0, max: 64 }) }), { nil: undefined }) }),
);
/** Binaries claiming their own length, or up to 64 MiB they do not hold. */
const claimArb = fc.oneof(fc.constant((n: number) => n), fc.integer({ min: 0, max: 64 * 1024 * 1024 }).map((big) => (n: number) => n + big));

function check(value: unknown, limit: SizeLimit, claim: (n: number) => number): void {
  const reads = { bytes: 0 };
  const wired = tripwired(value, claim, reads);
  const got = measureWire(wired, limit);
  if (reads.bytes) throw new Error(`measureWire read binary contents (${reads.bytes} reads)`);
  const want = reference(wired, limit); // binaries by the length they claim
  const within = want.json + want.binary <= limit.bytes && want.attachment <= (limit.attachment?.bytes ?? 0);
  if (within && (got.over || got.json !== want.json || got.binary !== want.binary || got.attachment !== want.attachment)) {
    throw new Error(`within its budget ${JSON.stringify(limit)} but measured ${JSON.stringify(got)}, reference ${JSON.stringify(want)}`);
  }
  if (!within && !got.over) throw new Error(`over its budget ${JSON.stringify(limit)} (reference ${JSON.stringify(want)}) but measured ${JSON.stringify(got)}`);
}

export const WIRE_SIZE_TARGETS: FuzzTarget[] = [{
  decoder: 'event size (guard)',
  name: 'any payload, binaries at any depth: never throws, equals a serializing reference within its budget, over past it, never reads a binary',
  quickRuns: 300,
  open: () => ({
    property: fc.property(valueArb, limitArb, claimArb, ({ value }, limit, claim) => check(value, limit, claim)),
  }),
}];
