import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mulberry32 } from './random';
import { aggregateWith, cappedWeights, centeredClip, combinePart, coordinateMedian, l2norm, mean, partRange, screenContributions, trimmedMean } from './robust';

const f = (...xs: number[]) => Float32Array.from(xs);

/** `n` honest vectors: `center` plus Gaussian noise of standard deviation `sigma` per coordinate. */
function honest(n: number, center: Float32Array, sigma: number, seed: number): Float32Array[] {
  const rand = mulberry32(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  return Array.from({ length: n }, () => center.map((c) => c + sigma * gauss()));
}

function distance(a: Float32Array, b: Float32Array): number {
  return l2norm(a.map((x, i) => x - b[i]));
}

test('mean, median and trimmed mean per coordinate', () => {
  const xs = [f(1, 10), f(2, 20), f(3, 30), f(100, -1000)];
  assert.deepEqual([...mean(xs)], [26.5, -235]);
  assert.deepEqual([...coordinateMedian(xs)], [2.5, 15]);
  assert.deepEqual([...coordinateMedian(xs.slice(0, 3))], [2, 20]);
  // ⌊0.25 · 4⌋ = 1 dropped at each end: the middle two remain.
  assert.deepEqual([...trimmedMean(xs, 0.25)], [2.5, 15]);
  assert.deepEqual([...trimmedMean(xs, 0)], [...mean(xs)]);
  assert.deepEqual([...aggregateWith('trimmed-mean', xs, { trimFraction: 0.25 })], [2.5, 15]);
});

test('screening refuses a wrong length, non-finite values and a norm far above the median, and nothing else', () => {
  const xs = [f(1, 1), f(1.2, 0.9), f(0.8, 1.1), f(NaN, 1), f(1, Infinity), f(100, 100), f(1, 1, 1)];
  const s = screenContributions(xs, 2);
  assert.deepEqual(s.accepted, [0, 1, 2]);
  assert.deepEqual(s.refused.map((r) => r.index), [3, 4, 5, 6]);
  assert.match(s.refused.find((r) => r.index === 5)!.reason, /above/);
  assert.match(s.refused.find((r) => r.index === 3)!.reason, /NaN/);
  // Two finite contributions cannot be told apart by norm; a round of zeros refuses nothing by norm.
  assert.deepEqual(screenContributions([f(1, 1), f(1000, 1000)], 2).accepted, [0, 1]);
  assert.deepEqual(screenContributions([f(0, 0), f(0, 0), f(0, 0), f(0, 1)], 2).accepted, [0, 1, 2, 3]);
});

test('centered clip: near the mean without attackers, near the honest mean with a minority of them', () => {
  const center = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i));
  const clean = honest(16, center, 0.5, 7);
  // An honest vector lies about σ√d = 4 from the center; their mean about σ√(d/n) = 1 from it.
  const honestDistance = 0.5 * Math.sqrt(64);
  // Clipping moves honest groups a little off their mean: 0.097 measured at τ = 0.75 × the median
  // distance, a tenth of the mean's own sampling error.
  assert.ok(distance(centeredClip(clean), mean(clean)) < 0.15, `without attackers: ${distance(centeredClip(clean), mean(clean))} from the mean`);
  const honestMean = mean(clean.slice(0, 11));
  for (const [name, attack] of [
    ['scaled ×100', (x: Float32Array) => x.map((v) => v * 100)],
    ['sign flip ×10', (x: Float32Array) => x.map((v) => -10 * v)],
    ['constant 1e4', (x: Float32Array) => x.map(() => 1e4)],
  ] as const) {
    const xs = [...clean.slice(0, 11), ...clean.slice(11).map(attack)];
    const robust = centeredClip(xs);
    const plain = mean(xs);
    // CenteredClip's bound is of order √(f/n) honest distances (2.24 here); measured 1.6–2.0.
    assert.ok(distance(robust, honestMean) < 1.5 * Math.sqrt(5 / 16) * honestDistance, `${name}: ${distance(robust, honestMean)}`);
    assert.ok(distance(plain, honestMean) > 5 * distance(robust, honestMean), `${name}: the plain mean is moved (${distance(plain, honestMean)})`);
  }
});

