import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FRAME_HEADER_BYTES, aggregateWith, allocFrame, jobHash, decodeFrame, maxChunkElements, mean, modelDigest, type Aggregation } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { CollectiveError } from './errors';
import { Group, type GroupAverage } from './group';
import { MemoryNetwork, type MemoryTransport } from './memory';
import { bitsEqual, floatData, intData, memoryGroup, plainSum, settleAll, sparseData, type TestGroup } from './testing';

function average(g: TestGroup, inputs: Float32Array[], rule: Aggregation, dtype: 'f32' | 'f16' = 'f32'): Promise<GroupAverage[]> {
  return Promise.all(g.groups.map((x, i) => x.average(inputs[i], { rule, dtype })));
}

/** Rewrites every frame of `kind` that `transport` sends (the values become `value`). */
function tamper(transport: MemoryTransport, kind: 'groupScatter' | 'groupGather', value: number): void {
  const send = transport.send.bind(transport);
  transport.send = (peer, frame) => {
    if (decodeFrame(frame).kind !== kind) return send(peer, frame);
    const copy = frame.slice();
    new Float32Array(copy.buffer, FRAME_HEADER_BYTES, (copy.byteLength - FRAME_HEADER_BYTES) / 4).fill(value);
    return send(peer, copy);
  };
}

test('group mean: every member gets the same bytes, the exact mean, at ring allreduce bandwidth', async () => {
  for (const n of [1, 2, 3, 5]) {
    const len = 10_007;
    const g = memoryGroup(n, { chunkElements: 1000 });
    const inputs = g.ids.map((_, i) => intData(len, i + 1));
    const out = await average(g, inputs, 'mean');
    const expected = mean(inputs);
    for (const r of out) {
      assert.ok(bitsEqual(r.mean, expected), `n=${n}`);
      assert.deepEqual(r.refused, []);
    }
    for (const [i, x] of g.groups.entries()) {
      const valueBytes = x.counters.bytesOut - x.counters.framesOut * FRAME_HEADER_BYTES;
      // Sent: the N−1 parts it does not own, then its own part's aggregate to the N−1 others.
      const own = Math.floor(((i + 1) * len) / n) - Math.floor((i * len) / n);
      assert.equal(valueBytes, 4 * (len - own + (n - 1) * own), `n=${n} member ${i}`);
    }
    for (const x of g.groups) x.close();
  }
});

test('group average over an f16 wire: identical bytes everywhere, within f16 rounding of the mean', async () => {
  const g = memoryGroup(4);
  const inputs = g.ids.map((_, i) => floatData(5000, i + 10));
  const out = await average(g, inputs, 'mean', 'f16');
  for (const r of out) assert.ok(bitsEqual(r.mean, out[0].mean));
  // Each input is rounded to f16 (relative 2⁻¹¹) before it leaves, and the mean again.
  const exact = mean(inputs);
  const { abs } = plainSum(inputs);
  for (let i = 0; i < exact.length; i++) assert.ok(Math.abs(out[0].mean[i] - exact[i]) <= 2 ** -11 * (abs[i] / 4 + Math.abs(exact[i])) + 1e-7, `${i}: ${out[0].mean[i]} vs ${exact[i]}`);
});

test('the digests agree between senders and owners, and between owners and every receiver', async () => {
  const g = memoryGroup(4, { chunkElements: 300 });
  const out = await average(g, g.ids.map((_, i) => floatData(2000, i + 20)), 'centered-clip');
  for (let owner = 0; owner < 4; owner++) {
    for (let sender = 0; sender < 4; sender++) assert.equal(out[sender].digests.sent[owner], out[owner].digests.received[sender]);
    for (const r of out) assert.equal(r.digests.gathered[owner], out[owner].digests.aggregate);
  }
  assert.equal(out[0].digests.aggregate, modelDigest(out[0].mean.subarray(0, 500)));
});

