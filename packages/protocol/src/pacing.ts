// The pacing rules a job's members and its server share: which pacing a job takes, how many local
// steps a paced member may take and report, when it stops at its time budget, how its pace is
// measured, and how the last syncs are cut to the job's target. The tab's engine, the simulated
// volunteers (tests, benchmarks, the simulator) and the server's step planner all follow these, so
// none keeps a copy of its own. The server's planning math (budgets, auto's H) is its pacing.ts.
import type { JobSpec } from './jobs';

/**
 * `fixed`: every member does H local steps per sync. `paced`: each does as many as fit the round's
 * time budget at its measured pace, and its contribution is weighted by its samples. In a paced ddp
 * job the steps are micro-batches (see DDP_MICRO_BATCHES) that together make the job's global batch.
 * `auto`: paced, and the server also picks each sync's steps (an H for the fastest member, at most
 * 4 × the job's H) and the ring's payload precision (fp32, or fp16 in a trusted job without
 * compression) from the measured paces and exchange times (the server's pacing.ts, AutoSync).
 */
export const PACINGS = ['fixed', 'paced', 'auto'] as const;
export type Pacing = (typeof PACINGS)[number];

/**
 * A job that names no pacing gets `auto`, where the server has it: not in Moshpit groups (there
 * `paced`: each tab still works to its speed, at the job's H), not in a ddp job whose batch does not
 * split into DDP_MICRO_BATCHES micro-batches, and not in Streaming DiLoCo (fragments or overlap), whose
 * fragments take turns by the count of syncs of H steps each (there `fixed`).
 */
export function defaultPacing(s: { strategy: string; groupSize?: number; hyperparameters: { batchSize: number }; fragments?: number; overlapSteps?: number }): Pacing {
  if (s.groupSize !== undefined) return 'paced';
  if ((s.fragments ?? 1) > 1 || (s.overlapSteps ?? 0) > 0) return 'fixed';
  if (s.strategy === 'ddp' && s.hyperparameters.batchSize % DDP_MICRO_BATCHES !== 0) return 'fixed';
  return 'auto';
}

/**
 * Paced LocalSGD and DiLoCo members are given steps and a time budget: they train while at least
 * half a step still fits the budget, up to a ceiling, and say how many they took. The server weighs,
 * credits and counts what they report, never past the ceiling (a claim above it is refused), so a
 * member can lower its weight but not raise it beyond the ceiling. In a trusted job the ceiling is
 * this many times the steps given (a pace measured slow, a tab back from the background, makes up
 * the difference); in an untrusted job it is the steps given: a member stops at them or at its
 * budget, whichever comes first. A claim past the steps given cannot be checked there (the server
 * sees only when the member is ready), and each one believed compounded: the pace measured from it
 * was faster, the next sync gave more steps, and the member claimed twice those (3.9 times an honest
 * member's credit at a live server, issue 34). A member that finishes its given steps early is ready
 * early, so the server's time still learns its faster pace.
 */
export const PACED_STEP_CEILING = 2;
/** The ceiling's factor over the steps given: PACED_STEP_CEILING in a trusted job, 1 in an untrusted one. */
export const pacedStepFactor = (trust: JobSpec['trust']) => (trust === 'trusted' ? PACED_STEP_CEILING : 1);
/** The most local steps a paced member with a budget takes and the server accepts (see PACED_STEP_CEILING). */
export const pacedStepCeiling = (givenSteps: number, trust: JobSpec['trust']) => pacedStepFactor(trust) * givenSteps;

/**
 * A paced job's last syncs, `left` mean steps per member before its target (the job's step counts
 * the mean): each member's planned steps scaled by left ÷ their mean where that mean would pass it
 * (at least one step each), so the sync ends on the target and each member's share of it follows its
 * pace as in a budgeted sync. (Capping each at `left` instead cut the fast members alone: the sync
 * fell short of the target, and the next ones were shorter still, each waiting on the slow members.)
 */
export function cutSteps(planned: readonly number[], left: number): number[] {
  const mean = planned.reduce((a, b) => a + b, 0) / Math.max(1, planned.length);
  if (mean <= left) return [...planned];
  const cut = planned.map((n) => Math.max(1, Math.round((n * Math.max(1, left)) / mean)));
  // Rounded up (and at least one each), the mean could pass what is left: [1, 3] with one step left
  // became [1, 2], a mean the job's step rounds to 2, one past its target. Taken back from the largest.
  let excess = cut.reduce((a, b) => a + b, 0) - Math.max(1, left) * cut.length;
  while (excess > 0) {
    const i = cut.indexOf(Math.max(...cut));
    if (cut[i] <= 1) break;
    cut[i]--;
    excess--;
  }
  return cut;
}

/** Weight of the newest measurement in a paced member's time per step (an exponentially weighted mean). */
const PACE_WEIGHT = 0.5;
/** A measurement at most this share of the estimate replaces it (see nextPace). */
const PACE_DROP_TAKEN = 0.5;

/**
 * A paced member's time per local step after a sync in which it took `steps` steps in `wallMs`: an
 * exponentially weighted mean, except that a measurement at half the estimate or less replaces it.
 * Such an estimate held one-time costs (the first steps' shader compiles: 1.1 s against 21 ms a step
 * for the benchmark's MLP) or a slow spell that has ended (a tab back from the background), and the
 * mean would take several syncs to forget them while the member is given a fraction of its steps.
 */
export function nextPace(previous: number | null, wallMs: number, steps: number): number {
  const measured = wallMs / Math.max(1, steps);
  if (previous === null || measured <= PACE_DROP_TAKEN * previous) return measured;
  return PACE_WEIGHT * measured + (1 - PACE_WEIGHT) * previous;
}

/**
 * Paced ddp: the job's batch is split into this many micro-batches, a member at the average pace
 * computes its gradient over this many of them, faster members over more and slower over fewer, so
 * the members' batches add up to about members × batchSize, the global batch of a fixed ddp job.
 */
export const DDP_MICRO_BATCHES = 4;

/**
 * A paced member with a time budget takes another step while at least half of one still fits:
 * `spentMs` of the budget are gone (counting a step still in flight), and a step takes `stepMs`. So
 * each member ends within half a step of the budget, the nearest whole step, as the server's steps round.
 */
export function anotherStepFits(spentMs: number, stepMs: number, budgetMs: number): boolean {
  return spentMs + stepMs / 2 <= budgetMs;
}

/**
 * A simulated member's paced work at a steady `msPerStep`: at least one step, more while another fits
 * the budget (anotherStepFits), at most `ceiling` (pacedStepCeiling of the steps it was given).
 */
export function stepsWithinBudget(msPerStep: number, budgetMs: number, ceiling: number): number {
  let took = 1;
  while (took < ceiling && anotherStepFits(took * msPerStep, msPerStep, budgetMs)) took++;
  return took;
}
