// The hierarchical ring on the in-memory network: the same weighted mean as the flat ring (bit for
// bit for integer data, paced weights within the flat ring's own rounding), identical bytes at every
// member, fewer bytes across homes, and a lost member anywhere fails every member of every home.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@tabfleet/protocol/testing';
import { CollectiveError } from './errors';
import { HomeRing } from './home-ring';
import { MemoryNetwork } from './memory';
import { Ring } from './ring';
import { bitsEqual, floatData, intData, plainSum, settleAll } from './testing';

/** Homes of these sizes (member ids h0m0, h0m1, …); the flat ring runs over the same members in the same order. */
function setup(sizes: number[], clock?: FakeClock, chunkElements = 32) {
  const homes = sizes.map((n, h) => Array.from({ length: n }, (_, i) => `h${h}m${i}`));
  const ids = homes.flat();
  const common = { jobId: 'job-home', deadlineMs: 20_000, chunkElements };
  const hierNet = new MemoryNetwork({ seed: 3, ...(clock ? { clock } : {}) });
  const flatNet = new MemoryNetwork({ seed: 3 });
  const hier = ids.map((id) => new HomeRing({ ...common, transport: hierNet.endpoint(id), homes, self: id, round: 1 }));
  const flat = ids.map((id) => new Ring({ ...common, transport: flatNet.endpoint(id), members: ids, self: id, round: 1 }));
  return { homes, ids, hier, flat, hierNet, flatNet };
}

/** Bytes on links between members of different homes (what the homes' uplinks carry). */
function crossHomeBytes(net: MemoryNetwork): { total: () => number } {
  let bytes = 0;
  net.tap((from, to, frame) => {
    if (from.split('m')[0] !== to.split('m')[0]) bytes += frame.byteLength;
  });
  return { total: () => bytes };
}

const LAYOUTS = [[2, 2], [3, 1, 2], [1, 1, 1], [4], [2, 3, 1, 2]];

for (const sizes of LAYOUTS) {
  test(`homes of ${sizes.join(', ')}: sum and mean equal the flat ring's, bit for bit, at every member`, async () => {
    const { hier, flat } = setup(sizes);
    for (const len of [1, 7, 1009]) {
      const inputs = hier.map((_, i) => intData(len, 50 * len + i));
      const copies = inputs.map((x) => Float32Array.from(x));
      for (const op of ['sum', 'mean'] as const) {
        for (const dtype of ['f32', 'f16'] as const) {
          const data = dtype === 'f16' ? inputs.map((x) => x.map((v) => Math.round(v / 20))) : inputs;
          const [h, f] = await Promise.all([
            Promise.all(hier.map((r, i) => r.allreduce(data[i], { op, dtype }))),
            Promise.all(flat.map((r, i) => r.allreduce(data[i], { op, dtype }))),
          ]);
          for (const [i, out] of h.entries()) assert.ok(bitsEqual(out, f[0]), `${sizes} len=${len} ${op} ${dtype}: member ${i} differs from the flat ring`);
        }
      }
      inputs.forEach((x, i) => assert.deepEqual(x, copies[i], 'inputs are never modified'));
    }
  });
}

test('paced weights: each member scaled by N·w/W gives the flat ring\'s weighted mean, and every member the same bytes', async () => {
  const { hier, flat, ids } = setup([3, 2, 1]);
  const steps = [4, 1, 7, 2, 9, 3];
  const total = steps.reduce((a, b) => a + b, 0);
  const len = 501;
  const inputs = ids.map((_, i) => floatData(len, 900 + i).map((v) => (v * ids.length * steps[i]) / total));
  const [h, f] = await Promise.all([
    Promise.all(hier.map((r, i) => r.allreduce(inputs[i], { op: 'mean' }))),
    Promise.all(flat.map((r, i) => r.allreduce(inputs[i], { op: 'mean' }))),
  ]);
  for (const out of h.slice(1)) assert.ok(bitsEqual(out, h[0]), 'members disagree');
  const { sum, abs } = plainSum(inputs);
  for (let i = 0; i < len; i++) {
    // Both add the same terms in different orders: each within n roundings of the exact weighted mean.
    const tol = (ids.length * abs[i] * 2 ** -23) / ids.length + 1e-30;
    const want = sum[i] / ids.length;
    assert.ok(Math.abs(h[0][i] - want) <= tol, `[${i}] hierarchical ${h[0][i]} vs ${want}`);
    assert.ok(Math.abs(h[0][i] - f[0][i]) <= 2 * tol, `[${i}] hierarchical ${h[0][i]} vs flat ${f[0][i]}`);
  }
});

