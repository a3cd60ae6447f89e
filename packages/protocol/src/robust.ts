// Byzantine-robust aggregation of members' contributions (f32 vectors of one length): the screening
// every contribution passes first, and the rules a job chooses. Shared by the owners of group
// averaging (collective) and the server's star fallback, so both refuse and combine alike.
//
// `combinePart` is the whole of what an owner does to its part, so a validator recomputing the part
// and the server settling a dispute run exactly the owner's code.
//
// Deterministic: the same contributions in the same order give the same bits in any JS engine (f64
// accumulation, a fixed order, only IEEE-exact operations and Math.sqrt), so a validator that
// recomputes an owner's aggregate can compare digests rather than values within a tolerance.

import { roundToF16 } from './fp16';

/** The rules a job may choose; `centered-clip` is the default of untrusted jobs. */
export const AGGREGATIONS = ['mean', 'centered-clip', 'trimmed-mean', 'median'] as const;
export type Aggregation = (typeof AGGREGATIONS)[number];

/** A contribution whose norm exceeds this multiple of the median norm of the round's contributions is refused. */
export const NORM_BOUND_FACTOR = 10;
/** Screening by norm needs this many finite contributions (with two, neither can be told wrong). */
export const NORM_SCREEN_MIN = 3;
/**
 * CenteredClip (Karimireddy, He, Jaggi 2021): v ← v + mean_i(clip(x_i − v, τ)), started from the
 * coordinate-wise median. τ is this factor times the median distance of the contributions from v,
 * re-taken each iteration, so it scales with the round's own spread rather than a constant tuned
 * for one model. 0.75 was chosen on the validation split by `npm run bench -- clip`
 * (bench/results/clip.json): its lowest attacked validation accuracy (16 members, f ≤ 7) is 77.7%,
 * against 74.5% at 1.25 and 76.4% at 0.5. At 1.25 the radius reached past all 7 sign-flippers
 * (honest LocalSGD deltas spread about 0.5× their mean's norm, the flippers sit about 2× away), so
 * nothing was clipped. Honest groups lose nothing measurable: 82.3% at 0.75 against 82.2% at 1.25
 * with 16 members, and with 3 members 85.4% against the plain mean's 85.3%.
 */
export const CLIP_RADIUS_FACTOR = 0.75;
export const CLIP_ITERATIONS = 3;

export interface RuleOptions {
  /** trimmed-mean: the fraction of values dropped at each end of every coordinate (default 0.25). */
  trimFraction?: number;
  /**
   * Paced rounds: each contribution's weight (its samples), in the contributions' order; untrusted
   * jobs cap them first (`cappedWeights`). All equal (or absent) gives the unweighted rule, bit for bit.
   */
  weights?: readonly number[];
}

export interface Screening {
  /** Indices of the contributions that may be combined, in order. */
  accepted: number[];
  /** Refused contributions: their senders are at fault. */
  refused: { index: number; reason: string }[];
}

/**
 * Part `j` of a vector of `length` cut among a group of `n` (the owner of part j is member j): [start,
 * end). With `block` > 1 the parts are whole blocks (the last one may end short): quantized
 * contributions (quantize.ts) then split along their own scale blocks.
 */
export function partRange(length: number, n: number, j: number, block = 1): { start: number; end: number } {
  const blocks = Math.ceil(length / block);
  return { start: Math.min(length, block * Math.floor((j * blocks) / n)), end: Math.min(length, block * Math.floor(((j + 1) * blocks) / n)) };
}

export interface CombinedPart {
  /** Null when every contribution was refused. */
  aggregate: Float32Array | null;
  /** Refused contributions, by sender index. */
  refused: Screening['refused'];
}

/**
 * What a group's owner makes of the contributions to its part (one per member, in member order, as
 * they went on the wire): screen them, combine the accepted ones with `rule`, round to the wire's
 * precision.
 */
export function combinePart(parts: readonly Float32Array[], length: number, rule: Aggregation, opts: RuleOptions & { f16?: boolean } = {}): CombinedPart {
  const { accepted, refused } = screenContributions(parts, length);
  if (accepted.length === 0) return { aggregate: null, refused };
  const weights = opts.weights && accepted.map((i) => opts.weights![i]);
  const aggregate = length === 0 ? new Float32Array(0) : aggregateWith(rule, accepted.map((i) => parts[i]), { ...opts, weights });
  if (opts.f16) roundToF16(aggregate, 0, aggregate.length);
  return { aggregate, refused };
}

