// `npm run bench -- tune`: chooses the convergence benchmark's hyperparameters on a validation split,
// never on the test set its summary reports. For every variant (bench/convergence-config.ts), each
// candidate setting trains on unlimited links (seed 1) on the training set minus its last 5,000
// examples, and is scored by its accuracy on those 5,000 at the end; the best one is chosen.
// Writes bench/results/tuning.json, which `npm run bench -- convergence` runs with and cites. The
// test set is evaluated by the shared runner but not recorded or printed here.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { browserSession, openPage, repoRoot } from '@tabfleet/headless';
import { QUICK_VARIANTS, VALIDATION_EXAMPLES, VARIANTS, candidates, convergenceConfig, variantName, type Settings } from './convergence-config';
import { benchCommand, runRecord } from './machine';
import type { BenchOptions } from './run';

export interface TuningReport {
  benchmark: 'tuning';
  quick: boolean;
  date: string;
  validationExamples: number;
  definitions: Record<string, string>;
  variants: { variant: string; candidates: { settings: Settings; validationAccuracy: number; steps: number }[]; chosen: Settings; chosenValidationAccuracy: number }[];
}

export function tuningFile(quick: boolean): string {
  return join(repoRoot, 'bench', 'results', quick ? 'tuning.quick.json' : 'tuning.json');
}

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? tuningFile(opts.quick);
  const variants = opts.quick ? QUICK_VARIANTS : VARIANTS;
  console.log(`[tune] ${opts.quick ? 'quick mode, ' : ''}${variants.length} variants; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const t0 = Date.now();
  const session = await browserSession();
  const out: TuningReport['variants'] = [];
  try {
    const tab = await openPage(session.browser, `${session.baseUrl}/e2e/pages/distributed.html`, { log: (l) => /rror/.test(l) && console.log(l) });
    for (const v of variants) {
      const tried: TuningReport['variants'][number]['candidates'] = [];
      for (const settings of candidates(v, opts.quick)) {
        const cfg = convergenceConfig(v, opts.quick, false, 1, settings);
        const r = await tab.page.evaluate((c) => window.tabfleetDistributed.run(c), cfg);
        if (r.finalValidationAccuracy === null) throw new Error(`${variantName(v)}: the run held out no validation set`);
        tried.push({ settings, validationAccuracy: r.finalValidationAccuracy, steps: r.steps });
        console.log(`[tune] ${variantName(v)} ${JSON.stringify(settings)}: validation ${(100 * r.finalValidationAccuracy).toFixed(2)}%`);
      }
      const best = tried.reduce((a, b) => (b.validationAccuracy > a.validationAccuracy ? b : a));
      out.push({ variant: variantName(v), candidates: tried, chosen: best.settings, chosenValidationAccuracy: best.validationAccuracy });
    }
    if (tab.errors.length) throw new Error(`page errors: ${tab.errors.join('\n')}`);
    await tab.close();
  } finally {
    await session.close();
  }
  const report: TuningReport & Record<string, unknown> = {
    benchmark: 'tuning', ...runRecord(t0, benchCommand('tune', opts)), quick: opts.quick,
    validationExamples: VALIDATION_EXAMPLES,
    definitions: {
      validation: `the last ${VALIDATION_EXAMPLES} of the Fashion-MNIST training examples, held out of training in every run (packages/distributed holdOutTail)`,
      validationAccuracy: 'accuracy on the whole validation set after the run (unlimited links, seed 1, the same steps as the convergence benchmark)',
      chosen: 'the candidate with the highest validationAccuracy (the first one on a tie); the test set plays no part',
    },
    variants: out,
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`[tune] wrote ${file}`);
}
