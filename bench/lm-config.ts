// What `npm run bench -- lm` runs: the GPT, its corpus cut, the variants and their settings, the
// 10 Mbit/s link and the rule that picks the validation-loss target.
import { defaultWarmupSyncs, type LmRunConfig } from '@tabfleet/distributed';
import { defaultsFor } from '@tabfleet/protocol';
import { CAPPED } from './convergence-config';

export { CAPPED };

/**
 * Byte-level (vocabulary 256): a model small enough that 21 runs fit in under an hour on SwiftShader.
 * Two heads, not four: each head's attention is its own small matmuls, and on SwiftShader four heads
 * took 151 ms a step against 87 ms for two (batch 4, the same parameters).
 */
export const GPT = { layers: 2, heads: 2, width: 64, context: 64, vocab: 256 } as const;
export const QUICK_GPT = { layers: 1, heads: 2, width: 32, context: 32, vocab: 256 } as const;

export const WORKERS = 4;
/** Windows per batch per worker (256 tokens a step at context 64; 87 ms a step on SwiftShader). */
export const BATCH = 4;
export const SEEDS = [1, 2, 3];

export type LmVariant = Pick<LmRunConfig, 'strategy' | 'compression' | 'H'>;

export const SINGLE: LmVariant = { strategy: 'single', compression: 'none', H: 1 };
/** The distributed variants: each is held to the single worker at equal tokens, on capped links, and timed to the target. */
export const DISTRIBUTED: LmVariant[] = [
  { strategy: 'ddp', compression: 'none', H: 1 },
  { strategy: 'diloco', compression: 'none', H: 16 },
  { strategy: 'diloco', compression: 'dgc', H: 16 },
];

export const lmVariantName = (v: LmVariant) => `${v.strategy}/${v.compression}`;

/** Inner AdamW for every variant: what a GPT job gets by default. */
export const LR = 3e-3;

/**
 * The target is read off the equal-tokens runs on the validation windows: the highest of the
 * distributed variants' best losses (medians over seeds), plus this margin, so every variant reaches
 * it (in the median) and the time to it asks only how soon.
 */
export const TARGET_MARGIN = 0.01;

export interface LmPlan {
  gpt: LmRunConfig['gpt'];
  /** Steps per worker of the distributed equal-tokens runs (the single worker takes WORKERS× as many). */
  steps: number;
  evalEvery: number;
  evalWindows: number;
  /** The equal-tokens runs' closing pass reads this many validation windows (absent: every one, as the full run). */
  finalWindows?: number;
  seeds: number[];
}

export function planOf(quick: boolean): LmPlan {
  return quick
    ? { gpt: QUICK_GPT, steps: 32, evalEvery: 16, evalWindows: 64, finalWindows: 512, seeds: [1] }
    : { gpt: GPT, steps: 256, evalEvery: 32, evalWindows: 128, seeds: SEEDS };
}

/**
 * One run of `v`. The distributed variants run on the capped links (`capped`, the default): a sync's
 * exchange over them is real time that the modeled clock counts, while the training itself is what
 * unlimited links give, so the same run is held to the single worker and timed to the target.
 * lm-tune passes false: it asks only for the loss.
 */
export function lmConfig(plan: LmPlan, v: LmVariant, seed: number, capped = true): LmRunConfig {
  const single = v.strategy === 'single';
  const d = v.strategy === 'single' ? null : defaultsFor(v.strategy, v.compression, 'gpt');
  return {
    ...v, gpt: plan.gpt, workers: single ? 1 : WORKERS, batchSize: BATCH, optimizer: { kind: 'adamw', lr: LR, weightDecay: 0.01 }, seed,
    // The single worker takes WORKERS× the steps, so its evaluations fall at the same tokens.
    maxSteps: single ? plan.steps * WORKERS : plan.steps, evalEvery: single ? plan.evalEvery * WORKERS : plan.evalEvery, evalWindows: plan.evalWindows, finalWindows: plan.finalWindows,
    outerLr: d?.outerLr, outerMomentum: d?.outerMomentum, sparsity: d?.sparsity, warmupSteps: defaultWarmupSyncs(Math.ceil(plan.steps / v.H)),
    ...(capped && !single ? { link: CAPPED } : {}),
  };
}
