// DGC: every kernel against the CPU reference (and against plain host arithmetic) on awkward lengths and
// extreme values, on the CPU backend and on Node's Dawn WebGPU backend; then the compressor itself:
// top-k counts, error feedback, momentum correction, masking, and one readback per call.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '@tabfleet/protocol';
import { CpuBackend, DGC_HEADER_WORDS, DGC_TUNING, type Backend, type Storage } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { checkSparseUpdate, DgcCompressor, densify, type DgcConfig } from './dgc';
import { DGC_WARMUP_SPARSITIES, defaultWarmupSyncs, sparsityAt, topKCount } from './sparsity';

const cpu = new CpuBackend('f32');
const gpu = await createNodeGpuBackend();
const BACKENDS: [string, Backend][] = [['cpu', cpu], ['webgpu', gpu]];
const LENGTHS = [1, 63, 64, 65, 997, 4099, 203_530];
const FLT_MIN = 1.1754943508222875e-38;

const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];
const f32Of = (b: number) => new Float32Array(Uint32Array.of(b).buffer)[0];

async function readF32(be: Backend, s: Storage, n = s.size): Promise<Float32Array> {
  return ((await be.read(s, 'f32')) as Float32Array).slice(0, n);
}
async function readU32(be: Backend, s: Storage): Promise<Uint32Array> {
  const w = (await be.read(s, 'i32')) as Int32Array;
  return new Uint32Array(w.buffer, w.byteOffset, w.length).slice();
}
function uploadU32(be: Backend, words: Uint32Array): Storage {
  return be.upload(new Int32Array(words.buffer, words.byteOffset, words.length).slice());
}

function assertClose(got: ArrayLike<number>, want: ArrayLike<number>, what: string, rtol = 1e-4, atol = 1e-5): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const g = got[i], w = want[i];
    if (Object.is(g, w) || Math.abs(g - w) <= atol + rtol * Math.abs(w)) continue;
    assert.fail(`${what}: [${i}] got ${g} want ${w}`);
  }
}

/** normal values, or a mix of ±1e4, 1e-20, 0, ±3e3, 50, tiny and negative values. */
function values(rng: Rng, n: number, kind: 'normal' | 'extreme' | 'heavy'): Float32Array {
  if (kind === 'normal') return Float32Array.from({ length: n }, () => rng.normal());
  if (kind === 'heavy') return Float32Array.from({ length: n }, () => rng.normal() / (Math.abs(rng.normal()) + 1e-3));
  return Float32Array.from({ length: n }, (_, i) => [1e4, -1e4, 1e-20, -3e3, 0, 50, -1e-3, 7][i % 8] * (0.5 + rng.next()));
}

// ---- kernels -------------------------------------------------------------------------------------

test('dgcSumSquares matches Σx² in f64 on awkward lengths and extreme values', async () => {
  const rng = new Rng(1);
  for (const n of LENGTHS) {
    for (const kind of ['normal', 'extreme'] as const) {
      const x = values(rng, n, kind);
      let want = 0;
      for (const a of x) want += a * a;
      for (const [name, be] of BACKENDS) {
        const xs = be.upload(x), dst = be.alloc(1, 'f32');
        be.dgcSumSquares(xs, n, dst);
        const [got] = await readF32(be, dst, 1);
        assertClose([got], [want], `${name} n=${n} ${kind}`, 1e-5, 0);
        be.release(xs);
        be.release(dst);
      }
    }
  }
});

interface AccCase { momentum: number; clip: 'off' | 'active' | 'inactive'; mask: boolean }
const ACC_CASES: AccCase[] = [
  { momentum: 0, clip: 'off', mask: false },
  { momentum: 0, clip: 'off', mask: true },
  { momentum: 0.9, clip: 'active', mask: true },
  { momentum: 0.9, clip: 'inactive', mask: true },
  { momentum: 0.5, clip: 'active', mask: false },
];

