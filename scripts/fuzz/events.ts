// Every Socket.IO event schema a volunteer or dashboard reaches (@tabfleet/protocol events.ts): the
// handshakes and each event's payload, as Socket.IO delivers them (JSON values, binary attachments as
// Node Buffers, at any depth).
import fc from 'fast-check';
import { DASHBOARD_EVENTS, dashboardAuthSchema, parseEvent, ProtocolError, VOLUNTEER_EVENTS, volunteerAuthSchema } from '@tabfleet/protocol';
import { decodeOrRefuse, type FuzzTarget } from './target';

const bin = (n: number) => Buffer.alloc(n, 7);
/** One valid payload per schema: the seed that mutations start from, and proof each schema accepts something. */
export const VALID_SAMPLES: Record<string, unknown> = {
  'auth:volunteer': {
    protocol: 1,
    capabilities: { backend: 'webgpu', adapter: { vendor: 'v', isCpu: true }, limits: { maxStorageBufferBindingSize: 1 << 27, maxBufferSize: 1 << 28 }, features: ['shader-f16'] },
    clientId: 'abcdefghijklmnop',
    displayName: 'Ada L.',
  },
  'auth:dashboard': { protocol: 1, token: 'secret' },
  'work:request': { jobId: 'job-1' },
  'model:loaded': { jobId: 'job-1', seq: 0, checksum: 'deadbeef' },
  'round:ready': { jobId: 'job-1', seq: 1, step: 4 },
  'round:result': { jobId: 'job-1', roundId: 1, checksum: '0123456789abcdef', step: 4, metrics: { loss: 0.5, samples: 64, wallMs: 12.5, bytesSent: 10, bytesReceived: 10 } },
  'round:failed': { jobId: 'job-1', roundId: 2, code: 'peer_lost', message: 'gone' },
  signal: { jobId: 'job-1', roundId: 1, to: 'v-2', data: { type: 'offer', sdp: 'v=0' } },
  'peers:rtt': { jobId: 'job-1', rttMs: { 'v-2': 12.5, 'v-3': 80 } },
  'links:paths': { jobId: 'job-1', links: [{ peer: 'v-2', local: 'relay', remote: 'srflx', relayProtocol: 'tcp', rttMs: 40.5 }, { peer: 'v-3', local: 'host', remote: 'host', rttMs: null }] },
  'star:update': { jobId: 'job-1', roundId: 1, data: bin(16) },
  'round:validation': { jobId: 'job-1', roundId: 1, parts: [{ part: 0, received: ['0123456789abcdef0123456789abcdef'], aggregate: '', refused: [{ member: 'v-2', reason: 'value 3 is NaN' }] }] },
  'evidence:upload': { jobId: 'job-1', roundId: 1, part: 1, data: bin(16) },
  'replica:upload': { jobId: 'job-1', unitId: 'unit-3-42', data: bin(16) },
  'checkpoint:upload': { jobId: 'job-1', seq: 3, step: 6, data: bin(24) },
  metrics: { jobId: 'job-1', seq: 3, checksum: '0123456789abcdef', accuracy: 0.8, loss: 0.4 },
  status: { state: 'training', step: 3, samplesPerSec: 120.5, bytesSent: 0, bytesReceived: 0 },
  profile: { displayName: null },
  leave: { reason: 'pagehide' },
  subscribe: { jobId: 'job-1' },
  unsubscribe: {},
};

export const SCHEMAS: Record<string, Parameters<typeof parseEvent>[0]> = {
  'auth:volunteer': volunteerAuthSchema,
  'auth:dashboard': dashboardAuthSchema,
  ...VOLUNTEER_EVENTS,
  ...DASHBOARD_EVENTS,
};