test('two homes of two: a third of the bytes across homes that a flat ring in join order (homes interleaved) sends', async () => {
  const len = 4096;
  const { hier, hierNet } = setup([2, 2], undefined, 1024);
  const hierBytes = crossHomeBytes(hierNet);
  const inputs = hier.map((_, i) => intData(len, i));
  await Promise.all(hier.map((r, i) => r.allreduce(inputs[i], { op: 'mean' })));
  // The flat ring in the order the members joined: h0m0, h1m0, h0m1, h1m1 (every ring link crosses homes).
  const net = new MemoryNetwork({ seed: 3 });
  const order = ['h0m0', 'h1m0', 'h0m1', 'h1m1'];
  const flatBytes = crossHomeBytes(net);
  const rings = order.map((id) => new Ring({ transport: net.endpoint(id), members: order, self: id, jobId: 'job-home', round: 1, chunkElements: 1024 }));
  await Promise.all(rings.map((r, i) => r.allreduce(inputs[i], { op: 'mean' })));
  // Vector bytes: each leader sends 2(L−1)/L = 1 vector to the other; flat, 4 members send 1.5 vectors each.
  const vector = len * 4;
  assert.ok(hierBytes.total() >= 2 * vector && hierBytes.total() < 2.1 * vector, `hierarchical: ${hierBytes.total()} bytes across homes`);
  assert.ok(flatBytes.total() >= 6 * vector && flatBytes.total() < 6.3 * vector, `flat: ${flatBytes.total()} bytes across homes`);
});

test('a member lost in one home fails every member of every home with peer_lost, blaming it; nothing partial', async () => {
  const clock = new FakeClock();
  const { hier, hierNet, ids } = setup([2, 3, 2], clock);
  await clock.run(Promise.all(hier.map((r) => r.connect())));
  const lost = 'h1m2';
  hierNet.kill(lost);
  await clock.advance(5);
  const inputs = hier.map((_, i) => intData(300, i));
  const t0 = clock.now();
  const results = await clock.run(settleAll(hier.map((r, i) => (ids[i] === lost ? Promise.resolve(null) : r.allreduce(inputs[i], { op: 'mean' })))));
  for (const [i, r] of results.entries()) {
    if (ids[i] === lost) continue;
    assert.ok(r instanceof CollectiveError, `${ids[i]}: ${r instanceof Error ? r.message : 'a result'}`);
    assert.equal(r.code, 'peer_lost', `${ids[i]}: ${r.message}`);
    assert.equal(r.member, lost, `${ids[i]} blames ${r.member}`);
  }
  assert.ok(clock.now() - t0 < 20_000, 'before the deadline');
});

test('a leader lost between stages fails its home and the other homes', async () => {
  const clock = new FakeClock();
  const { hier, hierNet, ids } = setup([2, 2], clock);
  await clock.run(Promise.all(hier.map((r) => r.connect())));
  // h1m0 leads home 1: it dies once its home's sum is done (its first frame to the other leader).
  let struck = false;
  hierNet.tap((from, to) => {
    if (from !== 'h1m0' || to !== 'h0m0' || struck) return;
    struck = true;
    clock.after(0, () => hierNet.kill('h1m0'));
  });
  const results = await clock.run(settleAll(hier.map((r, i) => r.allreduce(intData(2000, i), { op: 'mean' }))));
  for (const [i, r] of results.entries()) {
    if (ids[i] === 'h1m0') continue;
    assert.ok(r instanceof CollectiveError && (r.code === 'peer_lost'), `${ids[i]}: ${r instanceof Error ? r.message : 'a result'}`);
  }
});

test('bad homes are refused', () => {
  const net = new MemoryNetwork();
  const transport = net.endpoint('a');
  const base = { transport, self: 'a', jobId: 'j', round: 1 };
  assert.throws(() => new HomeRing({ ...base, homes: [['a', 'b'], ['b']] }), /two homes/);
  assert.throws(() => new HomeRing({ ...base, homes: [['b'], []] }), /at least one member/);
  assert.throws(() => new HomeRing({ ...base, homes: [['b', 'c']] }), /a is in none of the homes/);
});