test('the rules are deterministic: the same contributions give the same bits', () => {
  const xs = honest(7, new Float32Array(1000).fill(0.25), 1, 3);
  for (const rule of ['mean', 'centered-clip', 'trimmed-mean', 'median'] as const) {
    assert.deepEqual(new Uint32Array(aggregateWith(rule, xs).buffer), new Uint32Array(aggregateWith(rule, xs.map((x) => x.slice())).buffer), rule);
  }
});

test('weights (paced rounds): untrusted jobs cap them at their median; equal weights give the unweighted rule bit for bit', () => {
  assert.deepEqual(cappedWeights([8, 8, 8, 4, 4, 2, 2, 1]), [4, 4, 4, 4, 4, 2, 2, 1]);
  const xs = honest(7, f(1, -2, 3), 0.5, 11);
  for (const rule of ['mean', 'median', 'trimmed-mean', 'centered-clip'] as const) {
    assert.deepEqual([...aggregateWith(rule, xs, { weights: xs.map(() => 3) })], [...aggregateWith(rule, xs)], rule);
  }
});

test('weighted rules: a contribution of weight w counts as w votes', () => {
  // Weights 2, 2, 1 (at most their median 2, so the cap changes nothing).
  const xs = [f(0, 10), f(3, 20), f(6, 30)];
  const w = [2, 2, 1];
  assert.deepEqual([...aggregateWith('mean', xs, { weights: w })], [(0 * 2 + 3 * 2 + 6) / 5, (10 * 2 + 20 * 2 + 30) / 5].map(Math.fround));
  // The same as the unweighted rules over [x0, x0, x1, x1, x2].
  const repeated = [xs[0], xs[0], xs[1], xs[1], xs[2]];
  assert.deepEqual([...aggregateWith('median', xs, { weights: w })], [...coordinateMedian(repeated)]);
  assert.deepEqual([...aggregateWith('median', [f(1), f(2), f(3), f(4)], { weights: [2, 1, 1, 2] })], [2.5], 'stretches meeting at the middle: their mean');
  // Trim 0.2 of 5 votes = one vote at each end: the mean of x0, x1, x1.
  assert.deepEqual([...aggregateWith('trimmed-mean', xs, { weights: w, trimFraction: 0.2 })], [...trimmedMean(repeated, 0.2)]);
  // An attacker with little weight moves the weighted CenteredClip less than the unweighted one.
  const honestOnes = honest(6, f(1, 1, 1, 1), 0.1, 5);
  const attacked = [...honestOnes, f(-50, -50, -50, -50)];
  const truth = mean(honestOnes);
  const unweighted = distance(aggregateWith('centered-clip', attacked), truth);
  const weighted = distance(aggregateWith('centered-clip', attacked, { weights: [4, 4, 4, 4, 4, 4, 1] }), truth);
  assert.ok(weighted < unweighted, `weighted ${weighted} vs unweighted ${unweighted}`);
  // combinePart passes the weights of the contributions it accepts.
  const { aggregate, refused } = combinePart([f(0), f(3), f(Number.NaN), f(6)], 1, 'mean', { weights: [2, 2, 9, 1] });
  assert.deepEqual(refused.map((r) => r.index), [2]);
  assert.deepEqual([...aggregate!], [Math.fround(12 / 5)], '(0·2 + 3·2 + 6·1) / 5');
  assert.throws(() => aggregateWith('mean', xs, { weights: [1, 2] }), /2 weights for 3 contributions/);
});

test('partRange: whole blocks with a block size, the old even split without; parts tile the vector', () => {
  assert.deepEqual([0, 1, 2].map((j) => partRange(10, 3, j)), [{ start: 0, end: 3 }, { start: 3, end: 6 }, { start: 6, end: 10 }]);
  for (const [length, n] of [[1000, 3], [64 * 16, 16], [65, 4], [5, 2]]) {
    const parts = Array.from({ length: n }, (_, j) => partRange(length, n, j, 64));
    assert.equal(parts[0].start, 0);
    assert.equal(parts[n - 1].end, length);
    parts.forEach((p, j) => {
      assert.equal(p.start % 64, 0, `part ${j} of ${length} starts on a block`);
      if (j > 0) assert.equal(p.start, parts[j - 1].end);
    });
  }
  // 1000 values are 16 blocks (the last of 40): 5, 5 and 6 blocks.
  assert.deepEqual([0, 1, 2].map((j) => partRange(1000, 3, j, 64)), [{ start: 0, end: 320 }, { start: 320, end: 640 }, { start: 640, end: 1000 }]);
});