test('dgcAccumulate (masking, clipping, momentum) matches host arithmetic on both backends', async () => {
  const rng = new Rng(2);
  for (const n of LENGTHS) {
    for (const c of ACC_CASES) {
      const g = values(rng, n, n % 2 ? 'extreme' : 'normal');
      const u0 = values(rng, n, 'normal');
      const v0 = values(rng, n, 'normal');
      // Ties at the mask threshold (both signs), on both sides of the tie index.
      const thr = 0.5;
      for (let i = 0; i < n; i += 7) v0[i] = i % 2 ? -thr : thr;
      const tieIndex = Math.floor(n / 2);
      let ss = 0;
      for (const a of g) ss += a * a;
      const norm = Math.sqrt(ss);
      const clipNorm = c.clip === 'off' ? 0 : c.clip === 'active' ? norm / 3 : norm * 2;
      const scale = c.clip === 'active' ? clipNorm / norm : 1;
      const wantU = new Float64Array(n), wantV = new Float64Array(n);
      let masked = 0;
      for (let i = 0; i < n; i++) {
        const a = Math.abs(v0[i]);
        const sent = c.mask && (a > thr || (a === thr && i <= tieIndex));
        if (sent) masked++;
        const gi = g[i] * scale;
        const ui = c.momentum * (sent ? 0 : u0[i]) + gi;
        wantU[i] = c.momentum ? ui : u0[i];
        wantV[i] = (sent ? 0 : v0[i]) + (c.momentum ? ui : gi);
      }
      if (c.mask) assert.ok(masked > 0 && masked < n || n < 8, 'the mask case masks some but not all');
      for (const [name, be] of BACKENDS) {
        const gs = be.upload(g), us = be.upload(c.momentum ? u0 : Float32Array.of(7)), vs = be.upload(v0);
        const sumSq = clipNorm > 0 ? be.alloc(1, 'f32') : null;
        if (sumSq) be.dgcSumSquares(gs, n, sumSq);
        be.dgcAccumulate(gs, us, vs, sumSq, { n, momentum: c.momentum, clipNorm, maskThreshold: c.mask ? thr : 0, maskTieIndex: tieIndex });
        const what = `${name} n=${n} ${JSON.stringify(c)}`;
        assertClose(await readF32(be, vs, n), wantV, `${what} v`);
        if (c.momentum) assertClose(await readF32(be, us, n), wantU, `${what} u`);
        else assert.deepEqual([...(await readF32(be, us, 1))], [7], `${what}: u untouched without momentum`);
        for (const s of [gs, us, vs, sumSq]) if (s) be.release(s);
      }
    }
  }
});

test('dgcSample reads one seeded position per stratum, identical on both backends (NaN → 0, |−x| = x)', async () => {
  const rng = new Rng(3);
  for (const n of LENGTHS) {
    const v = values(rng, n, 'extreme');
    v[0] = -0;
    if (n > 5) [v[1], v[2], v[3], v[4], v[5]] = [NaN, -Infinity, Infinity, -1e-40, 3.4e38];
    for (const stride of [...new Set([1, 7, 99, n])]) {
      const count = Math.ceil(n / stride);
      for (const seed of [0, 1, 12345, 0xffffffff]) {
        const results: Uint32Array[] = [];
        for (const [, be] of BACKENDS) {
          const vs = be.upload(v), out = uploadU32(be, new Uint32Array(DGC_HEADER_WORDS + count).fill(0xdeadbeef));
          be.dgcSample(vs, out, { n, count, stride, seed, offset: DGC_HEADER_WORDS });
          results.push(await readU32(be, out));
          be.release(vs);
          be.release(out);
        }
        const what = `n=${n} stride=${stride} seed=${seed}`;
        assert.deepEqual(results[1], results[0], what);
        const words = results[0];
        for (let i = 0; i < DGC_HEADER_WORDS; i++) assert.equal(words[i], 0xdeadbeef, `${what}: header untouched`);
        const magBits = new Set<number>();
        for (let j = 0; j < count; j++) {
          magBits.clear();
          for (let i = j * stride; i < Math.min(n, (j + 1) * stride); i++) {
            const b = bitsOf(v[i]) & 0x7fffffff;
            magBits.add(b > 0x7f800000 ? 0 : b);
          }
          assert.ok(magBits.has(words[DGC_HEADER_WORDS + j]), `${what}: sample ${j} comes from its stratum`);
        }
      }
    }
  }
  // Different seeds pick different positions.
  const n = 10_000, v = Float32Array.from({ length: n }, (_, i) => i + 1);
  const outs: Uint32Array[] = [];
  for (const seed of [1, 2]) {
    const vs = gpu.upload(v), out = (gpu as Backend).alloc(DGC_HEADER_WORDS + 100, 'i32');
    gpu.dgcSample(vs, out, { n, count: 100, stride: 100, seed, offset: DGC_HEADER_WORDS });
    outs.push((await readU32(gpu, out)).slice(DGC_HEADER_WORDS));
  }
  assert.notDeepEqual(outs[0], outs[1]);
});

