// The fault matrix on the in-memory transport: a member killed before the op, during reduce-scatter
// and during allgather; a stalled link; a dropped link; reordered, duplicated and stale frames; an
// external abort; a member with the wrong length. Every survivor ends with the correct result or a
// typed CollectiveError, within a bounded time, and never with a partial sum: inputs stay untouched.
// Every ring runs on a FakeClock: how long a failure took is fake time, the same on a busy machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeFrame } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { CollectiveError, type CollectiveErrorCode } from './errors';
import { Ring } from './ring';
import { bitsEqual, intData, memoryRing as realTimeRing, plainSum, settleAll, type TestRing } from './testing';

/** A test ring on its own FakeClock. */
const memoryRing = (n: number, opts: Parameters<typeof realTimeRing>[1] = {}) => realTimeRing(n, { ...opts, net: { ...opts.net, clock: new FakeClock() } });
const clockOf = (t: TestRing) => t.net.clock as FakeClock;

const N = 6;
const LEN = 6 * 64 * 8 + 11; // 8+ chunks of 64 per segment
const CHUNK = 64;
const DEADLINE = 3000;

interface Outcome {
  results: (Float32Array | Error)[];
  ms: number;
  want: Float32Array;
}

/** Runs one allreduce on every member except `skip`, checking the invariants every fault case shares. */
async function allreduceWith(t: TestRing, opts: { skip?: number[]; lengths?: number[]; deadlineMs?: number } = {}): Promise<Outcome> {
  const inputs = t.rings.map((_, i) => intData(opts.lengths?.[i] ?? LEN, 10 + i));
  const copies = inputs.map((x) => Float32Array.from(x));
  const want = Float32Array.from(plainSum(inputs).sum);
  const clock = clockOf(t);
  const t0 = clock.now();
  const results = await clock.run(settleAll(t.rings.map((r, i) => (opts.skip?.includes(i) ? Promise.resolve(new Float32Array(0)) : r.allreduce(inputs[i], { deadlineMs: opts.deadlineMs })))));
  const ms = clock.now() - t0;
  inputs.forEach((x, i) => assert.ok(bitsEqual(x, copies[i]), `member ${i}: input modified`));
  for (const [i, r] of results.entries()) {
    if (opts.skip?.includes(i)) continue;
    if (r instanceof Error) assert.ok(r instanceof CollectiveError, `member ${i}: untyped error ${r.stack}`);
    else assert.ok(bitsEqual(r, want), `member ${i}: a result that is not the full sum`);
  }
  return { results, ms, want };
}

