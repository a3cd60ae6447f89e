// Round trips measured on the links a ring opens: the smallest seen per neighbour, about twice the
// one-way latency, and nothing for a pong that answers no ping of ours.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeFrame } from '@tabfleet/protocol';
import { FrameRouter } from './router';
import { memoryRing } from './testing';

const until = async (what: string, ok: () => boolean, ms = 5_000) => {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

test('a ring measures the round trip to each neighbour when it connects: about twice the one-way latency, per link', async () => {
  const { net, rings } = await memoryRing(4, { net: { faults: { latencyMs: 10 } }, connect: false });
  // m0 ↔ m1 is a slow link (60 ms each way); the ring is m0 → m1 → m2 → m3 → m0.
  net.setFaults('m0', 'm1', { latencyMs: 60 });
  await Promise.all(rings.map((r) => r.connect()));
  await until('every pong', () => rings.every((r) => Object.keys(r.linkRttMs()).length === 2));
  const [m0, m1, m2] = rings.map((r) => r.linkRttMs());
  assert.deepEqual(Object.keys(m0).sort(), ['m1', 'm3']);
  // Never under twice the one-way latency; over it by what a busy machine adds (226 ms for the slow
  // link in a CI run), so each link is told apart by its own: the slow one well above the fast.
  assert.ok(m0.m1 >= 110 && m0.m1 < 1000, `m0 → m1 ${m0.m1} ms`);
  assert.ok(m0.m3 >= 15 && m0.m1 - m0.m3 >= 50, `m0 → m3 ${m0.m3} ms, m0 → m1 ${m0.m1} ms`);
  assert.ok(m1.m0 >= 110 && m1.m2 >= 15 && m1.m0 - m1.m2 >= 50, JSON.stringify(m1));
  assert.ok(m2.m1 >= 15 && m2.m3 >= 15 && m2.m1 < m1.m0 && m2.m3 < m1.m0, JSON.stringify(m2));
  // The link gets faster: the smallest round trip seen is what counts.
  net.setFaults('m0', 'm1', { latencyMs: 5 });
  await rings[0].connect();
  await until('a faster pong', () => rings[0].linkRttMs().m1 < 60);
  // Sums over the ring still work beside the probes.
  const out = await Promise.all(rings.map((r, i) => r.allreduce(Float32Array.of(i), { op: 'sum' })));
  assert.deepEqual(out.map((x) => x[0]), [6, 6, 6, 6]);
});

test('a pong that answers no ping of ours, or another peer\'s ping, measures nothing', async () => {
  const { net, transports, rings } = await memoryRing(3, { connect: false });
  const pong = (nonce: number) => encodeFrame({ kind: 'pong', dtype: 'u8', flags: 0, job: 0, round: 0, op: 0, step: 0, segment: 0, chunk: nonce }, new Uint8Array(0));
  const m0 = FrameRouter.of(transports[0]);
  // Before m0 has pinged anyone.
  await transports[1].connect('m0');
  for (const nonce of [0, 1, 2, 3]) await transports[1].send('m0', pong(nonce));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(m0.rttMs('m1'), undefined);
  // m0 pings both neighbours; m2's pong never arrives, and m1 answers every nonce m0 could have used.
  net.setFaults('m2', 'm0', { stalled: true }, false);
  await rings[0].connect();
  for (let nonce = 0; nonce < 8; nonce++) await transports[1].send('m0', pong(nonce));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(m0.rttMs('m2'), undefined, 'm1 cannot answer for m2');
  assert.deepEqual(Object.keys(rings[0].linkRttMs()), ['m1']);
});