test('dgcThreshold finds the rank-th largest sample exactly (ties, zeros, huge, subnormal), both backends', async () => {
  const rng = new Rng(4);
  const kinds: Record<string, (n: number) => Uint32Array> = {
    random: (n) => Uint32Array.from({ length: n }, () => bitsOf(Math.abs(rng.normal()))),
    ties: (n) => Uint32Array.from({ length: n }, () => bitsOf([0.5, 0.25, 1, 0.5][rng.int(4)])),
    allEqual: (n) => new Uint32Array(n).fill(bitsOf(3)),
    mostlyZero: (n) => Uint32Array.from({ length: n }, (_, i) => (i % 50 === 3 ? bitsOf(rng.uniform(0, 1e-3)) : 0)),
    extremes: (n) => Uint32Array.from({ length: n }, (_, i) => [0x7f800000, 0x7f7fffff, 1, 2, 0x00800000, bitsOf(1e-30), bitsOf(1e30), 0][i % 8]),
    highBytesShared: (n) => Uint32Array.from({ length: n }, () => 0x3f800000 + rng.int(300)),
  };
  for (const count of [1, 2, 63, 64, 65, 256, 257, 2056, 5000]) {
    for (const [kind, gen] of Object.entries(kinds)) {
      const sample = gen(count);
      const desc = [...sample].sort((a, b) => b - a);
      for (const rank of [...new Set([0, 1, 2, Math.ceil(count / 2), count - 1, count, count + 5])]) {
        const r = Math.min(Math.max(rank, 1), count);
        const kth = desc[r - 1];
        const want = [0, Math.max(kth, 0x00800000), kth];
        for (const [name, be, wg] of [...BACKENDS, ['webgpu WG 256', gpu, 256]] as [string, Backend, number?][]) {
          DGC_TUNING.thresholdWg = wg ?? 64;
          const words = new Uint32Array(DGC_HEADER_WORDS + count).fill(12345);
          words.set(sample, DGC_HEADER_WORDS);
          const out = uploadU32(be, words);
          be.dgcThreshold(out, count, rank, DGC_HEADER_WORDS);
          const got = await readU32(be, out);
          assert.deepEqual([...got.slice(0, 3)], want, `${name} count=${count} ${kind} rank=${rank}`);
          assert.deepEqual(got.slice(DGC_HEADER_WORDS), sample, 'the sample is left as it was');
          be.release(out);
        }
        DGC_TUNING.thresholdWg = 64;
      }
    }
  }
});

