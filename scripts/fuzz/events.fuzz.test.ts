import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseEvent, ProtocolError } from '@tabfleet/protocol';
import { EVENT_TARGETS, SCHEMAS, VALID_SAMPLES } from './events';
import { assertTarget } from './target';

test('every event schema has a valid sample, and accepts it (so the properties reach the success path)', () => {
  assert.deepEqual(Object.keys(VALID_SAMPLES).sort(), Object.keys(SCHEMAS).sort());
  for (const [event, sample] of Object.entries(VALID_SAMPLES)) assert.doesNotThrow(() => parseEvent(SCHEMAS[event], sample, event), event);
});

for (const t of EVENT_TARGETS) test(`fuzz events: ${t.name}`, () => assertTarget(t));

// Found by fuzzing events.ts's `signal` schema (owned by the lead; not fixed here, so this test fails
// until it is): `data` is checked with JSON.stringify, so binary attachments pass (a Buffer becomes
// {"type":"Buffer","data":[…]}), a 32 MiB attachment is stringified whole before being refused (4.5 s
// of the server's one thread and ~900 MB measured here), and data nested 20,000 deep makes the schema
// throw a RangeError instead of a ProtocolError (the guard's own size check happens to catch that one
// first). Signal data is SDP and ICE candidates, plain JSON: check it without serializing or recursing.
test('signal data holding binary or nested 20,000 deep is refused with a ProtocolError, a 32 MiB attachment without serializing it', () => {
  const signal = (data: unknown) => ({ jobId: 'job-1', roundId: 1, to: 'v-2', data });
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 4096 }), fc.constantFrom('buffer', 'u8', 'nested'), (b, how) => {
      const data = how === 'buffer' ? Buffer.from(b) : how === 'u8' ? b : { candidate: { blob: Buffer.from(b) } };
      assert.throws(() => parseEvent(SCHEMAS.signal, signal(data), 'signal'), (e: Error) => e instanceof ProtocolError && e.code === 'bad_request');
    }),
    { numRuns: 100 },
  );
  let deep: unknown = 1;
  for (let i = 0; i < 20_000; i++) deep = [deep];
  assert.throws(() => parseEvent(SCHEMAS.signal, signal(deep), 'signal'), (e: Error) => e instanceof ProtocolError && e.code === 'bad_request');
  const big = Buffer.alloc(32 * 1024 * 1024, 255);
  const t0 = performance.now();
  assert.throws(() => parseEvent(SCHEMAS.signal, signal({ x: big }), 'signal'), ProtocolError);
  assert.ok(performance.now() - t0 < 500, `took ${(performance.now() - t0).toFixed(0)} ms to refuse`);
});