/** Strings near the formats the schemas check: ids, hex, enums, unicode, long. */
const stringArb = fc.oneof(
  fc.string(),
  fc.constantFrom(
    '', 'job-1', 'v-2', 'deadbeef', 'DEADBEEF', '0123456789abcdef0', 'webgpu', 'cpu', 'training', 'peer_lost',
    'a'.repeat(65), 'a'.repeat(300), '__proto__', 'constructor', '\u0000', 'Ada\u202e', '<b>x</b>',
  ),
  fc.string({ unit: 'grapheme', maxLength: 50 }),
);
/** Numbers near the bounds: negatives, fractions, huge, beyond safe integers (JSON has no NaN or ∞). */
const numberArb = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 1, -1, 0.5, 1.0000001, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, 1e308, -1e308, 5e-324),
);
export const binaryArb: fc.Arbitrary<ArrayBufferView | ArrayBuffer> = fc.oneof(
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
  fc.uint8Array({ maxLength: 64 }),
  fc.uint8Array({ maxLength: 64 }).map((b) => b.slice().buffer),
  fc.float32Array({ maxLength: 16 }),
  fc.uint8Array({ maxLength: 64 }).map((b) => new DataView(b.buffer)),
);
/** `value` buried `depth` levels down in arrays and objects with keys from `keys`. */
export function buried(value: unknown, path: (string | null)[]): unknown {
  return path.reduceRight<unknown>((inner, key) => (key === null ? [inner] : { [key]: inner }), value);
}
const pathArb = fc.array(fc.option(fc.constantFrom('x', 'y', 'data', 'candidate', 'sdp', '__proto__', 'jobId'), { nil: null }), { minLength: 1, maxLength: 40 });
/** A binary value nested 1 to 40 levels deep: what the guard once stringified a number per byte. */
export const deepBinaryArb: fc.Arbitrary<unknown> = fc.tuple(binaryArb, pathArb).map(([b, path]) => buried(b, path));
/** What one field of a Socket.IO payload can be. */
export const wireValueArb: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    stringArb, numberArb, fc.boolean(), fc.constant(null), binaryArb, deepBinaryArb, fc.array(tie('value'), { maxLength: 4 }), fc.dictionary(stringArb, tie('value'), { maxKeys: 4 }),
  ),
})).value;

type Edit =
  | { kind: 'delete'; key: number }
  | { kind: 'replace'; key: number; value: unknown }
  | { kind: 'add'; key: string; value: unknown }
  | { kind: 'nested'; key: number; inner: number; value: unknown };

const editArb: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ kind: fc.constant('delete' as const), key: fc.nat() }),
  fc.record({ kind: fc.constant('replace' as const), key: fc.nat(), value: wireValueArb }),
  fc.record({ kind: fc.constant('add' as const), key: stringArb, value: wireValueArb }),
  fc.record({ kind: fc.constant('nested' as const), key: fc.nat(), inner: fc.nat(), value: wireValueArb }),
);

function applyEdit(o: Record<string, unknown>, e: Edit): Record<string, unknown> {
  const out = { ...o };
  const keys = Object.keys(out);
  const k = keys.length ? keys[(e as { key: number }).key % keys.length] : undefined;
  if (e.kind === 'add') Object.defineProperty(out, e.key, { value: e.value, enumerable: true, writable: true, configurable: true });
  else if (k === undefined) return out;
  else if (e.kind === 'delete') delete out[k];
  else if (e.kind === 'replace') out[k] = e.value;
  else {
    const inner = out[k];
    if (inner && typeof inner === 'object' && !ArrayBuffer.isView(inner) && !(inner instanceof ArrayBuffer)) {
      out[k] = applyEdit(inner as Record<string, unknown>, { kind: 'replace', key: e.inner, value: e.value });
    }
  }
  return out;
}

/** A payload for `event`: its valid sample with a few edits, or any wire value. */
export function payloadArb(event: string): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.array(editArb, { minLength: 1, maxLength: 3 }).map((es) => es.reduce(applyEdit, VALID_SAMPLES[event] as Record<string, unknown>)) },
    { weight: 1, arbitrary: wireValueArb },
  );
}

const parse = (event: string, v: unknown) => decodeOrRefuse(() => parseEvent(SCHEMAS[event], v, event), ProtocolError);

export const EVENT_TARGETS: FuzzTarget[] = Object.keys(SCHEMAS).map((event) => ({
  decoder: 'events',
  name: `${event}: edited or random payloads parse to a value that parses again to itself, or a bad_request ProtocolError`,
  quickRuns: 200,
  open: () => ({
    property: fc.property(payloadArb(event), (v) => {
      let out: unknown;
      try {
        out = parseEvent(SCHEMAS[event], v, event);
      } catch (e) {
        if (e instanceof ProtocolError && e.code === 'bad_request') return;
        throw e;
      }
      // A parsed payload is in normal form: parsing it again accepts it unchanged.
      const again = parse(event, out);
      if (again === undefined) throw new Error(`parsed payload ${JSON.stringify(out)} is refused when parsed again`);
      if (!sameValue(again, out)) throw new Error(`parsing ${JSON.stringify(out)} again gives ${JSON.stringify(again)}`);
    }),
  }),
}));

function sameValue(a: unknown, b: unknown): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.compare(a, b) === 0;
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
  }
  return Object.is(a, b);
}