test('dgcSelect compacts exactly the elements at or above the threshold, both backends', async () => {
  const rng = new Rng(5);
  for (const n of LENGTHS) {
    const v = Float32Array.from({ length: n }, (_, i) => {
      switch (i % 11) {
        case 0: return 0;
        case 1: return 0.5; // ties at the threshold
        case 2: return -0.5;
        case 3: return 1e30 * (rng.next() - 0.5);
        case 4: return 1e-30 * rng.normal();
        case 5: return i % 3 === 0 ? NaN : -Infinity;
        case 6: return 0.49999997; // the f32 just below the 0.5 ties
        default: return rng.normal();
      }
    });
    for (const thr of [0.5, FLT_MIN, 3e38, 1e-30]) {
      const want: [number, number][] = [];
      for (let i = 0; i < n; i++) if (Math.abs(v[i]) >= Math.fround(thr)) want.push([i, bitsOf(v[i])]);
      for (const capacity of [...new Set([want.length + 3, Math.floor(want.length / 2), 1])]) {
        // The WebGPU kernel once per vec4s-per-invocation setting (CPU adapters use 64, GPUs 2).
        const variants = n <= 4099 && capacity > 1 ? [['webgpu 1/inv', gpu, 1], ['webgpu 2/inv', gpu, 2], ['webgpu 5/inv', gpu, 5]] : [];
        for (const [name, be, per] of [...BACKENDS, ...variants] as [string, Backend, number?][]) {
          DGC_TUNING.selectPerInvocationCpu = per ?? 64;
          const pairsOffset = DGC_HEADER_WORDS;
          const words = new Uint32Array(pairsOffset + 2 * capacity).fill(0xffffffff);
          words[0] = 0;
          words[1] = bitsOf(thr);
          const vs = be.upload(v), out = uploadU32(be, words);
          be.dgcSelect(vs, out, { n, capacity, pairsOffset });
          const got = await readU32(be, out);
          const what = `${name} n=${n} thr=${thr} capacity=${capacity}`;
          assert.equal(got[0], want.length, `${what}: count`);
          const stored = Math.min(want.length, capacity);
          const pairs: [number, number][] = [];
          for (let s = 0; s < stored; s++) pairs.push([got[pairsOffset + 2 * s], got[pairsOffset + 2 * s + 1]]);
          pairs.sort((a, b) => a[0] - b[0]);
          if (stored === want.length) assert.deepEqual(pairs, want, `${what}: pairs`);
          else {
            const wantMap = new Map(want);
            assert.equal(new Set(pairs.map((p) => p[0])).size, stored, `${what}: unique slots`);
            for (const [i, b] of pairs) assert.equal(wantMap.get(i), b, `${what}: stored pair ${i} is selected`);
          }
          for (let s = stored; s < capacity; s++) assert.equal(got[pairsOffset + 2 * s], 0xffffffff, `${what}: nothing past the count`);
          be.release(vs);
          be.release(out);
        }
        DGC_TUNING.selectPerInvocationCpu = 64;
      }
    }
  }
});

// ---- schedule and helpers -------------------------------------------------------------------------

test('sparsity warm-up: 75% → 93.75% → 98.4375% → 99.6%, a quarter of the warm-up each, then final', () => {
  const s = { finalSparsity: 0.999, warmupSteps: 100 };
  assert.deepEqual([0, 24, 25, 49, 50, 74, 75, 99, 100, 5000].map((t) => sparsityAt(t, s)), [0.75, 0.75, 0.9375, 0.9375, 0.984375, 0.984375, 0.996, 0.996, 0.999, 0.999]);
  assert.deepEqual([...DGC_WARMUP_SPARSITIES], [0.75, 0.9375, 0.984375, 0.996]);
  assert.equal(sparsityAt(0, { finalSparsity: 0.999, warmupSteps: 0 }), 0.999);
  // Default length: 1.25% of the syncs, at least one per stage.
  assert.deepEqual([1, 16, 320, 640, 8000].map(defaultWarmupSyncs), [4, 4, 4, 8, 100]);
  assert.equal(sparsityAt(3, { finalSparsity: 0.9, warmupSteps: 4 }), 0.9, 'never above the final sparsity');
  assert.throws(() => sparsityAt(0, { finalSparsity: 1, warmupSteps: 0 }));
  assert.equal(topKCount(203_530, 0.999), 204);
  assert.equal(topKCount(1000, 0.999), 1);
  assert.equal(topKCount(64, 0.75), 16);
  assert.equal(topKCount(10, 0.9999), 1);
});

