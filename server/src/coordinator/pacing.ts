// Paced rounds: each member does as many local steps per sync as fit the round's time budget at its
// measured pace, so a tab 4× slower does a quarter of the steps instead of holding the others idle
// for three quarters of every round. Its contribution is weighted by its samples (round:begin names
// every member's steps). The budget is the job's `roundBudgetMs`, or by default:
//  - H steps of the fastest member, and at least EXCHANGE_BUDGET_FACTOR × what a sync costs beyond
//    its planned local work (the exchange, applying, reports, members' overruns: SyncTimeModel's
//    median overhead; before one is measured, and in Moshpit jobs, the median round), so that it is
//    at most a twentieth of a sync: members also wait for the latest of them (each ends up to half a
//    step off the budget), so a tenth for the overhead left them busy only 0.81–0.88 of the time
//    (bench/results/heterogeneous.json of 11-27 03:23);
//  - but no longer than the fastest member's most steps (MAX_STEPS_FACTOR × H) take: past that it
//    would only wait;
//  - snapped to whole steps of the slowest member one of whose steps fits in twice that (two of
//    them, SLOWEST_MEMBER_STEPS, where those fit); past the cap above only where one step fewer
//    would cost the fastest member more than it waits.
//    A member stops when less than half a step still fits, so each ends up to half a step off the
//    budget, and the sync waits for the latest: one step of an 8× member in a budget of H fast
//    steps cost up to a third of the sync; snapped to two of its steps, it ends on the budget. The
//    factor 2 keeps a noisy or throttled pace from more than doubling everyone's work; a member
//    slower than that does one step (the sync waits for it, or leaves it out as a straggler).
// The last two are for rings, auto's budget too: a Moshpit job keeps the first (snappedBudgetMs).
// SyncTimeModel predicts each sync's time from the same measurements and keeps how wrong it was.
//
// Paced ddp: a member's steps are micro-batches of batchSize ÷ DDP_MICRO_BATCHES examples, and the
// round's budget is the time in which the members together compute N × DDP_MICRO_BATCHES of them
// (each at its own pace), so the global batch stays what a fixed ddp job's is and each member's share
// of it follows its speed.
import { DDP_MICRO_BATCHES, nextPace, pacedStepCeiling, pacedStepFactor, type JobSpec } from '@tabfleet/protocol';

/**
 * A member does at most this many times the job's H steps per sync (its work drifts from the others'
 * beyond). At 4 the cap, not the overhead, set the Fashion-MNIST MLP's budget at H = 8 (32 steps of
 * ~24 ms against ~90 ms of overhead and waiting: busy 0.86 of the time).
 */
export const MAX_STEPS_FACTOR = 8;

export { nextPace };

/** A paced member's work is taken to have lasted at least this long (a pace of 0 would plan a budget of 0). */
const MIN_WORK_MS = 1;

/**
 * A paced member's time per step once it reported its result (protocol's nextPace over `steps`, the
 * steps the server counted for the work: those it was given, or fewer that it reported). The time is,
 * in an untrusted job, the server's own: from handing the member its work to its `round:ready`
 * (`workMs`; so it holds the payload's readback and a trip to the server too, as what the sync waits
 * for does). A member's `computeMs` is its word: claiming 1 ms got a member the most steps every sync
 * and, with a budget, a tiny budget for everyone (issue 34). Nor can it claim steps past those given
 * (pacedStepCeiling), so it can look faster only by being ready sooner. In a trusted job, its
 * `computeMs` (its local steps alone): its members are the researcher's own.
 */
export function measuredPace(spec: JobSpec, previous: number | null, work: { steps: number; workMs: number; computeMs: number }): number {
  return nextPace(previous, Math.max(MIN_WORK_MS, spec.trust === 'untrusted' ? work.workMs : work.computeMs), work.steps);
}

/** The default budget keeps a sync's overhead (the exchange and the rest, see the header) at most a twentieth of its time. */
export const EXCHANGE_BUDGET_FACTOR = 19;
/** The default budget holds this many whole steps of its slowest member where they fit twice the base (at most H). */
export const SLOWEST_MEMBER_STEPS = 2;

/** A member's steps per sync before its pace is known, and in a fixed job: H, or paced ddp's micro-batches. */
export function nominalSteps(spec: JobSpec): number {
  return pacedDdp(spec) ? DDP_MICRO_BATCHES : spec.H;
}

