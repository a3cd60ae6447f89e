// Ring collectives on the in-memory transport: results against a plain sum for N = 1..8 and awkward
// lengths, fp32 bit-identical across members, fp16 within its rounding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { maxChunkElements, roundToF16 } from '@tabfleet/protocol';
import { CollectiveError } from './errors';
import { Ring } from './ring';
import { bitsEqual, floatData, intData, memoryRing, plainSum } from './testing';

const PRIMES = [7, 13, 101, 1009];

function lengthsFor(n: number, chunk: number): number[] {
  return [...new Set([1, Math.max(1, n - 1), n, ...PRIMES, chunk * n * 3 + 5, chunk * n * 2 - 1, 0])];
}

for (let n = 2; n <= 8; n++) {
  test(`allreduce sum/mean with ${n} members matches the plain sum, fp32 identical at every member`, async () => {
    const chunk = 16;
    const { rings } = await memoryRing(n, { ring: { chunkElements: chunk } });
    for (const len of lengthsFor(n, chunk)) {
      for (const kind of ['int', 'float'] as const) {
        const inputs = rings.map((_, i) => (kind === 'int' ? intData(len, 1000 * n + i) : floatData(len, 1000 * n + i)));
        const copies = inputs.map((x) => Float32Array.from(x));
        for (const op of ['sum', 'mean'] as const) {
          const outs = await Promise.all(rings.map((r, i) => r.allreduce(inputs[i], { op })));
          const { sum, abs } = plainSum(inputs);
          for (let i = 0; i < len; i++) {
            // Integer sums are exact in f32; the mean is that sum divided in f32.
            const want = op === 'sum' ? sum[i] : kind === 'int' ? Math.fround(sum[i] / n) : sum[i] / n;
            const tol = kind === 'int' ? 0 : (n * abs[i] * 2 ** -23) / (op === 'mean' ? n : 1) + 1e-30;
            assert.ok(Math.abs(outs[0][i] - want) <= tol, `n=${n} len=${len} ${kind} ${op} [${i}]: ${outs[0][i]} vs ${want}`);
          }
          for (const o of outs.slice(1)) assert.ok(bitsEqual(o, outs[0]), `n=${n} len=${len} ${op}: members disagree`);
          inputs.forEach((x, i) => assert.deepEqual(x, copies[i], 'inputs are never modified'));
        }
      }
    }
    for (const r of rings) assert.equal(r.counters.duplicate + r.counters.stale + r.counters.bad, 0);
  });
}

test('allreduce fp16 on the wire: exact for small integers, within f16 rounding otherwise, identical everywhere', async () => {
  for (const n of [2, 3, 5, 8]) {
    const { rings } = await memoryRing(n, { ring: { chunkElements: 64 } });
    for (const len of [1, n - 1 || 1, 101, 64 * n + 3, 5000]) {
      const ints = rings.map((_, i) => intData(len, 7 * n + i, 100));
      const outsInt = await Promise.all(rings.map((r, i) => r.allreduce(ints[i], { dtype: 'f16' })));
      const { sum } = plainSum(ints);
      assert.deepEqual([...outsInt[0]], [...sum], `n=${n} len=${len}: small integer sums are exact in f16`);
      const xs = rings.map((_, i) => floatData(len, 99 * n + i));
      for (const op of ['sum', 'mean'] as const) {
        const outs = await Promise.all(rings.map((r, i) => r.allreduce(xs[i], { dtype: 'f16', op })));
        const { sum: s, abs } = plainSum(xs);
        for (let i = 0; i < len; i++) {
          const want = op === 'sum' ? s[i] : s[i] / n;
          // Each of ≤ n hops rounds a partial sum to f16 (relative 2⁻¹¹), plus the final rounding; f16 subnormal spacing 2⁻²⁴.
          const tol = ((n + 1) * abs[i] * 2 ** -11 + 2 ** -24 * (n + 1)) / (op === 'mean' ? n : 1);
          assert.ok(Math.abs(outs[0][i] - want) <= tol, `n=${n} len=${len} ${op} [${i}]: ${outs[0][i]} vs ${want} (tol ${tol})`);
        }
        const r16 = Float32Array.from(outs[0]);
        roundToF16(r16);
        assert.ok(bitsEqual(r16, outs[0]), 'the result is made of f16 values');
        for (const o of outs.slice(1)) assert.ok(bitsEqual(o, outs[0]), `n=${n} len=${len}: members disagree`);
      }
    }
  }
});

