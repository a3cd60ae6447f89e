// Attackers as code: what a Byzantine or broken member sends in place of its honest contribution,
// for tests and the byzantine benchmark. The omniscient attacks (ALIE, IPM) see the honest
// members' contributions of the round, as colluding attackers that share notes would. Label flipping
// is not here: it changes what the member trains on (`flipLabels`), not what it sends.
import { mulberry32 } from '@tabfleet/protocol';
import type { Tamper } from './simulate';
import type { Payload } from './strategies';

export const ATTACKS = ['sign-flip', 'scaled', 'noise', 'non-finite', 'alie', 'ipm', 'free-rider', 'label-flip'] as const;
export type Attack = (typeof ATTACKS)[number];

/** The attacks that replace the payload (label-flip trains on wrong labels instead). */
export type PayloadAttack = Exclude<Attack, 'label-flip'>;

export interface AttackContext {
  /** This attacker's honest contribution. */
  own: Float32Array;
  /** The honest members' contributions of this round. */
  honest: readonly Float32Array[];
  /** Members of the round, and how many of them attack. */
  members: number;
  attackers: number;
  seed: number;
}

/** ×100, as in the issue: big enough to ruin a mean, small enough to pass a loose norm screen. */
export const SCALE = 100;
/** Gaussian noise of this many times the honest contribution's RMS per coordinate. */
export const NOISE_RMS = 10;
/** IPM's ε (Xie, Koyejo, Gupta 2020): attackers send −ε times the honest mean. */
export const IPM_EPSILON = 0.5;

export function attackPayload(attack: PayloadAttack, ctx: AttackContext): Float32Array {
  const { own } = ctx;
  switch (attack) {
    case 'sign-flip': return own.map((v) => -v);
    case 'scaled': return own.map((v) => SCALE * v);
    case 'noise': {
      const rand = mulberry32(ctx.seed);
      const sigma = NOISE_RMS * rms(own);
      return own.map((v) => v + sigma * gaussian(rand));
    }
    case 'non-finite': return own.map((_, i) => (i % 2 ? NaN : Infinity));
    case 'alie': return alie(ctx);
    case 'ipm': {
      const mean = coordinateMoments(ctx.honest).mean;
      return mean.map((v) => -IPM_EPSILON * v);
    }
    case 'free-rider': return new Float32Array(own.length);
    default: throw new Error(`unknown attack ${String(attack)}`);
  }
}

/**
 * "A little is enough" (Baruch, Baruch, Goldberg 2019): every attacker sends μ − z·σ per coordinate,
 * z the largest shift that still hides among the honest spread: Φ(z) = (n − s)/n with
 * s = ⌊n/2 + 1⌋ − f honest members the attackers need on their side.
 */
export function alie(ctx: AttackContext): Float32Array {
  const n = ctx.members;
  const s = Math.floor(n / 2 + 1) - ctx.attackers;
  const z = inverseNormal(Math.min(0.999, Math.max(0.5, (n - s) / n)));
  const { mean, std } = coordinateMoments(ctx.honest);
  return mean.map((m, i) => m - z * std[i]);
}

/** A training set whose labels are flipped (class c becomes classes − 1 − c): what a label-flipping member trains on. */
export function flipLabels<T extends Uint8Array | Int32Array>(labels: T, classes: number): T {
  return labels.map((c) => classes - 1 - c) as T;
}

/**
 * What `runSyncs` calls between the members' local work and the exchange (its `tamper` option) so
 * that the last `attackers` members send `attack`'s payload instead of their own. The others' dense
 * payloads are the honest contributions ALIE and IPM read. Each attacker draws its noise from
 * (seed, sync, rank), so a run replays.
 */
export function payloadAttacker(attack: PayloadAttack, attackers: number, seed: number): Tamper {
  return (payloads, seq) => {
    const members = payloads.length;
    if (!(attackers >= 0 && attackers < members)) throw new Error(`${attackers} attackers among ${members} members`);
    const dense = payloads.map((p, rank) => {
      if (p.kind !== 'dense') throw new Error(`member ${rank} sends a sparse payload: attacks replace dense ones`);
      return p.values;
    });
    const honest = dense.slice(0, members - attackers);
    return payloads.map((p, rank) => {
      if (rank < members - attackers) return p;
      const values = attackPayload(attack, { own: dense[rank], honest, members, attackers, seed: (seed * 100_003 + seq) * 1009 + rank });
      return { ...p, values } as Payload;
    });
  };
}

function coordinateMoments(xs: readonly Float32Array[]): { mean: Float32Array; std: Float32Array } {
  const n = xs[0].length;
  const mean = new Float32Array(n);
  const std = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (const x of xs) s += x[i];
    const m = s / xs.length;
    let v = 0;
    for (const x of xs) v += (x[i] - m) ** 2;
    mean[i] = m;
    std[i] = Math.sqrt(v / xs.length);
  }
  return { mean, std };
}

function rms(x: Float32Array): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i] * x[i];
  return Math.sqrt(s / Math.max(1, x.length));
}

function gaussian(rand: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

/** Φ⁻¹(p) for 0 < p < 1 (Acklam's rational approximation, relative error below 1.2e-9). */
export function inverseNormal(p: number): number {
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const low = 0.02425;
  if (p < low) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - low) return -inverseNormal(1 - p);
  const q = p - 0.5;
  const r = q * q;
  return ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}
