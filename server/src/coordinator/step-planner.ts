// The work each member is handed between syncs: H steps, or in a paced job the steps that fit the
// sync's time budget at its measured pace (pacing.ts holds the math), cut to the job's target at its
// end, with the budget sent along so members stop at it; `auto` jobs also choose each sync's H and
// payload precision (AutoSync); and the sync-time model that predicts each sync and scores itself.
import { cutSteps, pacedStepCeiling, ProtocolError, targetStepsOf, type JobSummary } from '@tabfleet/protocol';
import type { JobRecord } from '../store/store';
import type { Deadlines } from './deadlines';
import type { Member, MemberBook } from './members';
import {
  AutoSync, FIRST_WORK_MS, isPaced, measuredPace, nominalSteps, roundBudgetMs, snappedBudgetMs, stepsFor, SyncTimeModel, unmeasuredSteps, unmeasuredWork, type PayloadPrecision,
} from './pacing';

/** A member whose pace is unknown may take this long for one step (4 first boxes; see runningBudgets). */
const UNMEASURED_STEP_MS = 4 * FIRST_WORK_MS;

export interface PlannerHost {
  readonly job: JobRecord;
  readonly members: MemberBook;
  readonly deadlines: Deadlines;
}

/** What a member is told with its new work: its steps and budget, in a paced job only. */
export type WorkOrder<Steps> = { steps?: Steps; budgetMs?: number };

export class StepPlanner {
  private readonly syncTime = new SyncTimeModel();
  private syncTimeMembers = '';
  /** `auto` LocalSGD and DiLoCo jobs: the next sync's H and payload precision (paced ddp has no H to choose). */
  private readonly autoSync: AutoSync | null;

  constructor(private readonly host: PlannerHost) {
    const spec = host.job.spec;
    // fp16 only where the ring moves the dense payload as sent: trusted jobs without compression.
    const precisions: PayloadPrecision[] = spec.trust === 'trusted' && spec.compression === 'none' ? ['f32', 'f16'] : ['f32'];
    this.autoSync = spec.pacing === 'auto' && spec.strategy !== 'ddp' ? new AutoSync(spec, precisions) : null;
  }

  private get spec() {
    return this.host.job.spec;
  }

  get paced(): boolean {
    return isPaced(this.spec);
  }

  /** Steps a joiner is given before its pace is measured. */
  initialSteps(): number {
    return unmeasuredSteps(this.spec);
  }

  /** The precision of the coming ring round's payload (`auto` may choose fp16). */
  get ringDtype(): 'f16' | undefined {
    return this.autoSync?.choice?.dtype === 'f16' ? 'f16' : undefined;
  }

  summary(): JobSummary['syncTime'] {
    const auto = this.autoSync;
    return {
      nextPredictedMs: this.syncTime.next, last: this.syncTime.last, medianError: this.syncTime.medianError,
      ...(auto ? { auto: auto.choice && { ...auto.choice, exchangeMs: { ...auto.exchangeMs } } } : {}),
    };
  }

  /**
   * A member just admitted: a member whose pace is not measured yet (the first sync, a joiner) does its
   * first work time-boxed (pacing unmeasuredWork), a joiner until shortly before the others' budgets end.
   */
  admitted(m: Member): WorkOrder<number> {
    const budgetsEnd = m.msPerStep === null && this.host.job.seq > 0 ? this.runningBudgets().endsAt : null;
    const first = m.msPerStep === null ? unmeasuredWork(this.spec, this.stepsLeft(), budgetsEnd === null ? null : budgetsEnd - m.workSince) : null;
    const budget = first ? first.budgetMs ?? null : this.stepBudget();
    m.steps = first ? first.steps : this.plannedSteps(m, budget);
    const cut = this.cutToTarget({ [m.volunteerId]: m.steps });
    this.handBudgets([m.volunteerId], cut ? null : budget);
    // Steps only in a paced job: otherwise every member does the job's H (ddp: one gradient on its batch).
    return this.paced ? { steps: m.steps, ...(cut ? {} : this.localBudget(budget)) } : {};
  }

  /** Its pace from the server's time for the steps it counted (untrusted: never the member's own computeMs). */
  measured(m: Member, stepsGiven: number | undefined, computeMs: number): void {
    m.msPerStep = measuredPace(this.spec, m.msPerStep, { steps: stepsGiven ?? nominalSteps(this.spec), workMs: m.workMs, computeMs });
  }

  /** A ring sync's exchange took `ms` at `dtype` (auto's precision choice learns from it). */
  exchangeMeasured(dtype: PayloadPrecision, ms: number): void {
    this.autoSync?.measured(dtype, ms);
  }

  /**
   * The next work of the members `ids` after a commit, planned on `budget` (default: the sync's
   * budget from the paces measured in it; `auto`: and its H and precision, chosen first).
   */
  nextWork(ids: readonly string[], budget?: number | null): { steps: Record<string, number>; order: WorkOrder<Record<string, number>> } {
    if (budget === undefined) {
      this.autoSync?.choose(this.fastestPace());
      budget = this.stepBudget();
    }
    const steps: Record<string, number> = {};
    for (const id of ids) {
      const m = this.host.members.get(id);
      if (m) steps[id] = m.steps = this.plannedSteps(m, budget);
    }
    const cut = this.cutToTarget(steps);
    this.handBudgets(ids, cut ? null : budget);
    return { steps, order: this.paced ? { steps, ...(cut ? {} : this.localBudget(budget)) } : {} };
  }