test('a single member reduces to itself; full-size chunks over a prime length not a multiple of the chunk', async () => {
  const { rings: [solo] } = await memoryRing(1);
  assert.deepEqual([...(await solo.allreduce(new Float32Array([1, 2, 3]), { op: 'mean' }))], [1, 2, 3]);
  const n = 3;
  const len = maxChunkElements('f32') * 4 + 12_347; // 77,855 floats
  const { rings } = await memoryRing(n);
  const inputs = rings.map((_, i) => intData(len, i));
  const outs = await Promise.all(rings.map((r, i) => r.allreduce(inputs[i])));
  assert.deepEqual([...outs[1]], [...plainSum(inputs).sum]);
  assert.ok(rings[0].counters.framesOut > 2 * (n - 1) * 1, 'chunked into several frames per step');
});

test('10 million floats, 4 members', { timeout: 120_000 }, async () => {
  const n = 4;
  const len = 10_000_000;
  const { rings } = await memoryRing(n);
  const inputs = rings.map((_, i) => intData(len, 42 + i, 1 << 20));
  const t0 = performance.now();
  const outs = await Promise.all(rings.map((r, i) => r.allreduce(inputs[i])));
  const ms = performance.now() - t0;
  const want = new Float32Array(len);
  for (const x of inputs) for (let i = 0; i < len; i++) want[i] += x[i];
  for (const o of outs) assert.ok(bitsEqual(o, want));
  const sent = rings[0].counters.bytesOut;
  console.log(`10M floats × ${n} members in memory: ${ms.toFixed(0)} ms, ${(sent / 1e6).toFixed(1)} MB sent per member`);
  // The bandwidth-optimal bound: 2(N−1)/N · S, plus frame headers.
  const bound = (2 * (n - 1) / n) * len * 4;
  assert.ok(sent >= bound && sent < bound * 1.001, `member sent ${sent} bytes, bound ${bound}`);
});

test('allgather: every member gets every (variable-length) contribution in member order', async () => {
  for (const n of [1, 2, 3, 6]) {
    const { rings } = await memoryRing(n, { ring: { chunkElements: 10 } });
    const inputs = rings.map((_, i) => floatData(i * 17 + (i % 2 ? 0 : 25), 5 + i)); // includes an empty one
    const outs = await Promise.all(rings.map((r, i) => r.allgather(inputs[i])));
    for (const o of outs) assert.deepEqual(o.map((a) => [...a]), inputs.map((a) => [...a]));
    const h = await Promise.all(rings.map((r, i) => r.allgather(inputs[i], { dtype: 'f16' })));
    for (const o of h) {
      o.forEach((a, i) => {
        const want = Float32Array.from(inputs[i]);
        roundToF16(want);
        assert.ok(bitsEqual(a, want));
      });
    }
  }
});

test('broadcast: a late joiner receives the root model, through the ring', async () => {
  for (const n of [1, 2, 4, 5]) {
    const { rings, ids } = await memoryRing(n, { ring: { chunkElements: 100 } });
    const model = floatData(12_345, 3);
    const root = ids[n - 1];
    const outs = await Promise.all(rings.map((r) => r.broadcast(root, r.self === root ? model : null)));
    for (const o of outs) assert.ok(bitsEqual(o, model));
    const empty = await Promise.all(rings.map((r) => r.broadcast(ids[0], r.self === ids[0] ? new Float32Array(0) : null, { dtype: 'f16' })));
    for (const o of empty) assert.equal(o.length, 0);
  }
  const { rings } = await memoryRing(2);
  assert.throws(() => rings[0].broadcast('m1', new Float32Array(1)), CollectiveError);
});