test('densify sums updates in order and scales; checkSparseUpdate rejects bad lists', () => {
  const a = { indices: Uint32Array.of(0, 3), values: Float32Array.of(1, 2), length: 5 };
  const b = { indices: Uint32Array.of(3, 4), values: Float32Array.of(4, -1), length: 5 };
  assert.deepEqual([...densify([a, b], 5, 0.5)], [0.5, 0, 0, 3, -0.5]);
  assert.throws(() => densify([{ ...a, indices: Uint32Array.of(0, 5) }], 5, 1), /out of range/);
  assert.equal(checkSparseUpdate(a.indices, a.values, 5), null);
  assert.match(checkSparseUpdate(Uint32Array.of(3, 3), Float32Array.of(1, 1), 5)!, /increasing/);
  assert.match(checkSparseUpdate(Uint32Array.of(1), Float32Array.of(NaN), 5)!, /finite/);
  assert.match(checkSparseUpdate(Uint32Array.of(9), Float32Array.of(1), 5)!, /range/);
});

// ---- the compressor ---------------------------------------------------------------------------------

/** Indices of the exact top k by |x| (ties → lower index), ascending. */
function hostTopK(x: ArrayLike<number>, k: number): number[] {
  const order = Array.from({ length: x.length }, (_, i) => i).filter((i) => Math.abs(x[i]) >= FLT_MIN);
  order.sort((a, b) => Math.abs(x[b]) - Math.abs(x[a]) || a - b);
  return order.slice(0, k).sort((a, b) => a - b);
}

const cfg = (over: Partial<DgcConfig> = {}): DgcConfig => ({ momentum: 0, clipNorm: 0, finalSparsity: 0.999, warmupSteps: 0, ...over });

test('compress sends exactly the top k (ties → lower index) for 75%, 99%, 99.9% on random and heavy-tailed vectors', async () => {
  const L = 203_530;
  const rng = new Rng(6);
  const vectors: Record<string, Float32Array> = {
    normal: values(rng, L, 'normal'),
    heavy: values(rng, L, 'heavy'),
    quantized: Float32Array.from({ length: L }, () => Math.round(rng.normal() * 3) / 4), // ties everywhere
  };
  for (const [name, be] of BACKENDS) {
    for (const [kind, x] of Object.entries(vectors)) {
      const xs = be.upload(x);
      for (const sparsity of [0.75, 0.99, 0.999]) {
        const c = new DgcCompressor(be, L, cfg({ finalSparsity: sparsity }));
        const up = await c.compress(xs, 0);
        const k = topKCount(L, sparsity);
        const what = `${name} ${kind} ${sparsity}: ${JSON.stringify(c.lastStats)}`;
        assert.equal(checkSparseUpdate(up.indices, up.values, L), null, what);
        assert.ok(up.indices.length >= Math.ceil(k / 2) && up.indices.length <= k, what);
        if (c.lastStats!.candidates >= k) assert.deepEqual([...up.indices], hostTopK(x, k), `${what}: the exact top k`);
        for (let j = 0; j < up.indices.length; j++) assert.equal(up.values[j], x[up.indices[j]], `${what}: values are v at the index`);
        assert.equal(up.sparsity, sparsity);
        assert.equal(up.threshold, Math.min(...[...up.values].map(Math.abs)));
        c.dispose();
      }
      be.release(xs);
    }
  }
});

test('corrections: all-equal values (ties over capacity) and a mostly-zero vector still give the right sets', async () => {
  const L = 50_021;
  for (const [name, be] of BACKENDS) {
    const flat = be.upload(new Float32Array(L).fill(-2));
    const c = new DgcCompressor(be, L, cfg({ finalSparsity: 0.99 }));
    const up = await c.compress(flat, 0);
    const k = topKCount(L, 0.99);
    assert.deepEqual([...up.indices], Array.from({ length: k }, (_, i) => i), `${name}: ties go to the lowest indices`);
    assert.ok(c.lastStats!.passes > 1, `${name}: needed a correction`);
    // The mask takes exactly those k: the next call sends the next k.
    const zero = be.upload(new Float32Array(L));
    const up2 = await c.compress(zero, 1);
    assert.deepEqual([...up2.indices], Array.from({ length: k }, (_, i) => k + i), `${name}: masked ties are not resent`);

    const sparse = new Float32Array(L);
    for (let i = 17; i < L; i += 997) sparse[i] = (i % 2 ? 1 : -1) * (1 + i / L);
    const c2 = new DgcCompressor(be, L, cfg({ finalSparsity: 0.75 }));
    const up3 = await c2.compress(be.upload(sparse), 0);
    assert.deepEqual([...up3.indices], hostTopK(sparse, L), `${name}: every non-zero when fewer than k exist`);
    for (const s of [flat, zero]) be.release(s);
    c.dispose();
    c2.dispose();
  }
});

