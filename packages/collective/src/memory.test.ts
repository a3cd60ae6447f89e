// The in-memory transport itself: ordered delivery, bandwidth cap with backpressure, counters, faults.
import { test } from 'node:test';
import assert from 'node:assert/strict';
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
  const net = new MemoryNetwork({ highWaterMark: high, faults: { bandwidth: 10e6 } });
  const a = net.endpoint('a');
  const b = net.endpoint('b');
  await a.connect('b');
  let received = 0;
  b.onFrame((_, f) => (received += f.byteLength));
  const t0 = performance.now();
  const total = 2_000_000;
  for (let i = 0; i < total / 10_000; i++) await a.send('b', frame(i, 10_000));
  while (received < total) await new Promise((r) => setTimeout(r, 2));
  const ms = performance.now() - t0;
  const s = a.stats()[0];
  assert.ok(s.maxBufferedAmount <= high + 10_000, `buffered ${s.maxBufferedAmount}`);
  assert.ok(s.sendBlockedMs > 50, `sends waited ${s.sendBlockedMs} ms`);
  assert.ok(ms > 150 && ms < 2000, `2 MB at 10 MB/s took ${ms} ms`);
});

test('reorder and duplicate faults are seeded: the same seed gives the same arrival order', async () => {
  async function run(seed: number): Promise<number[]> {
    const net = new MemoryNetwork({ seed, faults: { reorder: 0.2, duplicate: 0.2 } });
    const a = net.endpoint('a');
    const b = net.endpoint('b');
    await a.connect('b');
    const got: number[] = [];
    b.onFrame((_, f) => got.push(idOf(f)));
    for (let i = 0; i < 100; i++) await a.send('b', frame(i, 8));
    await new Promise((r) => setTimeout(r, 30));
    return got;
  }
  const x = await run(7);
  assert.deepEqual(await run(7), x);
  assert.notDeepEqual(x, Array.from({ length: 100 }, (_, i) => i));
  assert.deepEqual([...new Set(x)].sort((p, q) => p - q), Array.from({ length: 100 }, (_, i) => i), 'nothing lost');
});

test('killing a peer: its neighbours hear of it after lossDetectMs, pending and later sends reject with peer_lost', async () => {
  const net = new MemoryNetwork({ lossDetectMs: 20, faults: { stalled: true }, highWaterMark: 1000 });
  const a = net.endpoint('a');
  net.endpoint('b');
  await a.connect('b');
  const lost: string[] = [];
  a.onPeerLost((p) => lost.push(p));
  await a.send('b', frame(0));
  const blocked = a.send('b', frame(1)); // over the bound on a stalled link: waits
  net.kill('b');
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(lost, []);
  await assert.rejects(blocked, (e: CollectiveError) => e.code === 'peer_lost');
  assert.deepEqual(lost, ['b']);
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