test('sparse allgather sums (index, value) lists, f32 and f16, identical everywhere', async () => {
  for (const n of [1, 2, 3, 7]) {
    const { rings } = await memoryRing(n, { ring: { chunkElements: 9 } });
    const length = 500;
    const lists = rings.map((_, m) => {
      const k = m === 1 ? 0 : 20 + m * 13;
      const idx = Uint32Array.from({ length: k }, (_, j) => (j * 37 + m * 11) % length);
      return { idx, val: floatData(k, m + 1) };
    });
    for (const dtype of ['f32', 'f16'] as const) {
      for (const op of ['sum', 'mean'] as const) {
        const outs = await Promise.all(rings.map((r, m) => r.sparseAllgather(lists[m].idx, lists[m].val, { length, dtype, op })));
        const want = new Float64Array(length);
        const abs = new Float64Array(length);
        for (const { idx, val } of lists) {
          for (let j = 0; j < idx.length; j++) {
            want[idx[j]] += val[j];
            abs[idx[j]] += Math.abs(val[j]);
          }
        }
        for (let i = 0; i < length; i++) {
          const w = op === 'mean' ? want[i] / n : want[i];
          const tol = (dtype === 'f32' ? abs[i] * n * 2 ** -23 : abs[i] * 2 ** -10 + 2 ** -23) / (op === 'mean' ? n : 1);
          assert.ok(Math.abs(outs[0][i] - w) <= tol, `n=${n} ${dtype} ${op} [${i}] ${outs[0][i]} vs ${w}`);
        }
        for (const o of outs.slice(1)) assert.ok(bitsEqual(o, outs[0]));
      }
    }
  }
  const { rings } = await memoryRing(2);
  assert.throws(() => rings[0].sparseAllgather(new Uint32Array([5]), new Float32Array([1]), { length: 5 }), CollectiveError);
  assert.throws(() => rings[0].sparseAllgather(Uint32Array.from([3, 1, 3]), new Float32Array(3), { length: 5 }), /appears twice/);
});

test('ring arguments are checked', async () => {
  const { transports } = await memoryRing(2);
  assert.throws(() => new Ring({ transport: transports[0], members: ['a', 'b'], self: 'm0', jobId: 1, round: 2 }), /not a member/);
  assert.throws(() => new Ring({ transport: transports[0], members: ['m0', 'm0'], self: 'm0', jobId: 1, round: 2 }), /duplicate/);
  const r = new Ring({ transport: transports[0], members: ['m0', 'm1'], self: 'm0', jobId: 1, round: 3 });
  assert.throws(() => r.allreduce(new Float32Array(1), { dtype: 'f64' as never }), CollectiveError);
});

test('rings of consecutive rounds share a transport; frames of a round whose ring is not open yet wait for it', async () => {
  const { transports, ids } = await memoryRing(3, { connect: true, ring: { round: 100 } });
  const data = ids.map((_, i) => intData(1000, i));
  // m0 and m1 open round 2 and start at once; m2 opens it later.
  const early = [0, 1].map((i) => new Ring({ transport: transports[i], members: ids, self: ids[i], jobId: 'job-test', round: 2 }));
  const ps = early.map((r, i) => r.allreduce(data[i]));
  await new Promise((r) => setTimeout(r, 50));
  const late = new Ring({ transport: transports[2], members: ids, self: ids[2], jobId: 'job-test', round: 2 });
  const outs = await Promise.all([...ps, late.allreduce(data[2])]);
  for (const o of outs) assert.deepEqual([...o], [...plainSum(data).sum]);
  for (const r of [...early, late]) r.close();
  // A closed round's frames are stale now: a new ring of round 3 is unaffected.
  const next = ids.map((id, i) => new Ring({ transport: transports[i], members: ids, self: id, jobId: 'job-test', round: 3 }));
  const again = await Promise.all(next.map((r, i) => r.allreduce(data[i], { op: 'mean' })));
  for (const o of again) assert.ok(bitsEqual(o, again[0]));
});