test('error feedback (momentum 0): Σ sent + residual v = Σ inputs, and the kernel masks what was sent', async () => {
  const L = 10_007, steps = 40;
  for (const [name, be] of BACKENDS) {
    const rng = new Rng(7);
    const c = new DgcCompressor(be, L, cfg({ finalSparsity: 0.99, warmupSteps: 16 }));
    const total = new Float64Array(L);
    const sent: { indices: Uint32Array; values: Float32Array; length: number }[] = [];
    let prev: Uint32Array | null = null;
    for (let t = 0; t < steps; t++) {
      const g = Float32Array.from({ length: L }, () => rng.normal() * (1 + (t % 3)));
      g.forEach((x, i) => (total[i] += x));
      const gs = be.upload(g);
      const up = await c.compress(gs, t);
      be.release(gs);
      assert.equal(up.indices.length, topKCount(L, sparsityAt(t, c.cfg)), `${name} step ${t}`);
      sent.push(up);
      if (prev && t === 20) {
        // v was zeroed at prev's indices by the fused mask before this step's g was added.
        const state = await c.readState(); // applies only the newest pending mask, on the host
        const inNew = new Set(up.indices);
        for (const i of prev) if (!inNew.has(i)) assert.ok(Math.abs(state.v[i] - g[i]) <= 1e-6 * (1 + Math.abs(g[i])), `${name}: masked then accumulated at ${i}`);
      }
      prev = up.indices;
    }
    const { v } = await c.readState();
    const sum = densify(sent, L, 1);
    for (let i = 0; i < L; i++) {
      const got = sum[i] + v[i];
      assert.ok(Math.abs(got - total[i]) <= 1e-4 + 1e-5 * Math.abs(total[i]), `${name} [${i}]: sent + residual ${got} vs inputs ${total[i]}`);
    }
    c.dispose();
  }
});

test('momentum correction, local clipping and factor masking match a straightforward host implementation', async () => {
  const L = 5003, steps = 12, m = 0.9;
  for (const [name, be] of BACKENDS) {
    const rng = new Rng(8);
    const clipNorm = 20; // ‖g‖ ≈ √L ≈ 71: clipping is active every step
    const c = new DgcCompressor(be, L, cfg({ momentum: m, clipNorm, finalSparsity: 0.99, warmupSteps: 8 }));
    const u = new Float64Array(L), v = new Float64Array(L);
    for (let t = 0; t < steps; t++) {
      const g = Float32Array.from({ length: L }, () => rng.normal() + (t % 2 ? 0.3 : -0.1));
      const norm = Math.sqrt(g.reduce((a, x) => a + x * x, 0));
      const scale = Math.min(1, clipNorm / norm);
      for (let i = 0; i < L; i++) {
        u[i] = m * u[i] + g[i] * scale;
        v[i] += u[i];
      }
      const gs = be.upload(g);
      const up = await c.compress(gs, t);
      be.release(gs);
      const k = topKCount(L, sparsityAt(t, c.cfg));
      const what = `${name} step ${t}`;
      assert.equal(up.indices.length, k, what);
      const sentSet = new Set(up.indices);
      assertClose(up.values, Array.from(up.indices, (i) => v[i]), `${what}: sent values are the host's v`, 1e-4, 1e-5);
      // A top k of the host's |v| up to rounding: nothing left behind is clearly larger than what went.
      const minSent = Math.min(...Array.from(up.indices, (i) => Math.abs(v[i])));
      let maxLeft = 0;
      for (let i = 0; i < L; i++) if (!sentSet.has(i)) maxLeft = Math.max(maxLeft, Math.abs(v[i]));
      assert.ok(maxLeft <= minSent * (1 + 1e-4) + 1e-6, `${what}: left ${maxLeft} > sent ${minSent}`);
      for (const i of up.indices) u[i] = v[i] = 0;
      const state = await c.readState();
      assertClose(state.v, v, `${what}: v`, 1e-4, 1e-4);
      assertClose(state.u!, u, `${what}: u`, 1e-4, 1e-4);
    }
    c.dispose();
  }
});

