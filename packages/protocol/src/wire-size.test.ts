import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { ATTACHMENT_FIELDS, binaryAttachmentSchema, DASHBOARD_EVENTS, eventSizeLimit, VOLUNTEER_EVENTS } from './events';
import { LIMITS } from './limits';
import { isBinary, measureWire } from './wire-size';

/** The reference: JSON.stringify with every binary written as null, and the binaries' bytes summed. */
function reference(v: unknown): { json: number; binary: number } {
  let binary = 0;
  const strip = (x: unknown): unknown => {
    if (isBinary(x)) {
      binary += x.byteLength;
      return null;
    }
    if (Array.isArray(x)) return x.map(strip);
    if (x && typeof x === 'object') return Object.fromEntries(Object.entries(x).map(([k, y]) => [k, strip(y)]));
    return x;
  };
  return { json: JSON.stringify(strip(v))?.length ?? 0, binary };
}

const UNLIMITED = { bytes: Number.MAX_SAFE_INTEGER };

test('JSON text is counted as JSON.stringify writes it, binary by its bytes at any depth', () => {
  const samples: unknown[] = [
    null, true, false, 0, -0, 1.5, -1e-7, 1e21, 2 ** 53 + 2, '', 'plain', 'quote " and \\ and \n and \u0001', 'lone \ud800 surrogate, pair \ud83d\ude00', 'é€',
    [], {}, [1, [2, [3, []]]], { a: 1, 'k"ey': [null, 'x'], nested: { deeper: { deepest: {} } } },
    [undefined, () => 1], { skipped: undefined, fn: () => 1, kept: 1 },
    { x: { y: Buffer.alloc(1000, 255) } }, [new Float32Array(10), new DataView(new ArrayBuffer(7)), new ArrayBuffer(3), new Uint8Array(5)],
    { data: [Buffer.alloc(17)], jobId: 'job-1' },
  ];
  for (const v of samples) {
    const m = measureWire(v, UNLIMITED);
    assert.equal(m.over, false, JSON.stringify(v));
    assert.deepEqual({ json: m.json, binary: m.binary }, reference(v), `${JSON.stringify(v)}`);
  }
});

test('a budget passed anywhere is noticed, binary included; the attachment has its own', () => {
  const limit = { bytes: 100, attachment: { field: 'data', bytes: 1000 } };
  assert.equal(measureWire({ reason: 'x'.repeat(87) }, limit).over, false);
  assert.equal(measureWire({ reason: 'x'.repeat(88) }, limit).over, true);
  assert.equal(measureWire({ a: { b: [new Uint8Array(101)] } }, limit).over, true, 'stray binary counts against the event budget');
  assert.deepEqual(measureWire({ data: new Uint8Array(1000) }, limit), { json: 13, binary: 0, attachment: 1000, over: false });
  assert.equal(measureWire({ data: new Uint8Array(1001) }, limit).over, true);
  assert.equal(measureWire({ data: [new Uint8Array(1000)] }, limit).over, true, 'only the field itself is the attachment');
  assert.equal(measureWire({ x: { data: new Uint8Array(1000) } }, limit).over, true, 'only at the top level');
  // One Buffer referenced many times (Socket.IO placeholders may repeat an attachment) counts each time.
  const b = new Uint8Array(60);
  assert.equal(measureWire({ x: [b] }, limit).over, false);
  assert.equal(measureWire({ x: [b, b] }, limit).over, true);
});

test('cycles, shared objects, bigints, toJSON and throwing getters are over, never a throw', () => {
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const shared = { s: 1 };
  const throwing = new Proxy({}, { ownKeys: () => { throw new Error('boom'); } });
  for (const v of [cyclic, [shared, shared], { n: 10n }, { d: new Date(0) }, throwing, { a: [throwing] }]) {
    assert.equal(measureWire(v, UNLIMITED).over, true);
  }
});

test('jsonOnly: any binary at all is over, an empty one too', () => {
  assert.equal(measureWire({ sdp: 'x' }, { bytes: 100, jsonOnly: true }).over, false);
  assert.equal(measureWire({ blob: [new Uint8Array(0)] }, { bytes: 100, jsonOnly: true }).over, true);
});

/** 32 MiB of bytes that may be measured (byteLength) but not read: any other access throws. */
function tripwire(bytes: number): { value: Uint8Array; reads: string[] } {
  const reads: string[] = [];
  const value = new Proxy(new Uint8Array(bytes), {
    get(target, key) {
      reads.push(String(key));
      if (key === 'byteLength') return target.byteLength;
      throw new Error(`read ${String(key)} of the bytes`);
    },
    ownKeys() {
      throw new Error('listed the bytes');
    },
    getOwnPropertyDescriptor() {
      throw new Error('described a byte');
    },
    has() {
      throw new Error('asked for a byte');
    },
  });
  return { value, reads };
}

test('32 MiB nested in an object is measured by its byteLength alone: not a byte of it is read', () => {
  const nested = tripwire(32 * 1024 * 1024);
  const m = measureWire({ jobId: 'job-1', x: { y: [nested.value] } }, { bytes: 64 * 1024 * 1024 });
  assert.deepEqual({ binary: m.binary, over: m.over }, { binary: 32 * 1024 * 1024, over: false });
  assert.deepEqual(nested.reads, ['byteLength']);
  // Over the event budget: refused on that one read.
  const refused = tripwire(32 * 1024 * 1024);
  assert.equal(measureWire({ x: { y: refused.value } }, eventSizeLimit('status')).over, true);
  assert.deepEqual(refused.reads, ['byteLength']);
  // As a model attachment.
  const attached = tripwire(LIMITS.maxModelBytes);
  assert.equal(measureWire({ jobId: 'job-1', roundId: 1, data: attached.value }, eventSizeLimit('star:update')).over, false);
  assert.deepEqual(attached.reads, ['byteLength']);
});

test('ATTACHMENT_FIELDS names exactly the schema fields that are binary attachments', () => {
  const found: Record<string, string> = {};
  for (const [event, schema] of Object.entries({ ...VOLUNTEER_EVENTS, ...DASHBOARD_EVENTS })) {
    for (const [field, s] of Object.entries((schema as z.ZodObject).shape)) {
      if ((s instanceof z.ZodOptional ? s.unwrap() : s) === binaryAttachmentSchema) found[event] = field;
    }
  }
  assert.deepEqual(found, ATTACHMENT_FIELDS);
});

test('the largest legitimate event is what Socket.IO lets through in one message', () => {
  const events = [...Object.keys(VOLUNTEER_EVENTS), ...Object.keys(DASHBOARD_EVENTS)];
  const largest = Math.max(...events.map((e) => eventSizeLimit(e).bytes + (eventSizeLimit(e).attachment?.bytes ?? 0)));
  assert.equal(largest, LIMITS.maxSocketMessageBytes);
  assert.deepEqual(eventSizeLimit('no such event'), { bytes: LIMITS.maxEventBytes });
});
