// `npm run bench -- lm-tune`: chooses a GPT job's DiLoCo outer step (lr and momentum, dense and with
// DGC) on a tuning split, never on the validation split that `npm run bench -- lm` reports. The
// tuning split is the training records whose hash falls just below validation's (corpus.ts
// tuningSplit); each candidate trains 4 workers on the rest at the lm benchmark's model, batch, inner
// optimizer and tokens (seed 1) and is scored by its loss on the whole tuning split at the end; the
// lowest is chosen. Then whether DGC deltas warm their sparsity up (lm-tune-warmup.ts; alone:
// `--only warmup`, into the existing file). Writes bench/results/lm-tuning.json; protocol's
// defaultsFor gives GPT jobs the chosen settings, and the lm benchmark runs with those defaults.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { browserSession, repoRoot } from '@tabfleet/headless';
import { lmShards, openLmPage } from './lm-corpus';
import { DISTRIBUTED, lmConfig, lmVariantName, planOf } from './lm-config';
import { warmupStudy, type WarmupStudy } from './lm-tune-warmup';
import { benchCommand, runRecord } from './machine';
import type { BenchOptions } from './run';

interface Outer {
  outerLr: number;
  outerMomentum: number;
}

/**
 * The DiLoCo paper's outer Nesterov step (lr 0.7, momentum 0.9: 500 inner steps from a pretrained
 * model), the one the Fashion-MNIST tuning chose for DGC deltas (1, 0.5), and no outer momentum
 * (lr 1: plain averaging of the deltas, like LocalSGD; 1.3: a step past it).
 */
const CANDIDATES: Outer[] = [
  { outerLr: 0.7, outerMomentum: 0.9 },
  { outerLr: 1, outerMomentum: 0.5 },
  { outerLr: 1, outerMomentum: 0 },
  { outerLr: 1.3, outerMomentum: 0 },
];

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'lm-tuning.quick.json' : 'lm-tuning.json');
  const plan = planOf(opts.quick);
  const unknown = (opts.only ?? []).filter((o) => o !== 'warmup');
  if (unknown.length) throw new Error(`lm-tune has one section to re-run alone, warmup; not ${unknown.join(', ')}`);
  if (opts.only?.length) return rerunWarmup(file, opts);
  const variants = DISTRIBUTED.filter((v) => v.strategy === 'diloco');
  console.log(`[lm-tune] ${opts.quick ? 'quick mode, ' : ''}${variants.length} variants × ${CANDIDATES.length} outer steps; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const t0 = Date.now();
  const shards = await lmShards(plan.gpt.context, { tuning: true });
  const out: { variant: string; candidates: (Outer & { tuningLoss: number; evals: number[] })[]; chosen: Outer; chosenTuningLoss: number }[] = [];
  let dgcWarmup: WarmupStudy;
  const session = await browserSession();
  try {
    const { tab, urls } = await openLmPage(session.browser, session.baseUrl, shards, (l) => /rror/.test(l) && console.log(l));
    for (const v of variants) {
      const tried: (typeof out)[number]['candidates'] = [];
      for (const outer of CANDIDATES) {
        // The closing pass reads the whole tuning split, whatever the plan's finalWindows.
        const cfg = { ...lmConfig(plan, v, 1, false), ...outer, finalWindows: undefined };
        const r = await tab.page.evaluate(([c, u]) => window.tabfleetDistributed.runLm(c, u), [cfg, urls] as const);
        if (r.finalLoss === null || !Number.isFinite(r.finalLoss)) throw new Error(`${lmVariantName(v)} ${JSON.stringify(outer)}: no final loss`);
        tried.push({ ...outer, tuningLoss: r.finalLoss, evals: r.evals.map((e) => e.loss) });
        console.log(`[lm-tune] ${lmVariantName(v)} outer lr ${outer.outerLr}, momentum ${outer.outerMomentum}: tuning loss ${r.finalLoss.toFixed(4)} (${(r.wallMs / 1000).toFixed(0)} s)`);
      }
      const best = tried.reduce((a, b) => (b.tuningLoss < a.tuningLoss ? b : a));
      out.push({ variant: lmVariantName(v), candidates: tried, chosen: { outerLr: best.outerLr, outerMomentum: best.outerMomentum }, chosenTuningLoss: best.tuningLoss });
    }
    // At the outer step protocol gives DGC jobs now (a new choice above reaches it once committed).
    dgcWarmup = await warmupStudy({ tab, urls }, plan, console.log);
    if (tab.errors.length) throw new Error(`page errors: ${tab.errors.join('\n')}`);
    await tab.close();
  } finally {
    await session.close();
  }
  const report = {
    benchmark: 'lm-tuning', ...runRecord(t0, benchCommand('lm-tune', opts)), quick: opts.quick,
    gpt: plan.gpt, stepsPerWorker: plan.steps, seed: 1,
    split: { records: { train: shards.facts.records.train, tuning: shards.facts.records.validation }, trainWindows: shards.facts.trainWindows, tuningWindows: shards.facts.heldOutWindows },
    definitions: {
      tuning: 'the training records whose hash falls in the 5% just below the validation records\' (packages/data corpus.ts tuningSplit); training reads the rest, ' +
        'and the validation split is not read',
      tuningLoss: 'mean cross-entropy (nats per byte token) on every tuning window at the end of the run',
      chosen: 'the candidate with the lowest tuningLoss',
    },
    variants: out,
    dgcWarmup: { ...dgcWarmup, ...runRecord(t0, benchCommand('lm-tune', opts)) },
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(report, null, 2) + '\n');
  console.log(`[lm-tune] chosen: ${out.map((o) => `${o.variant} ${JSON.stringify(o.chosen)}`).join('; ')}; wrote ${file} in ${((Date.now() - t0) / 60_000).toFixed(1)} min`);
}

/** `--only warmup`: the warm-up study alone, into the existing lm-tuning.json (its own commit and date in its section). */
async function rerunWarmup(file: string, opts: BenchOptions): Promise<void> {
  if (!existsSync(file)) throw new Error(`--only warmup re-runs into ${file}, which does not exist: run the whole lm-tune first`);
  const report = JSON.parse(readFileSync(file, 'utf8'));
  const plan = planOf(opts.quick);
  const t0 = Date.now();
  const shards = await lmShards(plan.gpt.context, { tuning: true });
  const session = await browserSession();
  let study: WarmupStudy;
  try {
    const page = await openLmPage(session.browser, session.baseUrl, shards, (l) => /rror/.test(l) && console.log(l));
    study = await warmupStudy(page, plan, console.log);
    if (page.tab.errors.length) throw new Error(`page errors: ${page.tab.errors.join('\n')}`);
    await page.tab.close();
  } finally {
    await session.close();
  }
  report.dgcWarmup = { ...study, ...runRecord(t0, benchCommand('lm-tune', opts)) };
  writeFileSync(file, JSON.stringify(report, null, 2) + '\n');
  const settings = study.settings.map((s) => `${s.warmupSyncs} syncs: ${s.medianTuningLoss.toFixed(4)}, ${s.medianBytesPerWorker} B`);
  console.log(`[lm-tune] DGC warm-up: ${study.chosen} (${settings.join('; ')}); wrote ${file}`);
}
