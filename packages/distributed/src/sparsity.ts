// DGC sparsity warm-up (Lin et al. 2018, §3.3): sparsity rises exponentially over the first steps,
// 75% → 93.75% → 98.4375% → 99.6%, each stage a quarter of the warm-up, then the final sparsity.

/** The four warm-up stages (1 − 4^−(j+1), the last rounded as in the paper). */
export const DGC_WARMUP_SPARSITIES: readonly number[] = [0.75, 0.9375, 0.984375, 0.996];

export interface SparsitySchedule {
  finalSparsity: number;
  /** Steps (or syncs) of warm-up; 0 starts at the final sparsity. */
  warmupSteps: number;
}

/**
 * Warm-up length for a run of `totalSyncs`: 1.25% of it, at least one sync per stage. The paper warms
 * up over 4 of 164 epochs (2.4%); here the warm-up's denser syncs would otherwise dominate the bytes
 * (at 10%: 70× instead of ~290× over a 640-step DDP run, for no measurable accuracy gain).
 */
export function defaultWarmupSyncs(totalSyncs: number): number {
  return Math.max(DGC_WARMUP_SPARSITIES.length, Math.round(totalSyncs / 80));
}

/** Sparsity for 0-based `step`: stage floor(4·step / warmupSteps) of the warm-up, never above the final. */
export function sparsityAt(step: number, s: SparsitySchedule): number {
  if (!(s.finalSparsity >= 0 && s.finalSparsity < 1)) throw new Error(`finalSparsity must be in [0, 1), got ${s.finalSparsity}`);
  if (s.warmupSteps <= 0 || step >= s.warmupSteps) return s.finalSparsity;
  const stage = Math.min(3, Math.floor((Math.max(0, step) * 4) / s.warmupSteps));
  return Math.min(DGC_WARMUP_SPARSITIES[stage], s.finalSparsity);
}

/** Elements a top-k update keeps at `sparsity`: ceil((1 − sparsity)·length), at least 1. */
export function topKCount(length: number, sparsity: number): number {
  // The epsilon keeps e.g. (1 − 0.999)·1000 = 1.0000000000000009 at 1.
  return Math.max(1, Math.min(length, Math.ceil((1 - sparsity) * length - 1e-7)));
}