test('WebGPU: one submit and one readback per compress call, 4 dispatches (6 with clipping), no new buffers', async () => {
  const L = 203_530;
  const rng = new Rng(9);
  const g = gpu.upload(values(rng, L, 'normal'));
  for (const clipNorm of [0, 50]) {
    const c = new DgcCompressor(gpu, L, cfg({ momentum: clipNorm ? 0.9 : 0, clipNorm }));
    await c.compress(g, 0); // warm-up: pipelines, the result buffer, pooled scratch
    await c.compress(g, 1);
    const before = { ...gpu.rt.counters };
    const times: number[] = [];
    const calls = 10;
    for (let t = 2; t < 2 + calls; t++) {
      const b = { ...gpu.rt.counters };
      const t0 = performance.now();
      await c.compress(g, t);
      times.push(performance.now() - t0);
      const a = gpu.rt.counters;
      assert.equal(c.lastStats!.passes, 1, `step ${t}: ${JSON.stringify(c.lastStats)}`);
      assert.equal(a.readbacks - b.readbacks, 1, 'one readback');
      assert.equal(a.submits - b.submits, 1, 'one command buffer');
      assert.equal(a.dispatches - b.dispatches, clipNorm ? 6 : 4);
    }
    assert.equal(gpu.rt.counters.buffersCreated, before.buffersCreated, 'no buffers created after warm-up');
    times.sort((a, b) => a - b);
    console.log(`# DGC compress L=${L} 99.9% ${clipNorm ? 'momentum 0.9 + clipping' : 'momentum 0'} on ${gpu.description}: median ${times[calls >> 1].toFixed(2)} ms, min ${times[0].toFixed(2)} ms`);
    c.dispose();
  }
  gpu.release(g);
});

test('the compressor holds its buffers from construction: compressing through the warm-up allocates no more (a memory plan made after counts them)', async () => {
  const L = 50_000;
  const g = gpu.upload(values(new Rng(4), L, 'normal'));
  const live = gpu.memory().liveBytes;
  const c = new DgcCompressor(gpu, L, cfg({ finalSparsity: 0.98, warmupSteps: 8 }));
  const held = gpu.memory().liveBytes - live;
  // The accumulator, and the result buffer at the first sync's selection (75%: a quarter of L, doubled as capacity, two words a pair).
  assert.ok(held >= 4 * L + 4 * L, `the compressor holds ${held} B from construction`);
  for (let step = 0; step < 12; step++) {
    await c.compress(g, step);
    // Before: the result buffer was allocated at the first compress.
    assert.equal(gpu.memory().liveBytes - live, held, `step ${step}, sparsity ${sparsityAt(step, c.cfg)}`);
  }
  c.dispose();
  gpu.release(g);
});

test('reset zeroes the state; compress validates its input', async () => {
  for (const [name, be] of BACKENDS) {
    const L = 1000;
    const c = new DgcCompressor(be, L, cfg({ momentum: 0.9, finalSparsity: 0.9 }));
    const g = be.upload(Float32Array.from({ length: L }, (_, i) => Math.sin(i)));
    await c.compress(g, 0);
    c.reset();
    const s = await c.readState();
    assert.ok(s.v.every((x) => x === 0) && s.u!.every((x) => x === 0), name);
    await assert.rejects(c.compress(be.upload(new Float32Array(10)), 0), /expected 1000/);
    c.dispose();
    await assert.rejects(c.compress(g, 1), /dispose/);
    assert.throws(() => new DgcCompressor(be, 0, cfg()), /length/);
  }
});