/** Without a time box (see unmeasuredWork), a paced member's first work is H ÷ this (see unmeasuredSteps). */
const FIRST_WORK_DIVISOR = 8;

/** A paced LocalSGD or DiLoCo member's work before its pace is known lasts this long (the job's roundBudgetMs where set). */
export const FIRST_WORK_MS = 1000;

/**
 * A member's steps while its pace is unknown and its work is not time-boxed. Paced LocalSGD and
 * DiLoCo: an eighth of H (at least one): nothing can pace that sync, so it waits for its slowest
 * member, whose pace may be many times the others'. At N = 10,000 (simulated, lognormal paces) the
 * slowest member's nominal 512 steps held the first sync for 77 s of a 10-minute run. Paced ddp
 * keeps its micro-batches (the global batch), and a fixed job its H.
 */
export function unmeasuredSteps(spec: JobSpec): number {
  return isPaced(spec) && spec.strategy !== 'ddp' ? Math.max(1, Math.ceil(spec.H / FIRST_WORK_DIVISOR)) : nominalSteps(spec);
}

/**
 * A member's first work, before its pace is known (the job's first sync, or a joiner's). Paced
 * LocalSGD and DiLoCo: steps for FIRST_WORK_MS (the job's roundBudgetMs where set), given as
 * MAX_STEPS_FACTOR × H over the ceiling's factor (a half in a trusted job, all of it in an untrusted
 * one) so that their ceiling (protocol's pacedStepCeiling) is that cap. Every member
 * then ends within half a step of the same time, and the sync waits at most for one step of its
 * slowest member. An eighth of H each (unmeasuredSteps) had the fast members idle while the slowest
 * took its one step: in bench/results/heterogeneous.json of 11-27 03:23 the first sync was 1.9–2.6%
 * of the MLP's paced runs, its members busy 0.36–0.43 of it. Where that ceiling could pass the job's target
 * (`stepsLeft`, mean steps per member), unmeasuredSteps and no budget: the sync is then cut to the
 * target as any other (job-coordinator cutToTarget). Paced ddp and fixed jobs: their nominal steps.
 * A joiner while others' budgets run (`othersLeftMs`, the time left of the latest) works until a box
 * before they end, so it is ready when they are (a Moshpit sync does not wait for it), rather than
 * idle from its first second to the sync.
 */
export function unmeasuredWork(spec: JobSpec, stepsLeft: number, othersLeftMs: number | null = null): { steps: number; budgetMs?: number } {
  if (!isPaced(spec) || spec.strategy === 'ddp') return { steps: nominalSteps(spec) };
  const steps = Math.max(1, Math.floor((MAX_STEPS_FACTOR * spec.H) / pacedStepFactor(spec.trust)));
  if (pacedStepCeiling(steps, spec.trust) >= stepsLeft) return { steps: unmeasuredSteps(spec) };
  if (othersLeftMs !== null) return { steps, budgetMs: Math.round(Math.max(FIRST_WORK_MS, othersLeftMs - FIRST_WORK_MS)) };
  return { steps, budgetMs: spec.roundBudgetMs ?? FIRST_WORK_MS };
}

/** Paced (`paced` or `auto`): members' steps follow their measured paces. */
export const isPaced = (spec: JobSpec) => spec.pacing !== 'fixed';
const pacedDdp = (spec: JobSpec) => isPaced(spec) && spec.strategy === 'ddp';

/** Examples in one of a member's steps: the job's batch, or paced ddp's micro-batch. */
export function samplesPerStep(spec: JobSpec): number {
  const b = spec.hyperparameters.batchSize;
  return pacedDdp(spec) ? b / DDP_MICRO_BATCHES : b;
}

/** The local compute time a sync aims at, or null before any member's pace is measured; `overheadMs`: what a sync costs beyond its local work (see the header). */
export function roundBudgetMs(spec: JobSpec, paces: (number | null)[], overheadMs: number | null = null): number | null {
  if (spec.roundBudgetMs !== undefined) return spec.roundBudgetMs;
  const known = paces.filter((p): p is number => p !== null);
  if (!known.length) return null;
  if (spec.strategy === 'ddp') {
    // Until every member is measured, all do the nominal micro-batches (a guess would skew the global batch).
    if (known.length < paces.length) return null;
    return (DDP_MICRO_BATCHES * known.length) / known.reduce((a, p) => a + 1 / p, 0);
  }
  const base = Math.max(spec.H * Math.min(...known), EXCHANGE_BUDGET_FACTOR * (overheadMs ?? 0));
  return snappedBudgetMs(spec, known, base);
}

