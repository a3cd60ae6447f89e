// `npm run bench -- lm-tune --only warmup`: whether a GPT's DiLoCo + DGC job warms its sparsity up.
// DGC's warm-up (75% → 93.75% → 98.4% → 99.6%, one sync a stage at least: distributed's
// defaultWarmupSyncs) was made for gradients from a random start. A DiLoCo job of a few dozen syncs
// spends 4 of them dense-ish, and those carry most of its bytes. Each setting trains the lm-tune
// run (4 workers, the chosen outer step) on 3 seeds and is scored on the whole tuning split.
// The rule, fixed before the first run: no warm-up if its median tuning loss is at most the
// warm-up's + WARMUP_LOSS_TOLERANCE; else the warm-up stays.
import { defaultWarmupSyncs } from '@tabfleet/distributed';
import type { LmPlan } from './lm-config';
import { DISTRIBUTED, lmConfig, lmVariantName } from './lm-config';
import type { openLmPage } from './lm-corpus';
import { median } from './stats';

/** Nats per byte token: the tuning loss no warm-up may give up for its fewer bytes, set before the runs. */
export const WARMUP_LOSS_TOLERANCE = 0.02;
export const WARMUP_SEEDS = [1, 2, 3];

export interface WarmupSetting {
  warmupSyncs: number;
  tuningLoss: number[];
  medianTuningLoss: number;
  bytesPerWorker: number[];
  medianBytesPerWorker: number;
}

export interface WarmupStudy {
  variant: string;
  outer: { outerLr: number; outerMomentum: number };
  settings: WarmupSetting[];
  chosen: 'warm-up' | 'none';
  rule: string;
}

type Page = Awaited<ReturnType<typeof openLmPage>>;

export async function warmupStudy(page: Page, plan: LmPlan, log: (line: string) => void): Promise<WarmupStudy> {
  const v = DISTRIBUTED.find((d) => d.strategy === 'diloco' && d.compression === 'dgc');
  if (!v) throw new Error('no DiLoCo + DGC variant in the lm plan');
  const base = lmConfig(plan, v, 1, false);
  const outer = { outerLr: base.outerLr ?? 1, outerMomentum: base.outerMomentum ?? 0 };
  const settings: WarmupSetting[] = [];
  for (const warmupSyncs of [defaultWarmupSyncs(Math.ceil(plan.steps / v.H)), 0]) {
    const tuningLoss: number[] = [];
    const bytesPerWorker: number[] = [];
    for (const seed of plan.seeds.length > 1 ? WARMUP_SEEDS : plan.seeds) {
      // The closing pass reads the whole tuning split, whatever the plan's finalWindows.
      const cfg = { ...lmConfig(plan, v, seed, false), warmupSteps: warmupSyncs, finalWindows: undefined };
      const r = await page.tab.page.evaluate(([c, u]) => window.tabfleetDistributed.runLm(c, u), [cfg, page.urls] as const);
      if (r.finalLoss === null || !Number.isFinite(r.finalLoss)) throw new Error(`${lmVariantName(v)} warm-up ${warmupSyncs}: no final loss`);
      tuningLoss.push(r.finalLoss);
      bytesPerWorker.push(r.bytesPerWorker);
      log(`[lm-tune] ${lmVariantName(v)} warm-up ${warmupSyncs} syncs, seed ${seed}: tuning loss ${r.finalLoss.toFixed(4)}, ${r.bytesPerWorker} bytes a worker (${(r.wallMs / 1000).toFixed(0)} s)`);
    }
    settings.push({ warmupSyncs, tuningLoss, medianTuningLoss: median(tuningLoss), bytesPerWorker, medianBytesPerWorker: median(bytesPerWorker) });
  }
  const [warm, none] = settings;
  const chosen = none.medianTuningLoss <= warm.medianTuningLoss + WARMUP_LOSS_TOLERANCE ? 'none' : 'warm-up';
  const rule = `none if its median tuning loss is at most the warm-up's + ${WARMUP_LOSS_TOLERANCE} (fixed before the runs)`;
  return { variant: lmVariantName(v), outer, settings, chosen, rule };
}
