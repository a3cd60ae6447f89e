// The guard's shortcut past the size walk: an event decoded from a small text packet is within its
// limit by the packet's size alone. It holds only if re-writing decoded JSON never grows it by more
// than JSON_REWRITE_GROWTH; these texts are the ways it can grow, shrink or stay.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventSizeLimit, measureWire } from '@tabfleet/protocol';
import { JSON_REWRITE_GROWTH, withinLimitByPacketSize } from '../src/sockets/guard';

const texts = [
  '[1e20,1e20,9e20]', '{"a":1e20}', '1e20', '-1e20', '1e9', '1e21', '5e-7', '1e-6', '0.1000000000000000000001', '1E400', '-0',
  '"\\u00e9\\u0041"', '"\\ud800"', '"\\u001f\\n\\b"', '"é日本😀"', '{"a":1,"a":2}', ' [ 1 , 2 ]\n', '{"__proto__":{"x":1}}',
  '[true,false,null]', '{"jobId":"j1","seq":3,"step":12}', `[${'1e20,'.repeat(1000)}1e20]`,
];

test('a decoded JSON text measures at most JSON_REWRITE_GROWTH times its UTF-8 bytes, and "1e20" reaches it', () => {
  let worst = 0;
  for (const text of texts) {
    const size = measureWire(JSON.parse(text), { bytes: 1 << 30 });
    assert.equal(size.over, false, text);
    const growth = size.json / Buffer.byteLength(text);
    assert.ok(growth <= JSON_REWRITE_GROWTH, `${text.slice(0, 40)}: ${size.json} characters from ${Buffer.byteLength(text)} bytes`);
    worst = Math.max(worst, growth);
  }
  assert.equal(worst, JSON_REWRITE_GROWTH);
});

test('the shortcut takes only packets small enough at the worst growth, and never a packet of unknown size', () => {
  const limit = eventSizeLimit('round:ready');
  const largest = Math.floor(limit.bytes / JSON_REWRITE_GROWTH);
  assert.equal(withinLimitByPacketSize(largest, limit), true);
  assert.equal(withinLimitByPacketSize(largest + 1, limit), false);
  assert.equal(withinLimitByPacketSize(0, limit), false);
  assert.equal(withinLimitByPacketSize(undefined, limit), false);
  // A packet just past the shortcut whose argument is over the limit is still measured and refused.
  const over = `[${'1e20,'.repeat(Math.ceil(limit.bytes / 21))}1]`;
  assert.equal(measureWire(JSON.parse(over), limit).over, true);
});