for (const [attack, corrupt] of [
  ['scaled ×1e6', (x: Float32Array) => x.map((v) => v * 1e6)],
  ['NaN', (x: Float32Array) => x.map((v, i) => (i % 7 ? v : NaN))],
  ['Infinity', (x: Float32Array) => x.map((v, i) => (i === 3 ? Infinity : v))],
] as const) {
  test(`a member that sends ${attack}: every owner refuses it and names it, the result is the honest members' robust aggregate`, async () => {
    const g = memoryGroup(5);
    const honest = g.ids.slice(0, 4).map((_, i) => floatData(4000, i + 30).map((v) => 0.01 * v + 0.05));
    const inputs = [...honest, corrupt(honest[0])];
    const out = await average(g, inputs, 'centered-clip');
    for (const r of out) assert.ok(bitsEqual(r.mean, out[0].mean));
    // The Infinity sits in part 0 only; the other attacks spoil every part, the attacker's own included.
    const accusers = out.filter((r) => r.refused.some((x) => x.member === 'm4')).length;
    assert.equal(accusers, attack === 'Infinity' ? 1 : 5);
    assert.ok(out.every((r) => r.refused.every((x) => x.member === 'm4')), 'no honest member is refused');
    // Each part is exactly the rule applied to what its owner accepted: the honest parts, plus the
    // attacker's where it sent honest values (its copy of member 0's outside part 0 under Infinity).
    for (let part = 0; part < 5; part++) {
      const slice = (x: Float32Array) => x.subarray(800 * part, 800 * (part + 1));
      const accepted = attack === 'Infinity' && part > 0 ? [...honest, honest[0]] : honest;
      assert.ok(bitsEqual(slice(out[0].mean), aggregateWith('centered-clip', accepted.map(slice))), `part ${part}`);
    }
  });
}

test('a sign-flipped member within the norm bound moves the plain mean, and hardly the centered clip', async () => {
  const g = memoryGroup(5);
  const honest = g.ids.slice(0, 4).map((_, i) => floatData(4000, i + 40).map((v) => 0.01 * v + 0.05));
  const flipped = honest[0].map((v) => -8 * v);
  const plain = (await average(g, [...honest, flipped], 'mean'))[0].mean;
  const g2 = memoryGroup(5);
  const robust = (await average(g2, [...honest, flipped], 'centered-clip'))[0].mean;
  const target = mean(honest);
  const off = (x: Float32Array) => x.reduce((s, v, i) => s + Math.abs(v - target[i]), 0) / x.length;
  assert.ok(off(robust) * 3 < off(plain), `centered-clip ${off(robust)} vs mean ${off(plain)} from the honest mean`);
});

test('an owner that sends a wrong aggregate is exposed by the digests: the receivers gathered something else than it aggregated', async () => {
  const g = memoryGroup(4);
  tamper(g.transports[2], 'groupGather', 1234.5);
  const out = await average(g, g.ids.map((_, i) => floatData(1000, i + 50)), 'centered-clip');
  for (const [i, r] of out.entries()) {
    if (i === 2) continue;
    assert.notEqual(r.digests.gathered[2], out[2].digests.aggregate);
    assert.equal(r.digests.gathered[1], out[1].digests.aggregate);
  }
});

test('a sender that sends other values than it reports is exposed by the digests', async () => {
  const g = memoryGroup(4);
  tamper(g.transports[1], 'groupScatter', 7);
  const out = await average(g, g.ids.map((_, i) => floatData(1000, i + 60)), 'median');
  for (const owner of [0, 2, 3]) assert.notEqual(out[1].digests.sent[owner], out[owner].digests.received[1]);
  assert.equal(out[0].digests.sent[2], out[2].digests.received[0]);
});

test('a member lost mid-op: every member rejects with peer_lost and no result', async () => {
  // On fake time: the kill comes 30 ms in, while m3's 80 kB still crawl to m0 at 50 kB/s, however busy the machine.
  const clock = new FakeClock();
  const g = memoryGroup(4, { chunkElements: 100 }, new MemoryNetwork({ seed: 5, clock }));
  g.net.setFaults('m3', 'm0', { bandwidth: 50_000 });
  const pending = g.groups.map((x, i) => x.average(floatData(20_000, i), { rule: 'mean' }));
  const t0 = clock.now();
  clock.after(30, () => g.net.kill('m3'));
  const results = await clock.run(settleAll(pending.slice(0, 3)));
  assert.ok(clock.now() - t0 < 100, `failed ${clock.now() - t0} ms in`);
  for (const r of results) {
    assert.ok(r instanceof CollectiveError, String(r));
    assert.ok(r.code === 'peer_lost' || r.code === 'aborted', r.message);
  }
});

test('a frame for the wrong part fails the op as bad_frame and names the sender', async () => {
  const g = memoryGroup(3);
  const send = g.transports[1].send.bind(g.transports[1]);
  g.transports[1].send = (peer, frame) => {
    const copy = frame.slice();
    if (decodeFrame(frame).kind === 'groupScatter') new DataView(copy.buffer).setUint16(18, 2, true); // segment 2, whoever the owner
    return send(peer, copy);
  };
  const results = await settleAll(g.groups.map((x, i) => x.average(floatData(300, i), { rule: 'mean' })));
  const blamed = results.filter((r) => r instanceof CollectiveError && r.code === 'bad_frame' && r.member === 'm1');
  assert.ok(blamed.length >= 1, results.map(String).join(' | '));
  assert.ok(results.every((r) => r instanceof Error));
});

