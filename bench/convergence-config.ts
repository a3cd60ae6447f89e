// What the convergence and tuning benchmarks run: the variants (strategy × compression), their
// hyperparameters, the 10 Mbit/s link, the target, and the validation split that tuning chooses on.
import { defaultWarmupSyncs, type ConvergenceConfig } from '@tabfleet/distributed';
import { defaultsFor } from '@tabfleet/protocol';

/** 10 Mbit/s and 40 ms one way, on every link. */
export const CAPPED = { bandwidth: 10e6 / 8, latencyMs: 40 };
export const TARGET = 0.85;
/** The last 5,000 of the 60,000 training examples: never trained on, what tuning and the curves read. */
export const VALIDATION_EXAMPLES = 5000;

export type Variant = Pick<ConvergenceConfig, 'strategy' | 'compression' | 'H'>;

export const VARIANTS: Variant[] = [
  { strategy: 'ddp', compression: 'none', H: 1 },
  { strategy: 'ddp', compression: 'fp16', H: 1 },
  { strategy: 'ddp', compression: 'dgc', H: 1 },
  { strategy: 'localsgd', compression: 'none', H: 8 },
  { strategy: 'localsgd', compression: 'dgc', H: 8 },
  { strategy: 'diloco', compression: 'none', H: 16 },
  { strategy: 'diloco', compression: 'dgc', H: 16 },
];

export const QUICK_VARIANTS = VARIANTS.filter((v) => v.compression !== 'fp16' && v.strategy !== 'localsgd');

export const variantName = (v: Variant) => `${v.strategy}/${v.compression}`;

/** What tuning chooses per variant: the (inner) learning rate and, where they apply, DGC sparsity and DiLoCo's outer step. */
export interface Settings {
  lr: number;
  sparsity?: number;
  outerLr?: number;
  outerMomentum?: number;
}

/**
 * The settings a variant starts from: DDP batch 64, lr 0.1, plain momentum (DGC's momentum
 * correction is plain momentum, held in the compressor, so its optimizer has none); LocalSGD
 * Nesterov SGD lr 0.05; DiLoCo inner AdamW lr 1e-3; sparsity and the outer step as a job gets them
 * by default (packages/protocol defaultsFor).
 */
export function baseSettings(v: Variant): Settings {
  const lr = v.strategy === 'diloco' ? 1e-3 : v.strategy === 'ddp' ? 0.1 : 0.05;
  const d = defaultsFor(v.strategy, v.compression, 'mlp-fashion');
  return {
    lr,
    ...(v.compression === 'dgc' ? { sparsity: d.sparsity } : {}),
    ...(v.strategy === 'diloco' ? { outerLr: d.outerLr, outerMomentum: d.outerMomentum } : {}),
  };
}

/** The candidates tuning evaluates for a variant: the base settings and their neighbours. */
export function candidates(v: Variant, quick: boolean): Settings[] {
  const base = baseSettings(v);
  const lrs = quick ? [base.lr] : [base.lr / 2, base.lr, base.lr * 2];
  const out: Settings[] = lrs.map((lr) => ({ ...base, lr }));
  if (v.strategy === 'diloco') {
    for (const [outerLr, outerMomentum] of quick ? [[0.7, 0.9]] : [[0.7, 0.9], [1, 0.5]]) {
      if (outerLr !== base.outerLr || outerMomentum !== base.outerMomentum) out.push({ ...base, outerLr, outerMomentum });
    }
  }
  if (v.compression === 'dgc' && !quick) {
    for (const sparsity of [0.99, 0.999]) if (sparsity !== base.sparsity) out.push({ ...base, sparsity });
  }
  return out;
}

export function convergenceConfig(v: Variant, quick: boolean, capped: boolean, seed: number, s: Settings = baseSettings(v)): ConvergenceConfig {
  const ddp = v.strategy === 'ddp';
  const maxSteps = quick ? 16 : ddp ? 640 : 512;
  const optimizer: ConvergenceConfig['optimizer'] = v.strategy === 'diloco' ? { kind: 'adamw', lr: s.lr }
    : ddp ? (v.compression === 'dgc' ? { kind: 'sgd', lr: s.lr } : { kind: 'sgd', lr: s.lr, momentum: 0.9 })
    : { kind: 'sgd', lr: s.lr, momentum: 0.9, nesterov: true };
  const d = defaultsFor(v.strategy, v.compression, 'mlp-fashion');
  return {
    ...v, workers: 4, batchSize: ddp ? 64 : 32, optimizer, seed, outerLr: s.outerLr ?? d.outerLr, outerMomentum: s.outerMomentum ?? d.outerMomentum,
    validationExamples: VALIDATION_EXAMPLES,
    // Curves (and, capped, the target) read a fixed 2,000 of the validation examples every few steps;
    // a capped run stops only when the whole test set confirms the target.
    maxSteps, evalEvery: quick ? 8 : capped ? 16 : 32, evalExamples: quick ? 500 : 2000, stopAtAccuracy: capped ? TARGET : undefined,
    sparsity: s.sparsity ?? d.sparsity, warmupSteps: defaultWarmupSyncs(Math.ceil(maxSteps / v.H)), clipNorm: 5, link: capped ? CAPPED : undefined,
    // Capped dense DDP moves 1.2 MB per step at 1.25 MB/s; a run that hits this cap reports a lower
    // bound (quick: a smoke test of the report, 8 s of such steps are enough).
    maxWallMs: capped ? (quick ? 8_000 : 15 * 60_000) : undefined,
  };
}