export function l2norm(v: Float32Array): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  return Math.sqrt(s);
}

/** Refuses contributions of the wrong length, with a non-finite value, or with a norm far above the round's median. */
export function screenContributions(xs: readonly Float32Array[], length: number): Screening {
  const refused: Screening['refused'] = [];
  const finite: number[] = [];
  xs.forEach((x, index) => {
    if (x.length !== length) return refused.push({ index, reason: `${x.length} values where the part has ${length}` });
    for (let i = 0; i < x.length; i++) {
      if (!Number.isFinite(x[i])) return refused.push({ index, reason: `value ${i} is ${x[i]}` });
    }
    finite.push(index);
  });
  if (finite.length < NORM_SCREEN_MIN) return { accepted: finite, refused };
  const norms = new Map(finite.map((i) => [i, l2norm(xs[i])]));
  const bound = NORM_BOUND_FACTOR * median([...norms.values()]);
  const accepted: number[] = [];
  for (const i of finite) {
    const norm = norms.get(i)!;
    // A round whose median is 0 (a sparse part nobody touched) refuses nothing by norm.
    if (bound > 0 && norm > bound) refused.push({ index: i, reason: `norm ${norm.toPrecision(4)} above ${bound.toPrecision(4)} (${NORM_BOUND_FACTOR} × the median)` });
    else accepted.push(i);
  }
  refused.sort((a, b) => a.index - b.index);
  return { accepted, refused };
}

/**
 * Weights for the robust rules of untrusted jobs: none above the median weight, so a member that
 * claims a fast pace (and is given many steps) cannot outweigh the typical member; slower members
 * still weigh less. Every party (owners, validators, the server) caps the whole group's weights alike.
 */
export function cappedWeights(weights: readonly number[]): number[] {
  const m = median(weights);
  return weights.map((w) => Math.min(w, m));
}

/** Combines screened contributions (at least one, all of one length) with `rule`. */
export function aggregateWith(rule: Aggregation, xs: readonly Float32Array[], opts: RuleOptions = {}): Float32Array {
  if (xs.length === 0) throw new Error('nothing to aggregate');
  const w = opts.weights;
  if (w && w.length !== xs.length) throw new Error(`${w.length} weights for ${xs.length} contributions`);
  if (w && !w.every((x) => Number.isFinite(x) && x > 0)) throw new Error('weights must be positive');
  if (w && w.some((x) => x !== w[0])) return weightedAggregate(rule, xs, w, opts.trimFraction ?? 0.25);
  switch (rule) {
    case 'mean': return mean(xs);
    case 'median': return coordinateMedian(xs);
    case 'trimmed-mean': return trimmedMean(xs, opts.trimFraction ?? 0.25);
    case 'centered-clip': return centeredClip(xs);
    default: throw new Error(`unknown aggregation ${String(rule)}`);
  }
}

export function mean(xs: readonly Float32Array[]): Float32Array {
  const n = xs[0].length;
  const sum = new Float64Array(n);
  for (const x of xs) for (let i = 0; i < n; i++) sum[i] += x[i];
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = sum[i] / xs.length;
  return out;
}

/** Per coordinate, the mean of the values left after dropping ⌊trim·n⌋ at each end (at most all but the middle one or two). */
export function trimmedMean(xs: readonly Float32Array[], trim: number): Float32Array {
  const n = xs.length;
  const k = Math.min(Math.floor(n * trim), Math.floor((n - 1) / 2));
  if (k === 0) return mean(xs);
  return perCoordinate(xs, (column) => {
    let s = 0;
    for (let j = k; j < n - k; j++) s += column[j];
    return s / (n - 2 * k);
  });
}

/** Per coordinate, the median (the mean of the middle two for an even count). */
export function coordinateMedian(xs: readonly Float32Array[]): Float32Array {
  const n = xs.length;
  return perCoordinate(xs, (column) => (n % 2 ? column[n >> 1] : (column[n / 2 - 1] + column[n / 2]) / 2));
}

/**
 * CenteredClip from the coordinate-wise median; see CLIP_RADIUS_FACTOR. With `weights` (paced rounds):
 * from the weighted median, v ← v + Σ w_j clip(x_j − v, τ) / Σ w (without, every w_j is 1: the same bits).
 */