  /** After a ring sync: predicts the next one's time (scored only across syncs of the same members). */
  predictNext(ids: readonly string[], now: number): void {
    if (this.syncTimeMembers !== ids.join(',')) this.syncTime.reset();
    this.syncTimeMembers = ids.join(',');
    const auto = this.autoSync;
    const exchangeMs = auto?.choice ? auto.predictedExchangeMs(auto.choice.dtype) : this.host.deadlines.median('round');
    this.syncTime.committed(now, ids.flatMap((id) => this.host.members.get(id) ?? []).map((m) => ({ steps: m.steps, msPerStep: m.msPerStep })), exchangeMs);
  }

  /** A member's local steps for its next work: H, or paced, what fits the round's budget at its pace. */
  private plannedSteps(m: Member, budget: number | null): number {
    // Unpaced, or its pace not measured yet (a joiner): a few steps or the nominal, with no budget to compute.
    if (!this.paced || m.msPerStep === null) return unmeasuredSteps(this.spec);
    return stepsFor(this.spec, m.msPerStep, budget);
  }

  /**
   * Paced LocalSGD and DiLoCo: the syncs before the job's target are cut to it. When a member could
   * pass the target in its coming work (up to the ceiling of the steps it is given), the members in
   * `steps` get no budget (each does exactly its steps), and where their mean would pass the steps left
   * their steps are scaled down to it (protocol's cutSteps), so the job ends on its target instead of
   * past it. True when cut (`steps` and the members' planned steps may be lowered).
   */
  private cutToTarget(steps: Record<string, number>): boolean {
    if (!this.paced || this.spec.strategy === 'ddp') return false;
    const left = this.stepsLeft();
    if (pacedStepCeiling(Math.max(0, ...Object.values(steps)), this.spec.trust) < left) return false;
    const ids = Object.keys(steps);
    const cut = cutSteps(ids.map((id) => steps[id]), left);
    ids.forEach((id, i) => {
      steps[id] = cut[i];
      const m = this.host.members.get(id);
      if (m) m.steps = cut[i];
    });
    return true;
  }

  /** Mean steps per member before the job's target (at least one). */
  private stepsLeft(): number {
    return Math.max(1, targetStepsOf(this.spec) - this.host.job.step);
  }

  /**
   * Paced LocalSGD and DiLoCo: the time budget sent with the steps, so members stop at it (a step
   * count alone overran it whenever a member's steps ran slower than its measured pace). Paced ddp's
   * micro-batches make up one global batch: exactly those, no budget.
   */
  private localBudget(budget: number | null): { budgetMs?: number } {
    return budget !== null && this.spec.strategy !== 'ddp' ? { budgetMs: Math.round(budget) } : {};
  }

  /**
   * Of the budgets the members a sync waits for run: when the latest ends (null: none runs), and the
   * longest step of a member that has one (it takes at least one step, so a member slower than its
   * budget ends a step past it, not late). A member whose pace is unknown may take UNMEASURED_STEP_MS
   * for a step: its first steps hold its shader compiles.
   */
  runningBudgets(): { endsAt: number | null; longestStepMs: number } {
    let endsAt: number | null = null, longestStepMs = 0;
    const { inPhase, leftOut } = this.host.members;
    for (const m of inPhase.admitted) {
      if (m.workBudgetMs <= 0 || leftOut.has(m)) continue;
      endsAt = Math.max(endsAt ?? -Infinity, m.workSince + m.workBudgetMs);
      longestStepMs = Math.max(longestStepMs, m.msPerStep ?? UNMEASURED_STEP_MS);
    }
    return { endsAt, longestStepMs };
  }

  /** The budget the members' new work was handed (null: none), which their lateness is counted past. */
  private handBudgets(ids: readonly string[], budget: number | null): void {
    const budgetMs = this.localBudget(budget).budgetMs ?? 0;
    for (const id of ids) {
      const m = this.host.members.get(id);
      if (m) m.workBudgetMs = budgetMs;
    }
  }

  /**
   * The steps a member says it took when it stopped at the budget: its weight in the sync, its credit,
   * the job's step and its pace follow them. At most protocol's `pacedStepCeiling` of the steps it was
   * given (trusted: twice them; untrusted: those), so a member can lower its weight but not raise it past that.
   */
  reportedSteps(m: Member, steps: number): number {
    if (!this.paced || this.spec.strategy === 'ddp') throw new ProtocolError('bad_request', 'only a paced localsgd or diloco member reports its steps: the others do the steps they are given');
    const ceiling = pacedStepCeiling(m.steps, this.spec.trust);
    const why = ceiling === m.steps ? 'the steps given, in an untrusted job' : `twice the ${m.steps} given`;
    if (steps > ceiling) throw new ProtocolError('bad_request', `${steps} local steps: at most ${ceiling} (${why})`);
    return steps;
  }

  /** A paced job's local compute time per sync (null: every member does H); computed over all members, so callers planning many members pass it once. */
  stepBudget(): number | null {
    if (!this.paced) return null;
    const paces = [...this.host.members.values()].map((x) => x.msPerStep);
    const known = paces.filter((p): p is number => p !== null);
    const auto = this.autoSync;
    return auto?.choice && known.length
      ? snappedBudgetMs(this.spec, known, auto.choice.H * Math.min(...known))
      : roundBudgetMs(this.spec, paces, this.syncTime.medianOverheadMs ?? this.host.deadlines.median('round'));
  }

  /** The smallest measured time per step among the members, or null before any is measured. */
  private fastestPace(): number | null {
    const known = [...this.host.members.values()].flatMap((x) => (x.msPerStep === null ? [] : [x.msPerStep]));
    return known.length ? Math.min(...known) : null;
  }
}
