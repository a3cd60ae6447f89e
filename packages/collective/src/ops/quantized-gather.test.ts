import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeQuantized, encodeQuantized, quantizedBytes } from '@tabfleet/protocol';
import { CollectiveError } from '../errors';
import { bitsEqual, floatData, memoryRing } from '../testing';

test('quantized allgather: every member gets the sum (or mean) of the decoded vectors, identical bytes, (N−1) × the encoded size sent', async () => {
  for (const n of [1, 2, 3, 5]) {
    const { rings } = await memoryRing(n, { ring: { chunkElements: 50 } });
    for (const format of ['int8', 'e2m1'] as const) {
      for (const length of [0, 1, 129, 1000]) {
        const inputs = rings.map((_, m) => floatData(length, 100 * n + m));
        const encoded = inputs.map((x) => encodeQuantized(x, format));
        for (const op of ['sum', 'mean'] as const) {
          const sentBefore = rings.map((r) => r.counters.bytesOut);
          const outs = await Promise.all(rings.map((r, m) => r.quantizedAllgather(encoded[m], { length, format, op })));
          const want = new Float64Array(length);
          const abs = new Float64Array(length);
          for (const bytes of encoded) decodeQuantized(bytes, length, format).forEach((v, i) => ((want[i] += v), (abs[i] += Math.abs(v))));
          for (let i = 0; i < length; i++) {
            const w = op === 'mean' ? want[i] / n : want[i];
            // Summed in f32: each addition rounds by at most half an ulp of the running sum.
            assert.ok(Math.abs(outs[0][i] - w) <= (n * abs[i] * 2 ** -23) / (op === 'mean' ? n : 1) + 1e-30, `n=${n} ${format} ${op} [${i}]: ${outs[0][i]} vs ${w}`);
          }
          for (const o of outs.slice(1)) assert.ok(bitsEqual(o, outs[0]), `n=${n} ${format} ${op}: members differ`);
          // Each member forwards every other member's bytes once, and sends its own: frames' headers on top.
          const payload = (n - 1) * quantizedBytes(length, format);
          rings.forEach((r, m) => assert.ok(r.counters.bytesOut - sentBefore[m] >= payload, `member ${m} sent ${r.counters.bytesOut - sentBefore[m]} < ${payload}`));
        }
      }
    }
  }
});

test('quantized allgather: a member whose bytes do not decode is named, and bad arguments are refused', async () => {
  const { rings } = await memoryRing(3);
  const length = 100;
  const good = rings.map((_, m) => encodeQuantized(floatData(length, m), 'int8'));
  const bad = good[1].slice();
  new DataView(bad.buffer).setFloat32(0, Number.NaN, true);
  const results = await Promise.allSettled(rings.map((r, m) => r.quantizedAllgather(m === 1 ? bad : good[m], { length, format: 'int8' })));
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    const e = (r as PromiseRejectedResult).reason as CollectiveError;
    assert.ok(e instanceof CollectiveError && e.code === 'bad_frame' && e.member === 'm1', `${e.code} ${e.member}: ${e.message}`);
  }
  const { rings: two } = await memoryRing(2);
  assert.throws(() => two[0].quantizedAllgather(good[0], { length: 99, format: 'int8' }), CollectiveError);
  assert.throws(() => two[0].quantizedAllgather(good[0], { length, format: 'int4' as never }), CollectiveError);
});