export function centeredClip(
  xs: readonly Float32Array[],
  { radiusFactor = CLIP_RADIUS_FACTOR, iterations = CLIP_ITERATIONS, weights }: { radiusFactor?: number; iterations?: number; weights?: readonly number[] } = {},
): Float32Array {
  const n = xs[0].length;
  const total = weights ? weights.reduce((a, b) => a + b, 0) : xs.length;
  const v = Float64Array.from(weights ? weightedQuantiles(xs, weights, 0.5) : coordinateMedian(xs));
  const step = new Float64Array(n);
  const distances = new Array<number>(xs.length);
  for (let it = 0; it < iterations; it++) {
    xs.forEach((x, j) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += (x[i] - v[i]) ** 2;
      distances[j] = Math.sqrt(s);
    });
    const tau = radiusFactor * median(distances);
    if (!(tau > 0)) break; // most contributions sit on v already
    step.fill(0);
    xs.forEach((x, j) => {
      const scale = (weights ? weights[j] : 1) * Math.min(1, tau / distances[j]);
      for (let i = 0; i < n; i++) step[i] += (x[i] - v[i]) * scale;
    });
    for (let i = 0; i < n; i++) v[i] += step[i] / total;
  }
  return Float32Array.from(v);
}

/** The weighted rules (see aggregateWith): a contribution of weight w counts as w of the unweighted rule's votes. */
function weightedAggregate(rule: Aggregation, xs: readonly Float32Array[], w: readonly number[], trim: number): Float32Array {
  switch (rule) {
    case 'mean': return weightedMean(xs, w);
    case 'median': return weightedQuantiles(xs, w, 0.5);
    case 'trimmed-mean': return weightedQuantiles(xs, w, Math.min(trim, 0.5));
    case 'centered-clip': return centeredClip(xs, { weights: w });
    default: throw new Error(`unknown aggregation ${String(rule)}`);
  }
}

function weightedMean(xs: readonly Float32Array[], w: readonly number[]): Float32Array {
  const n = xs[0].length, total = w.reduce((a, b) => a + b, 0);
  const sum = new Float64Array(n);
  xs.forEach((x, j) => {
    for (let i = 0; i < n; i++) sum[i] += w[j] * x[i];
  });
  return Float32Array.from(sum, (v) => v / total);
}

/**
 * Per coordinate, the mean of the values between weight quantiles `trim` and 1 − `trim` (each value
 * covering its weight's stretch of the sorted order, cut where the quantiles fall): the weighted
 * trimmed mean; at `trim` = 0.5, the weighted median (the value at the middle, or the mean of the two
 * values meeting there).
 */
function weightedQuantiles(xs: readonly Float32Array[], w: readonly number[], trim: number): Float32Array {
  const n = xs[0].length, k = xs.length, total = w.reduce((a, b) => a + b, 0);
  const lo = trim * total, hi = (1 - trim) * total;
  const out = new Float32Array(n);
  const order = Array.from({ length: k }, (_, j) => j);
  for (let i = 0; i < n; i++) {
    order.sort((a, b) => xs[a][i] - xs[b][i] || a - b);
    if (hi <= lo) {
      // The median: the value whose stretch holds the middle (where two stretches meet at it, their mean).
      const half = total / 2;
      let at = 0;
      for (let r = 0; r < k; r++) {
        const j = order[r], before = at;
        at += w[j];
        if (at > half) {
          out[i] = before === half && r > 0 ? (xs[order[r - 1]][i] + xs[j][i]) / 2 : xs[j][i];
          break;
        }
      }
      continue;
    }
    let at = 0, s = 0, mass = 0;
    for (const j of order) {
      const kept = Math.max(0, Math.min(at + w[j], hi) - Math.max(at, lo));
      s += kept * xs[j][i];
      mass += kept;
      at += w[j];
    }
    out[i] = s / mass;
  }
  return out;
}

function perCoordinate(xs: readonly Float32Array[], reduceSorted: (column: Float64Array) => number): Float32Array {
  const n = xs[0].length;
  const out = new Float32Array(n);
  const column = new Float64Array(xs.length);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < xs.length; j++) column[j] = xs[j][i];
    column.sort();
    out[i] = reduceSorted(column);
  }
  return out;
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