/**
 * A ring's budget `aimMs` (the default's base, or auto's H steps of the fastest member) made no
 * longer than the fastest member's most steps take (past that it would only wait), then snapped to
 * whole steps of the slowest member one of whose steps fits twice that, at least
 * SLOWEST_MEMBER_STEPS of them where they fit (a slower member does one step whatever the budget);
 * past the cap only where one step fewer would lower the fastest member's rate.
 * A Moshpit job keeps `aimMs`: its groups each wait for their own slowest member, and among
 * thousands some member's pace always sits just under the aim, so snapping to it would double
 * every sync.
 */
export function snappedBudgetMs(spec: JobSpec, paces: number[], aimMs: number): number {
  if (spec.groupSize !== undefined || !paces.length) return aimMs;
  const longest = MAX_STEPS_FACTOR * spec.H * Math.min(...paces);
  const aim = Math.min(aimMs, longest);
  const reference = Math.max(...paces.filter((p) => p <= 2 * aim));
  let steps = Math.max(1, Math.round(aim / reference));
  // Two of its steps where they fit twice the aim: half a step each way is then a quarter of the sync.
  if (SLOWEST_MEMBER_STEPS * reference <= 2 * aim) steps = Math.max(steps, Math.min(SLOWEST_MEMBER_STEPS, spec.H));
  // Past the fastest member's most steps it only waits; one step fewer can cost more (16.1 fast steps
  // where 32.2 were asked, against waiting 0.2): fewer only where the fastest member then trains at a
  // higher rate, its steps per sync over the sync's time (the overhead taken as the most the aim allows).
  const overheadMs = aim / EXCHANGE_BUDGET_FACTOR;
  const fastestRate = (k: number) => Math.min(k * reference, longest) / (k * reference + overheadMs);
  while (steps > 1 && steps * reference > longest && fastestRate(steps - 1) >= fastestRate(steps)) steps--;
  return steps * reference;
}

/** Relative errors of the sync-time prediction kept for its median. */
const ERRORS_KEPT = 32;

/**
 * A sync's time, commit to commit, predicted at the previous commit: the local work of the slowest
 * member (its steps × its pace: the round waits for it) plus the exchange (the median round). The
 * dashboard shows the prediction beside what happened, and the median relative error.
 */
export class SyncTimeModel {
  private lastCommitAt: number | null = null;
  private pending: number | null = null;
  /** The predicted sync's local work alone (the slowest member's steps × pace). */
  private pendingWork: number | null = null;
  private readonly errors: number[] = [];
  /** What syncs took beyond their planned local work: the exchange, applying, reports, overruns. */
  private readonly overheads: number[] = [];
  last: { predictedMs: number; actualMs: number } | null = null;
  next: number | null = null;

  /** A sync committed at `now`; `work` is each member's next steps and pace, `exchangeMs` the median round. */
  committed(now: number, work: { steps: number; msPerStep: number | null }[], exchangeMs: number | null): void {
    if (this.lastCommitAt !== null && this.pending !== null) {
      const actualMs = now - this.lastCommitAt;
      this.last = { predictedMs: Math.round(this.pending), actualMs };
      this.errors.push(Math.abs(this.pending - actualMs) / Math.max(actualMs, 1));
      if (this.errors.length > ERRORS_KEPT) this.errors.shift();
      this.overheads.push(Math.max(0, actualMs - this.pendingWork!));
      if (this.overheads.length > ERRORS_KEPT) this.overheads.shift();
    }
    this.lastCommitAt = now;
    const known = work.every((w) => w.msPerStep !== null) && exchangeMs !== null;
    this.pendingWork = known && work.length ? Math.max(...work.map((w) => w.steps * w.msPerStep!)) : null;
    this.pending = this.pendingWork === null ? null : this.pendingWork + exchangeMs!;
    this.next = this.pending === null ? null : Math.round(this.pending);
  }

  /** The prediction was not for a sync like this (members came or went, a round was aborted): no score. */
  reset(): void {
    this.lastCommitAt = null;
    this.pending = null;
  }

  /** The median time syncs took beyond their planned local work (null before one was predicted and measured). */
  get medianOverheadMs(): number | null {
    return this.overheads.length ? [...this.overheads].sort((a, b) => a - b)[(this.overheads.length - 1) >> 1] : null;
  }

