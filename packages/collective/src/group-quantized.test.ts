// Quantized contributions in a group (int8 and E2M1 payloads of untrusted jobs): each part goes as the
// member's block-quantized bytes, parts cut along the blocks; the owner decodes them strictly before
// its robust rule sees them and sends back an f16 aggregate.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FRAME_HEADER_BYTES, QUANT_BLOCK, allocFrame, combinePart, decodeFrame, decodeQuantized, encodeQuantized, partRange, type QuantFormat } from '@tabfleet/protocol';
import { CollectiveError } from './errors';
import { bitsEqual, floatData, memoryGroup, settleAll } from './testing';

/** What a member's vector becomes on a quantized wire: each block-aligned part encoded and decoded. */
function onTheWire(values: Float32Array, n: number, format: QuantFormat): Float32Array {
  const out = new Float32Array(values.length);
  for (let j = 0; j < n; j++) {
    const { start, end } = partRange(values.length, n, j, QUANT_BLOCK);
    out.set(decodeQuantized(encodeQuantized(values.subarray(start, end), format), end - start, format), start);
  }
  return out;
}

for (const format of ['int8', 'e2m1'] as const) {
  test(`${format} contributions: every member gets the same bytes, the rule's aggregate of the decoded parts, for fewer bytes than f16`, async () => {
    const len = 10_000; // not a whole number of blocks
    const n = 4;
    const g = memoryGroup(n, { chunkElements: 700 });
    const inputs = g.ids.map((_, i) => floatData(len, i + 90));
    const out = await Promise.all(g.groups.map((x, i) => x.average(inputs[i], { rule: 'centered-clip', dtype: 'f16', quantized: format })));
    const wire = inputs.map((x) => onTheWire(x, n, format));
    const expected = new Float32Array(len);
    for (let j = 0; j < n; j++) {
      const { start, end } = partRange(len, n, j, QUANT_BLOCK);
      expected.set(combinePart(wire.map((w) => w.subarray(start, end)), end - start, 'centered-clip', { f16: true }).aggregate!, start);
    }
    for (const [i, r] of out.entries()) {
      assert.ok(bitsEqual(r.mean, expected), `member ${i}'s mean`);
      assert.ok(bitsEqual(r.contribution, wire[i]), `member ${i}'s contribution is what went on the wire`);
      assert.deepEqual(r.refused, []);
      // What each sender says it sent is what the owner says it received.
      for (let j = 0; j < n; j++) assert.equal(r.digests.sent[j], out[j].digests.received[i]);
    }
    // Against the same group over an f16 wire (contributions and aggregates at 2 bytes a value).
    const f16 = memoryGroup(n, { chunkElements: 700 });
    await Promise.all(f16.groups.map((x, i) => x.average(inputs[i], { rule: 'centered-clip', dtype: 'f16' })));
    const ratio = g.groups[0].counters.bytesOut / f16.groups[0].counters.bytesOut;
    // Contributions at 1 or 1/2 byte a value (plus a scale per 64), aggregates at 2: (3/4)(b + 2) ÷ (3/4)(2 + 2).
    const bytesPerValue = format === 'int8' ? 1 + 4 / 64 : 0.5 + 4 / 64;
    assert.ok(Math.abs(ratio - (bytesPerValue + 2) / 4) < 0.03, `${format}: ${ratio.toFixed(3)} of the f16 wire's bytes`);
  });
}

test('a contribution whose block scale is not a finite number ≥ 0 fails the op as bad_frame, naming its sender', async () => {
  const g = memoryGroup(3);
  const send = g.transports[2].send.bind(g.transports[2]);
  g.transports[2].send = (peer, frame) => {
    const f = decodeFrame(frame);
    if (f.kind !== 'groupScatter' || f.chunk !== 0) return send(peer, frame);
    const bad = allocFrame(f, f.payload.byteLength);
    bad.set(f.payload, FRAME_HEADER_BYTES);
    new DataView(bad.buffer, FRAME_HEADER_BYTES).setFloat32(0, Number.NaN, true);
    return send(peer, bad);
  };
  const results = await settleAll(g.groups.map((x, i) => x.average(floatData(3000, i), { rule: 'centered-clip', dtype: 'f16', quantized: 'int8' })));
  assert.ok(results.some((r) => r instanceof CollectiveError && r.code === 'bad_frame' && r.member === 'm2' && /scale/.test(r.message)), results.map(String).join(' | '));
});

test('what a quantized payload leaves an attacker: large valid values, which the robust rule bounds as it does dense ones', async () => {
  const g = memoryGroup(5);
  const honest = g.ids.slice(0, 4).map((_, i) => floatData(4000, i + 200));
  // A valid encoding of the first member's vector times 10^6: scales 10^6 larger, the codes the same.
  const attack = honest[0].map((v) => v * 1e6);
  const out = await Promise.all(g.groups.map((x, i) => x.average(i < 4 ? honest[i] : attack, { rule: 'centered-clip', dtype: 'f16', quantized: 'e2m1' })));
  for (const r of out) assert.ok(bitsEqual(r.mean, out[0].mean));
  assert.equal(out.filter((r) => r.refused.some((x) => x.member === 'm4')).length, 5, 'every owner refuses the scaled contribution by its norm');
  // The same as the rule over the honest contributions alone, byte for byte.
  const honestWire = honest.map((x) => onTheWire(x, 5, 'e2m1'));
  const expected = new Float32Array(4000);
  for (let j = 0; j < 5; j++) {
    const { start, end } = partRange(4000, 5, j, QUANT_BLOCK);
    expected.set(combinePart(honestWire.map((w) => w.subarray(start, end)), end - start, 'centered-clip', { f16: true }).aggregate!, start);
  }
  assert.ok(bitsEqual(out[0].mean, expected));
});