function codes(o: Outcome, survivors: number[]): (CollectiveErrorCode | 'ok')[] {
  return survivors.map((i) => {
    const r = o.results[i];
    return r instanceof CollectiveError ? r.code : 'ok';
  });
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

test('member killed before the op: every survivor rejects with peer_lost, long before the deadline', async () => {
  const t = await memoryRing(N, { ring: { chunkElements: CHUNK, deadlineMs: DEADLINE } });
  t.net.kill('m2');
  await clockOf(t).advance(5);
  const o = await allreduceWith(t, { skip: [2] });
  const survivors = range(N).filter((i) => i !== 2);
  assert.deepEqual(codes(o, survivors), survivors.map(() => 'peer_lost'));
  for (const i of survivors) assert.equal((o.results[i] as CollectiveError).member, 'm2', 'the lost member is named');
  assert.ok(o.ms < DEADLINE / 3, `took ${o.ms} ms`);
  // The ring stays broken: later ops fail at once.
  await assert.rejects(clockOf(t).run(t.rings[0].allreduce(new Float32Array(LEN))), (e: CollectiveError) => e.code === 'peer_lost');
});

for (const phase of ['reduce-scatter', 'allgather'] as const) {
  test(`member killed during ${phase}: survivors reject with peer_lost (or, in allgather, hold the full sum)`, async () => {
    const t = await memoryRing(N, { ring: { chunkElements: CHUNK, deadlineMs: DEADLINE }, net: { faults: { latencyMs: 1 } } });
    let killedAtStep = -1;
    t.net.tap((from, _to, bytes) => {
      const f = decodeFrame(bytes);
      if (killedAtStep >= 0 || f.kind !== 'allreduce' || from !== 'm3') return;
      const inPhase = phase === 'reduce-scatter' ? f.step === 2 : f.step === N;
      if (inPhase && f.chunk === 3) {
        killedAtStep = f.step;
        t.net.kill('m3');
      }
    });
    const o = await allreduceWith(t);
    assert.ok(killedAtStep >= 0, 'the kill happened mid-op');
    const survivors = range(N).filter((i) => i !== 3);
    const c = codes(o, survivors);
    assert.ok(c.every((x) => x === 'peer_lost' || (phase === 'allgather' && x === 'ok')), `codes: ${c}`);
    assert.ok(c.some((x) => x === 'peer_lost'));
    assert.ok(o.ms < DEADLINE / 3, `took ${o.ms} ms`);
  });
}

test('a link stalled past the deadline: everyone rejects with deadline, within a bounded time', async () => {
  const t = await memoryRing(N, { ring: { chunkElements: CHUNK }, net: { highWaterMark: 4096 } });
  t.net.stall('m1', 'm2');
  const deadlineMs = 300;
  const o = await allreduceWith(t, { deadlineMs });
  assert.deepEqual(codes(o, range(N)), range(N).map(() => 'deadline'));
  assert.equal(o.ms, deadlineMs);
  // Backpressure held: the stalled sender never queued past the bound (+ one frame).
  const st = t.transports[1].stats().find((s) => s.peer === 'm2')!;
  assert.ok(st.maxBufferedAmount <= 4096 + 64 * 4 + 64, `buffered ${st.maxBufferedAmount}`);
});

test('a dropped link fails the op with peer_lost at every member', async () => {
  const t = await memoryRing(N, { ring: { chunkElements: CHUNK, deadlineMs: DEADLINE }, net: { faults: { latencyMs: 1 } } });
  let dropped = false;
  t.net.tap((from) => {
    if (!dropped && from === 'm4') {
      dropped = true;
      queueMicrotask(() => t.net.dropLink('m4', 'm5'));
    }
  });
  const o = await allreduceWith(t);
  assert.deepEqual(codes(o, range(N)), range(N).map(() => 'peer_lost'));
  assert.ok(o.ms < DEADLINE / 3);
});

test('reordered and duplicated frames: every member gets the exact sum, duplicates counted and dropped', async () => {
  for (const seed of [1, 2, 3]) {
    // Not connected ahead: that pings each link, and the network would count the probes' duplicates too.
    const t = await memoryRing(N, { ring: { chunkElements: CHUNK }, net: { seed, faults: { reorder: 0.3, duplicate: 0.3, latencyMs: 1, jitterMs: 2 } }, connect: false });
    const o = await allreduceWith(t);
    assert.deepEqual(codes(o, range(N)), range(N).map(() => 'ok'));
    const dups = t.rings.reduce((a, r) => a + r.counters.duplicate, 0);
    const stale = t.rings.reduce((a, r) => a + r.counters.stale, 0);
    assert.ok(t.net.counters.reordered > 10 && t.net.counters.duplicated > 10 && dups > 0);
    // A duplicate of an op's last frame arrives after the op finished: stale rather than duplicate.
    assert.equal(dups + stale, t.net.counters.duplicated, 'every duplicate was recognized');
    // And the other collectives under the same faults.
    const g = await clockOf(t).run(Promise.all(t.rings.map((r, i) => r.allgather(intData(300 + i, i)))));
    for (const x of g) x.forEach((a, i) => assert.ok(bitsEqual(a, intData(300 + i, i))));
  }
});

test('stale frames of an earlier op and of an old round are counted and never added', async () => {
  // Not connected ahead, so every frame recorded is the op's (no link probes).
  const t = await memoryRing(4, { ring: { chunkElements: CHUNK }, connect: false });
  const recorded: [string, string, Uint8Array][] = [];
  const stop = t.net.tap((from, to, f) => recorded.push([from, to, f.slice()]));
  await allreduceWith(t);
  stop();
  // Replay op 0's frames (and a copy of them relabelled as round 0) into op 1.
  const ps = t.rings.map((r, i) => r.allreduce(intData(LEN, 50 + i)));
  for (const [from, to, f] of recorded) {
    const idx = Number(to.slice(1));
    (t.transports[idx] as unknown as { receive(from: string, f: Uint8Array): void }).receive(from, f);
    const old = f.slice();
    new DataView(old.buffer).setUint32(8, 0, true);
    (t.transports[idx] as unknown as { receive(from: string, f: Uint8Array): void }).receive(from, old);
  }
  const outs = await clockOf(t).run(Promise.all(ps));
  const want = Float32Array.from(plainSum(t.rings.map((_, i) => intData(LEN, 50 + i))).sum);
  for (const o of outs) assert.ok(bitsEqual(o, want));
  const stale = t.rings.reduce((a, r) => a + r.counters.stale, 0);
  assert.ok(stale >= recorded.length, `stale ${stale} of ${recorded.length} replayed`);
});

test('an external abort (round:abort) rejects every member promptly', async () => {
  const t = await memoryRing(N, { ring: { chunkElements: CHUNK, deadlineMs: DEADLINE }, net: { faults: { latencyMs: 2 } } });
  clockOf(t).after(5, () => t.rings[3].abort('round 1 aborted by the server'));
  const o = await allreduceWith(t);
  assert.deepEqual(codes(o, range(N)), range(N).map(() => 'aborted'));
  assert.ok(o.ms < DEADLINE / 3);
  await assert.rejects(clockOf(t).run(t.rings[3].allreduce(new Float32Array(3))), /aborted/);
});

test('an abort while connecting to a peer that never answers rejects connect with aborted at once', async () => {
  const t = await memoryRing(3, { connect: false });
  t.net.kill('m1');
  const t0 = performance.now();
  const connecting = t.rings[0].connect(DEADLINE);
  setTimeout(() => t.rings[0].abort('round 1 aborted by the server'), 5);
  await assert.rejects(connecting, (e: unknown) => e instanceof CollectiveError && e.code === 'aborted');
  assert.ok(performance.now() - t0 < DEADLINE / 2, 'not left to the connect deadline');
});

test('a member that never joins the op: the others reject with deadline', async () => {
  const t = await memoryRing(4, { ring: { chunkElements: CHUNK } });
  const o = await allreduceWith(t, { skip: [1], deadlineMs: 200 });
  assert.deepEqual(codes(o, [0, 2, 3]), ['deadline', 'deadline', 'deadline']);
  assert.equal(o.ms, 200);
});

test('a member with a different length: bad_frame at its neighbour, and every member rejects', async () => {
  const t = await memoryRing(4, { ring: { chunkElements: CHUNK, deadlineMs: DEADLINE } });
  const o = await allreduceWith(t, { lengths: [LEN, LEN, LEN + 1, LEN] });
  const c = codes(o, range(4));
  assert.ok(c.every((x) => x === 'bad_frame'), `codes ${c}`);
  assert.ok(o.ms < DEADLINE / 3);
});

test('a malformed frame from a neighbour fails the op with bad_frame', async () => {
  const t = await memoryRing(3, { ring: { chunkElements: CHUNK, deadlineMs: DEADLINE }, net: { faults: { latencyMs: 5 } } });
  const ps = t.rings.map((r, i) => r.allreduce(intData(LEN, i)));
  await clockOf(t).advance(1);
  (t.transports[1] as unknown as { receive(from: string, f: Uint8Array): void }).receive('m0', new Uint8Array([1, 2, 3]));
  const rs = await clockOf(t).run(settleAll(ps));
  assert.ok(rs.every((r) => r instanceof CollectiveError && r.code === 'bad_frame'), String(rs));
});

test('a sparse list with an index past the others\' length: bad_frame at the members that receive it', async () => {
  const t = await memoryRing(3, { ring: { deadlineMs: DEADLINE } });
  const clock = clockOf(t);
  const t0 = clock.now();
  const rs = await clock.run(settleAll(t.rings.map((r, i) => (i === 1
    ? r.sparseAllgather(Uint32Array.from([2, 150]), Float32Array.from([1, 1]), { length: 200 })
    : r.sparseAllgather(Uint32Array.from([i]), Float32Array.from([1]), { length: 100 })))));
  // m1 (the longer vector) sees only in-range indices; the server's checksum comparison catches it.
  for (const i of [0, 2]) assert.ok(rs[i] instanceof CollectiveError && rs[i].code === 'bad_frame' && /outside \[0, 100\)/.test(rs[i].message), String(rs[i]));
  assert.ok(clock.now() - t0 < DEADLINE / 3);
});

test('killed under a bandwidth cap with backpressure: bounded buffers, prompt failure', async () => {
  const t = await memoryRing(4, { ring: { deadlineMs: 10_000 }, net: { highWaterMark: 256 * 1024, faults: { bandwidth: 20e6, latencyMs: 1 } } });
  const clock = clockOf(t);
  clock.after(30, () => t.net.kill('m1'));
  const inputs = t.rings.map((_, i) => intData(1_000_000, i));
  const t0 = clock.now();
  const rs = await clock.run(settleAll(t.rings.map((r, i) => r.allreduce(inputs[i]))));
  const ms = clock.now() - t0;
  for (const i of [0, 2, 3]) assert.ok(rs[i] instanceof CollectiveError && rs[i].code === 'peer_lost', `member ${i}: ${rs[i]}`);
  // Killed at 30 ms: its neighbours hear of it at once (lossDetectMs 0) and the abort reaches the
  // third survivor one 1-ms hop later (31.006 ms with the frame's serialization), not at the 10-s deadline.
  assert.ok(ms >= 30 && ms < 33, `took ${ms} ms`);
  for (const tr of t.transports) for (const s of tr.stats()) assert.ok(s.maxBufferedAmount <= 256 * 1024 + 65536, `${tr.self}→${s.peer} buffered ${s.maxBufferedAmount}`);
});

test('ops after a deadline failure still work (the ring is not broken by a slow op)', async () => {
  const t = await memoryRing(3, { ring: { chunkElements: CHUNK } });
  const clock = clockOf(t);
  const first = await clock.run(settleAll([t.rings[0].allreduce(new Float32Array(10), { deadlineMs: 100 }), t.rings[1].allreduce(new Float32Array(10), { deadlineMs: 100 })]));
  assert.ok(first.every((r) => r instanceof CollectiveError && r.code === 'deadline'));
  // Member 2 never ran op 0; it skips it with a deadline of its own so sequence numbers line up again.
  await assert.rejects(clock.run(t.rings[2].allreduce(new Float32Array(10), { deadlineMs: 100 })));
  const outs = await clock.run(Promise.all(t.rings.map((r, i) => r.allreduce(intData(100, i)))));
  for (const o of outs) assert.ok(bitsEqual(o, Float32Array.from(plainSum([0, 1, 2].map((i) => intData(100, i))).sum)));
  assert.ok(new Ring({ transport: t.transports[0], members: t.ids, self: 'm0', jobId: 'other', round: 1 }));
});
