// Paced rounds: each member does as many local steps per sync as fit the round's time budget at its
// measured pace, so a tab 4× slower does a quarter of the steps instead of holding the others idle
// for three quarters of every round. Its contribution is weighted by its samples (round:begin names
// every member's steps). The budget is the job's `roundBudgetMs`, or H steps of the fastest member; a
// member slower than the whole budget still does one step (the sync then waits for that step). Not
// "at least one step of the slowest": one member's noisy measurement would then set everyone's work.
import type { JobSpec } from '@tabfleet/protocol';

/** Weight of the newest measurement in a member's time per step (an exponentially weighted mean). */
const PACE_WEIGHT = 0.5;
/** A member does at most this many times the job's H steps per sync (its work drifts from the others' beyond). */
export const MAX_STEPS_FACTOR = 4;

/** A member's time per local step after a sync in which it took `steps` steps in `wallMs`. */
export function nextPace(previous: number | null, wallMs: number, steps: number): number {
  const measured = wallMs / Math.max(1, steps);
  return previous === null ? measured : PACE_WEIGHT * measured + (1 - PACE_WEIGHT) * previous;
}

/** The local compute time a sync aims at, or null before any member's pace is measured. */
export function roundBudgetMs(spec: JobSpec, paces: (number | null)[]): number | null {
  if (spec.roundBudgetMs !== undefined) return spec.roundBudgetMs;
  const known = paces.filter((p): p is number => p !== null);
  if (!known.length) return null;
  return spec.H * Math.min(...known);
}

/** Local steps for a member of pace `msPerStep` (H while either is unknown, or in a fixed-pace job). */
export function stepsFor(spec: JobSpec, msPerStep: number | null, budgetMs: number | null): number {
  if (spec.pacing !== 'paced' || msPerStep === null || budgetMs === null) return spec.H;
  return Math.min(MAX_STEPS_FACTOR * spec.H, Math.max(1, Math.round(budgetMs / msPerStep)));
}
