// Attackers as code: what a Byzantine or broken member sends in place of its honest contribution,
// for tests and the byzantine benchmark. The omniscient attacks (ALIE, IPM) see the honest
// members' contributions of the round, as colluding attackers that share notes would. Label flipping
// is not here: it changes what the member trains on (`flipLabels`), not what it sends. In robust
// grouped runs (`groupAttacker`) an attacker sees only its own group's members.
//
// One adaptive attack: 'slow-drift' stays inside CenteredClip's radius every sync (so neither the norm
// screen nor the clip touches it) and pushes the same way every sync, so its small bias adds up.
import { CLIP_RADIUS_FACTOR, l2norm, mulberry32 } from '@tabfleet/protocol';
import type { Tamper } from './simulate';
import type { Payload } from './strategies';

export const ATTACKS = ['sign-flip', 'scaled', 'noise', 'non-finite', 'alie', 'ipm', 'free-rider', 'label-flip', 'slow-drift'] as const;
/** The attacks that keep no state between syncs (all but the adaptive slow drift). */
export const STATIC_ATTACKS = ATTACKS.filter((a) => a !== 'slow-drift');
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
  /** slow-drift: the unit direction the attackers push along, fixed for the run (absent: against this round's honest mean). */
  direction?: Float32Array;
}

/** ×100, as in the issue: big enough to ruin a mean, small enough to pass a loose norm screen. */
export const SCALE = 100;
/** Gaussian noise of this many times the honest contribution's RMS per coordinate. */
export const NOISE_RMS = 10;
/** IPM's ε (Xie, Koyejo, Gupta 2020): attackers send −ε times the honest mean. */
export const IPM_EPSILON = 0.5;
/**
 * slow-drift's offset from the honest mean, as a share of its estimate of CenteredClip's radius
 * (CLIP_RADIUS_FACTOR × the honest members' median distance from their mean): inside it, so unclipped.
 */
export const DRIFT_RADIUS_SHARE = 0.9;

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
    case 'slow-drift': return slowDrift(ctx);
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

/**
 * Slow poisoning (the adaptive attack c): the honest mean μ of the attacker's group plus
 * DRIFT_RADIUS_SHARE × τ̂ along a fixed unit direction d, τ̂ the clip radius the attackers estimate
 * from the honest members (CLIP_RADIUS_FACTOR × their median distance from μ). Closer to the centre
 * than a typical honest member, it passes the norm screen and CenteredClip takes it whole; the same d
 * every sync turns an unremarkable bias of about (f/n)·0.9·τ̂ per sync into a drift.
 */
export function slowDrift(ctx: AttackContext): Float32Array {
  const mean = coordinateMoments(ctx.honest).mean;
  const distances = ctx.honest.map((h) => l2norm(h.map((v, i) => v - mean[i])));
  const radius = CLIP_RADIUS_FACTOR * medianOf(distances);
  const direction = ctx.direction ?? unit(mean.map((v) => -v));
  if (direction.length !== mean.length) throw new Error(`drift direction of ${direction.length} values for payloads of ${mean.length}`);
  return mean.map((m, i) => m + DRIFT_RADIUS_SHARE * radius * direction[i]);
}

/** The drift direction the slow-drift attackers agree on: against the first honest mean they see. */
export function driftDirection(honest: readonly Float32Array[]): Float32Array {
  return unit(coordinateMoments(honest).mean.map((v) => -v));
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
  let direction: Float32Array | undefined;
  return (payloads, seq) => {
    const members = payloads.length;
    if (!(attackers >= 0 && attackers < members)) throw new Error(`${attackers} attackers among ${members} members`);
    const dense = payloads.map((p, rank) => {
      if (p.kind !== 'dense') throw new Error(`member ${rank} sends a sparse payload: attacks replace dense ones`);
      return p.values;
    });
    const honest = dense.slice(0, members - attackers);
    if (attack === 'slow-drift' && attackers > 0) direction ??= driftDirection(honest);
    return payloads.map((p, rank) => {
      if (rank < members - attackers) return p;
      const values = attackPayload(attack, { own: dense[rank], honest, members, attackers, seed: (seed * 100_003 + seq) * 1009 + rank, direction });
      return { ...p, values } as Payload;
    });
  };
}

/**
 * `payloadAttacker` for robust grouped runs: the members named in `attackerIds` attack, each seeing
 * only its own group (the runner calls this once per group with the group's ids): ALIE, IPM and the
 * slow drift read the honest members of that group. A group of attackers only reads their own
 * honest updates. The slow drift's direction is fixed at the first group that holds an attacker.
 */
export function groupAttacker(attack: PayloadAttack, attackerIds: readonly string[], seed: number): Tamper {
  const rankOf = new Map(attackerIds.map((id, rank) => [id, rank]));
  let direction: Float32Array | undefined;
  return (payloads, seq, ids) => {
    if (!ids || ids.length !== payloads.length) throw new Error('groupAttacker needs the members\' ids, one per payload');
    const dense = payloads.map((p, k) => {
      if (p.kind !== 'dense') throw new Error(`member ${ids[k]} sends a sparse payload: attacks replace dense ones`);
      return p.values;
    });
    const attacking = ids.map((id) => rankOf.has(id));
    const attackers = attacking.filter(Boolean).length;
    if (attackers === 0) return [...payloads];
    const honestOnes = dense.filter((_, k) => !attacking[k]);
    const honest = honestOnes.length ? honestOnes : dense;
    if (attack === 'slow-drift') direction ??= driftDirection(honest);
    return payloads.map((p, k) => {
      if (!attacking[k]) return p;
      const values = attackPayload(attack, {
        own: dense[k], honest, members: payloads.length, attackers, seed: (seed * 100_003 + seq) * 1009 + rankOf.get(ids[k])!, direction,
      });
      return { ...p, values } as Payload;
    });
  };
}

function unit(v: Float32Array): Float32Array {
  const norm = l2norm(v);
  return norm > 0 ? v.map((x) => x / norm) : v;
}

function medianOf(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
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