test('frames from a peer outside the group are counted and ignored', async () => {
  const g = memoryGroup(2);
  const outsider = g.net.endpoint('x');
  await outsider.connect('m0');
  const frame = allocFrame({ kind: 'groupScatter', dtype: 'f32', flags: 0, job: jobHash('job-test'), round: 1, op: 0, step: 0, segment: 0, chunk: 0 }, 4 * 50);
  new Float32Array(frame.buffer, FRAME_HEADER_BYTES, 50).fill(1e9);
  await outsider.send('m0', frame);
  const inputs = [intData(100, 1), intData(100, 2)];
  const out = await average(g, inputs, 'mean');
  assert.ok(bitsEqual(out[0].mean, mean(inputs)));
  assert.equal(g.groups[0].counters.foreign, 1);
});

test('a group refuses more than 16 members, duplicates, and a self that is not a member', () => {
  const net = new MemoryNetwork();
  const t = net.endpoint('a');
  const ids = Array.from({ length: 17 }, (_, i) => (i === 0 ? 'a' : `p${i}`));
  assert.throws(() => new Group({ transport: t, members: ids, self: 'a', jobId: 1, round: 1 }), /at most 16/);
  assert.throws(() => new Group({ transport: t, members: ['a', 'a'], self: 'a', jobId: 1, round: 1 }), /duplicate/);
  assert.throws(() => new Group({ transport: t, members: ['b'], self: 'a', jobId: 1, round: 1 }), /not a member/);
  assert.equal(maxChunkElements('f32') > 0, true);
});

test('sparse parts (DGC payloads): the exact mean, identical everywhere, for a fraction of the dense bytes', async () => {
  const len = 50_000;
  const g = memoryGroup(4);
  const inputs = g.ids.map((_, i) => sparseData(len, 250, i + 70));
  const out = await Promise.all(g.groups.map((x, i) => x.average(inputs[i], { rule: 'mean', sparse: true })));
  const expected = mean(inputs);
  for (const r of out) assert.ok(bitsEqual(r.mean, expected));
  const denseBytes = 2 * (3 / 4) * len * 4;
  for (const x of g.groups) assert.ok(x.counters.bytesOut < denseBytes / 10, `${x.counters.bytesOut} bytes against ${denseBytes} dense`);
});

test('sparse parts over an f16 wire with a scaled member: refused by every owner, the rest combined', async () => {
  const g = memoryGroup(5, { chunkElements: 40 });
  const honest = g.ids.slice(0, 4).map((_, i) => sparseData(20_000, 400, i + 80));
  const out = await Promise.all(g.groups.map((x, i) => x.average(i < 4 ? honest[i] : honest[0].map((v) => v * 1e6), { rule: 'centered-clip', dtype: 'f16', sparse: true })));
  for (const r of out) assert.ok(bitsEqual(r.mean, out[0].mean));
  assert.equal(out.filter((r) => r.refused.some((x) => x.member === 'm4')).length, 5);
  assert.ok(out[0].mean.every((v) => Number.isFinite(v) && Math.abs(v) < 200));
});

test('a sparse chunk with an index outside its part fails the op as bad_frame from its sender', async () => {
  const g = memoryGroup(3);
  const send = g.transports[2].send.bind(g.transports[2]);
  g.transports[2].send = (peer, frame) => {
    const f = decodeFrame(frame);
    if (f.kind !== 'groupScatter') return send(peer, frame);
    // One pair whose index lies past the part's end.
    const payload = Uint8Array.of(1, 0, 0, 0, 0, 0, 0x80, 0x3f, 0xff, 0xff, 0x03);
    const bad = allocFrame({ ...f, flags: 1 }, payload.byteLength);
    bad.set(payload, FRAME_HEADER_BYTES);
    return send(peer, bad);
  };
  const results = await settleAll(g.groups.map((x, i) => x.average(sparseData(3000, 30, i), { rule: 'mean', sparse: true })));
  assert.ok(results.some((r) => r instanceof CollectiveError && r.code === 'bad_frame' && r.member === 'm2' && /outside/.test(r.message)), results.map(String).join(' | '));
});
