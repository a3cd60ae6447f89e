// Round trips measured on the links a ring opens, on fake time: exactly twice the one-way latency per
// link, the smallest seen kept, and nothing for a pong that answers no ping of ours.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeFrame } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { FrameRouter } from './router';
import { memoryRing } from './testing';

test('a ring measures the round trip to each neighbour when it connects: twice the one-way latency, per link', async () => {
  const clock = new FakeClock();
  const { net, rings } = await memoryRing(4, { net: { clock, faults: { latencyMs: 10 } }, connect: false });
  // m0 ↔ m1 is a slow link (60 ms each way); the ring is m0 → m1 → m2 → m3 → m0.
  net.setFaults('m0', 'm1', { latencyMs: 60 });
  await clock.run(Promise.all(rings.map((r) => r.connect())));
  await clock.advance(20);
  assert.deepEqual(rings.map((r) => r.linkRttMs()), [{ m3: 20 }, { m2: 20 }, { m1: 20, m3: 20 }, { m0: 20, m2: 20 }], 'the fast links at 20 ms');
  await clock.advance(99);
  assert.equal(rings[0].linkRttMs().m1, undefined, 'the slow pong is not back before 120 ms');
  await clock.advance(1);
  assert.deepEqual(rings.map((r) => r.linkRttMs()), [{ m1: 120, m3: 20 }, { m0: 120, m2: 20 }, { m1: 20, m3: 20 }, { m0: 20, m2: 20 }]);
  // The smallest round trip seen is what counts: a faster probe lowers it, a slower one does not raise it.
  net.setFaults('m0', 'm1', { latencyMs: 5 });
  await clock.run(rings[0].connect());
  await clock.advance(10);
  assert.equal(rings[0].linkRttMs().m1, 10);
  net.setFaults('m0', 'm1', { latencyMs: 200 });
  await clock.run(rings[0].connect());
  await clock.advance(400);
  assert.equal(rings[0].linkRttMs().m1, 10);
  // Sums over the ring still work beside the probes.
  const out = await clock.run(Promise.all(rings.map((r, i) => r.allreduce(Float32Array.of(i), { op: 'sum' }))));
  assert.deepEqual(out.map((x) => x[0]), [6, 6, 6, 6]);
});

test('a pong that answers no ping of ours, or another peer\'s ping, measures nothing', async () => {
  const clock = new FakeClock();
  const { net, transports, rings } = await memoryRing(3, { net: { clock }, connect: false });
  const pong = (nonce: number) => encodeFrame({ kind: 'pong', dtype: 'u8', flags: 0, job: 0, round: 0, op: 0, step: 0, segment: 0, chunk: nonce }, new Uint8Array(0));
  const m0 = FrameRouter.of(transports[0]);
  // Before m0 has pinged anyone.
  await transports[1].connect('m0');
  for (const nonce of [0, 1, 2, 3]) await transports[1].send('m0', pong(nonce));
  await clock.advance(20);
  assert.equal(m0.rttMs('m1'), undefined);
  // m0 pings both neighbours; m2's pong never arrives, and m1 answers every nonce m0 could have used.
  net.setFaults('m2', 'm0', { stalled: true }, false);
  await clock.run(rings[0].connect());
  for (let nonce = 0; nonce < 8; nonce++) await transports[1].send('m0', pong(nonce));
  await clock.advance(20);
  assert.equal(m0.rttMs('m2'), undefined, 'm1 cannot answer for m2');
  assert.deepEqual(Object.keys(rings[0].linkRttMs()), ['m1']);
});
