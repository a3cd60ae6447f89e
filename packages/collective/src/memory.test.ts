// The in-memory transport itself: ordered delivery, bandwidth cap with backpressure, counters, faults.
// Times on a FakeClock where the test checks them: exact, however busy the machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@tabfleet/protocol/testing';
import { CollectiveError } from './errors';
import { MemoryNetwork } from './memory';

function frame(i: number, bytes = 1000): Uint8Array {
  const f = new Uint8Array(bytes);
  new DataView(f.buffer).setUint32(0, i, true);
  return f;
}
const idOf = (f: Uint8Array) => new DataView(f.buffer, f.byteOffset).getUint32(0, true);

test('frames arrive in order with latency and jitter; counters count them', async () => {
  const net = new MemoryNetwork({ seed: 3, faults: { latencyMs: 2, jitterMs: 5 } });
  const a = net.endpoint('a');
  const b = net.endpoint('b');
  await a.connect('b');
  const got: number[] = [];
  b.onFrame((from, f) => {
    assert.equal(from, 'a');
    got.push(idOf(f));
  });
  for (let i = 0; i < 200; i++) await a.send('b', frame(i));
  while (got.length < 200) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(got, Array.from({ length: 200 }, (_, i) => i));
  const sa = a.stats().find((s) => s.peer === 'b')!;
  const sb = b.stats().find((s) => s.peer === 'a')!;
  assert.equal(sa.bytesSent, 200_000);
  assert.equal(sb.bytesReceived, 200_000);
  assert.equal(sb.framesReceived, 200);
  assert.ok(sb.lastReceivedAt! >= sb.firstReceivedAt!);
});

test('a bandwidth cap fills bufferedAmount up to the bound and sends wait (backpressure)', async () => {
  const high = 64 * 1024;
  const clock = new FakeClock();
  const net = new MemoryNetwork({ highWaterMark: high, faults: { bandwidth: 10e6 }, clock });
  const a = net.endpoint('a');
  const b = net.endpoint('b');
  await a.connect('b');
  let received = 0;
  let doneAt = 0;
  const total = 2_000_000;
  b.onFrame((_, f) => (received += f.byteLength) === total && (doneAt = clock.now()));
  const t0 = clock.now();
  await clock.run((async () => {
    for (let i = 0; i < total / 10_000; i++) await a.send('b', frame(i, 10_000));
  })());
  await clock.advance(1_000);
  assert.equal(received, total);
  // 1 ms a frame on the wire, back to back: the last one is in at 200 ms.
  assert.equal(doneAt - t0, 200, '2 MB at 10 MB/s');
  const s = a.stats()[0];
  assert.ok(s.maxBufferedAmount <= high + 10_000, `buffered ${s.maxBufferedAmount}`);
  // Past the first few (the bound), each send waited for one frame to leave: 1 ms each.
  assert.ok(s.sendBlockedMs >= 190 && s.sendBlockedMs <= 200, `sends waited ${s.sendBlockedMs} ms`);
});

test('reorder and duplicate faults are seeded: the same seed gives the same arrival order', async () => {
  async function run(seed: number): Promise<number[]> {
    const clock = new FakeClock();
    const net = new MemoryNetwork({ seed, faults: { reorder: 0.2, duplicate: 0.2 }, clock });
    const a = net.endpoint('a');
    const b = net.endpoint('b');
    await a.connect('b');
    const got: number[] = [];
    b.onFrame((_, f) => got.push(idOf(f)));
    for (let i = 0; i < 100; i++) await a.send('b', frame(i, 8));
    await clock.advance(30);
    return got;
  }
  const x = await run(7);
  assert.deepEqual(await run(7), x);
  assert.notDeepEqual(x, Array.from({ length: 100 }, (_, i) => i));
  assert.deepEqual([...new Set(x)].sort((p, q) => p - q), Array.from({ length: 100 }, (_, i) => i), 'nothing lost');
});

test('killing a peer: its neighbours hear of it after lossDetectMs, pending and later sends reject with peer_lost', async () => {
  const clock = new FakeClock();
  const net = new MemoryNetwork({ lossDetectMs: 20, faults: { stalled: true }, highWaterMark: 1000, clock });
  const a = net.endpoint('a');
  net.endpoint('b');
  await a.connect('b');
  const lost: string[] = [];
  a.onPeerLost((p) => lost.push(p));
  await a.send('b', frame(0));
  const blocked = a.send('b', frame(1)); // over the bound on a stalled link: waits
  const rejected = assert.rejects(blocked, (e: CollectiveError) => e.code === 'peer_lost');
  net.kill('b');
  await clock.advance(19);
  assert.deepEqual(lost, []);
  await clock.advance(1);
  assert.deepEqual(lost, ['b']);
  await rejected;
  await assert.rejects(a.send('b', frame(2)), (e: CollectiveError) => e.code === 'peer_lost');
  assert.equal(a.isConnected('b'), false);
});

test('a link closed and opened again at once stays up: the news of the old wire does not close the new one', async () => {
  const net = new MemoryNetwork();
  const a = net.endpoint('a');
  const b = net.endpoint('b');
  await a.connect('b');
  const got: number[] = [];
  b.onFrame((_from, f) => got.push(idOf(f)));
  a.closeLink('b', 'no longer in the round');
  await a.connect('b');
  await new Promise((r) => setTimeout(r, 10));
  assert.ok(a.isConnected('b') && b.isConnected('a'));
  await a.send('b', frame(7));
  await b.send('a', frame(8));
  while (got.length < 1) await new Promise((r) => setTimeout(r, 2));
  assert.deepEqual(got, [7]);
});