  get medianError(): number | null {
    if (!this.errors.length) return null;
    return [...this.errors].sort((a, b) => a - b)[(this.errors.length - 1) >> 1];
  }
}

/** Local steps for a member of pace `msPerStep`: unmeasuredSteps while its pace is unknown, the nominal in a fixed job or without a budget. */
export function stepsFor(spec: JobSpec, msPerStep: number | null, budgetMs: number | null): number {
  const nominal = nominalSteps(spec);
  if (!isPaced(spec) || msPerStep === null) return unmeasuredSteps(spec);
  if (budgetMs === null) return nominal;
  return Math.min(MAX_STEPS_FACTOR * nominal, Math.max(1, Math.round(budgetMs / msPerStep)));
}

export type PayloadPrecision = 'f32' | 'f16';

/**
 * auto: the exchange takes at most this share of a sync. Still a tenth, not the paced default's
 * twentieth: auto spends the share on the smallest H (syncing often) where the paced default spends
 * it on the members' time; the heterogeneous benchmark measures the paced default, not this.
 */
export const AUTO_EXCHANGE_SHARE = 0.1;
/** Weight of the newest exchange time measured at a precision. */
const EXCHANGE_WEIGHT = 0.5;

/**
 * `auto` jobs (PAI's performance estimation, applied to one knob pair): from the fastest member's
 * pace and the exchange times measured at each payload precision, the H of the next sync (steps of
 * the fastest member; the others do what fits in its time) and the precision. For each precision the
 * smallest H among 1, 2, 4, … up to MAX_STEPS_FACTOR × the job's H whose sync spends at most AUTO_EXCHANGE_SHARE on
 * the exchange; the precision with the smaller H wins, fp32 on a tie (fp16 costs precision for
 * nothing then). When no H fits either, the largest H at the precision with the faster exchange
 * (links too slow for the bound: spend as little of each sync on them as allowed). A precision not measured yet is predicted from the other as bandwidth-bound (fp16
 * moves half the bytes: half the time); the prediction is checked when a sync runs at it.
 */
export class AutoSync {
  readonly exchangeMs: Record<PayloadPrecision, number | null> = { f32: null, f16: null };
  choice: { H: number; dtype: PayloadPrecision } | null = null;

  constructor(private readonly spec: JobSpec, private readonly precisions: readonly PayloadPrecision[]) {}

  /** A ring round at `dtype` took `ms` from its begin to its commit (its exchange and apply). */
  measured(dtype: PayloadPrecision, ms: number): void {
    const previous = this.exchangeMs[dtype];
    this.exchangeMs[dtype] = previous === null ? ms : EXCHANGE_WEIGHT * ms + (1 - EXCHANGE_WEIGHT) * previous;
  }

  /** The exchange predicted at `dtype`: measured, else from the other precision. */
  predictedExchangeMs(dtype: PayloadPrecision): number | null {
    const own = this.exchangeMs[dtype];
    if (own !== null) return own;
    const f32 = this.exchangeMs.f32, f16 = this.exchangeMs.f16;
    return dtype === 'f16' ? (f32 === null ? null : f32 / 2) : f16 === null ? null : f16 * 2;
  }

  /** Chooses the next sync's H and precision (the job's H at fp32 until a pace and an exchange are known). */
  choose(fastestMsPerStep: number | null): { H: number; dtype: PayloadPrecision } {
    const maxH = MAX_STEPS_FACTOR * nominalSteps(this.spec);
    const candidates: number[] = [];
    for (let h = 1; h <= maxH; h *= 2) candidates.push(h);
    let best: { H: number; dtype: PayloadPrecision; exchangeMs: number; fits: boolean } | null = null;
    for (const dtype of this.precisions) {
      const e = this.predictedExchangeMs(dtype);
      if (e === null || fastestMsPerStep === null) continue;
      const H = candidates.find((h) => e <= AUTO_EXCHANGE_SHARE * (h * fastestMsPerStep + e));
      const option = { H: H ?? maxH, dtype, exchangeMs: e, fits: H !== undefined };
      const better = !best || (option.fits && (!best.fits || option.H < best.H)) || (!option.fits && !best.fits && option.exchangeMs < best.exchangeMs);
      if (better) best = option;
    }
    this.choice = best ? { H: best.H, dtype: best.dtype } : { H: nominalSteps(this.spec), dtype: 'f32' };
    return this.choice;
  }
}
