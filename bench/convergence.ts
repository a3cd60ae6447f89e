// `npm run bench -- convergence`: 4 workers train the Fashion-MNIST MLP in one headless Chromium page
// (WebGPU, one shared device) synced by real Ring collectives over the in-memory transport, for each
// strategy and compression, once on unlimited links and once with every link capped at 10 Mbit/s and
// 40 ms latency (home internet). Reports final accuracy, bytes on the wire per worker, wall time and
// time to the target accuracy. Writes bench/results/convergence.json.
//
// Hyperparameters come from bench/results/tuning.json (`npm run bench -- tune`), chosen on a
// validation split (the last 5,000 training examples, held out of training here too); the test set
// is only read for the figures reported. --quick uses the untuned starting settings.
//
//   bytesPerWorker  ring frame bytes one worker sent over the run (headers included), mean over workers
//   wallMs          training time: local steps + syncs, evaluations excluded
//   msToTarget      wall time until an evaluation every few steps on a fixed 2,000 of the validation
//                   examples reached the target AND the whole test set then confirmed it
// Capped runs and the unlimited dense-vs-DGC DDP pair run 3 seeds; cells report medians and min/max.
// The 4 workers share the page's 2 cores, so compute is serial across workers: real volunteers each
// have their own GPU, so the capped runs here overstate compute relative to the network.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import type { ConvergenceResult } from '@tabfleet/distributed';
import { browserSession, openPage, repoRoot } from '@tabfleet/headless';
import { CAPPED, QUICK_VARIANTS, TARGET, VALIDATION_EXAMPLES, VARIANTS, baseSettings, convergenceConfig, variantName, type Settings, type Variant } from './convergence-config';
import { benchCommand, runRecord } from './machine';
import type { BenchOptions } from './run';
import { median, spread } from './stats';
import { tuningFile, type TuningReport } from './tune';

const SEEDS = [1, 2, 3];

export { convergenceConfig } from './convergence-config';

/** Seeds of a cell: 3 for every capped run and the unlimited DDP dense-vs-DGC pair (the accuracy drop). */
function seedsOf(v: Variant, capped: boolean, quick: boolean): number[] {
  if (quick) return [1];
  return capped || (v.strategy === 'ddp' && v.compression !== 'fp16') ? SEEDS : [1];
}

function ratio(a: number | null | undefined, b: number | null | undefined): number | null {
  return a != null && b != null && b > 0 ? a / b : null;
}

/** The tuned settings per variant (full runs need tuning.json; quick runs use the starting settings). */
function loadTuning(quick: boolean): { file: string; report: TuningReport } | null {
  if (quick) return null;
  const file = tuningFile(false);
  if (!existsSync(file)) throw new Error(`${relative(process.cwd(), file)} is missing: run \`npm run bench -- tune\` first (hyperparameters are chosen on the validation split, not here)`);
  const report = JSON.parse(readFileSync(file, 'utf8')) as TuningReport;
  if (report.quick || report.validationExamples !== VALIDATION_EXAMPLES) throw new Error(`${file} is not a full tuning run on ${VALIDATION_EXAMPLES} validation examples`);
  return { file, report };
}

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'convergence.quick.json' : 'convergence.json');
  const variants = opts.quick ? QUICK_VARIANTS : VARIANTS;
  const tuning = loadTuning(opts.quick);
  const settingsOf = (v: Variant): Settings => {
    if (!tuning) return baseSettings(v);
    const t = tuning.report.variants.find((x) => x.variant === variantName(v));
    if (!t) throw new Error(`${tuning.file} has no settings for ${variantName(v)}`);
    return t.chosen;
  };
  console.log(`[convergence] ${opts.quick ? 'quick mode, ' : ''}${variants.length} variants × unlimited and capped links; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const t0 = Date.now();
  const session = await browserSession();
  const results: { capped: boolean; result: ConvergenceResult }[] = [];
  let adapter = '';
  try {
    const tab = await openPage(session.browser, `${session.baseUrl}/e2e/pages/distributed.html`, { log: (l) => /accuracy|rror/.test(l) && console.log(l) });
    for (const capped of [false, true]) {
      for (const v of variants) {
        for (const seed of seedsOf(v, capped, opts.quick)) {
          const cfg = convergenceConfig(v, opts.quick, capped, seed, settingsOf(v));
          const r = await tab.page.evaluate((c) => window.tabfleetDistributed.run(c), cfg);
          adapter = r.adapter;
          console.log(`[convergence] ${capped ? 'capped' : 'unlimited'} ${variantName(v)} seed ${seed}: test ${(100 * r.finalAccuracy).toFixed(2)}% after ${r.steps} ` +
            `steps, ${(r.bytesPerWorker / 1e6).toFixed(2)} MB/worker, ${(r.wallMs / 1000).toFixed(1)} s${r.msToTarget !== null ? `, ${(r.msToTarget / 1000).toFixed(1)} s to ${100 * TARGET}%` : ''}`);
          const { adapter: _a, ...result } = r;
          results.push({ capped, result });
        }
      }
    }
    if (tab.errors.length) throw new Error(`page errors: ${tab.errors.join('\n')}`);
    await tab.close();
  } finally {
    await session.close();
  }
  const runsOf = (capped: boolean, name: string) => results.filter((x) => x.capped === capped && variantName(x.result.config) === name).map((x) => x.result);
  // A capped run that never reached the target within its time cap counts its whole time (a lower bound).
  const toTarget = (r: ConvergenceResult) => r.msToTarget ?? r.wallMs;
  const cells = [false, true].flatMap((capped) => variants.map((v) => {
    const rs = runsOf(capped, variantName(v));
    return {
      link: capped ? 'capped' : 'unlimited', variant: variantName(v), seeds: rs.map((r) => r.config.seed ?? 1), settings: settingsOf(v),
      testAccuracy: spread(rs.map((r) => r.finalAccuracy)), validationAccuracy: spread(rs.flatMap((r) => (r.finalValidationAccuracy === null ? [] : [r.finalValidationAccuracy]))),
      bytesPerWorker: spread(rs.map((r) => r.bytesPerWorker)), wallMs: spread(rs.map((r) => r.wallMs)),
      msToTarget: capped ? spread(rs.map(toTarget)) : null, reachedTarget: capped ? rs.filter((r) => r.msToTarget !== null).length : null,
    };
  }));
  const cell = (capped: boolean, name: string) => cells.find((c) => c.link === (capped ? 'capped' : 'unlimited') && c.variant === name);
  // Per seed: dense minus DGC final test accuracy (points), same init and data order.
  const drops = seedsOf(VARIANTS[0], false, opts.quick).flatMap((seed) => {
    const d = runsOf(false, 'ddp/none').find((r) => r.config.seed === seed), c = runsOf(false, 'ddp/dgc').find((r) => r.config.seed === seed);
    return d && c ? [100 * (d.finalAccuracy - c.finalAccuracy)] : [];
  });
  const ddpMs = cell(true, 'ddp/none')?.msToTarget?.median, dilocoMs = cell(true, 'diloco/none')?.msToTarget?.median, dilocoDgcMs = cell(true, 'diloco/dgc')?.msToTarget?.median;
  const report = {
    benchmark: 'convergence', ...runRecord(t0, benchCommand('convergence', opts)), quick: opts.quick,
    adapter, browser: session.browser.version(), target: TARGET, cappedLink: CAPPED, validationExamples: VALIDATION_EXAMPLES,
    tuning: tuning ? { file: relative(repoRoot, tuning.file), date: tuning.report.date, selectedOn: 'validation accuracy (held-out training examples), never the test set' } : null,
    definitions: {
      testAccuracy: 'accuracy on the whole 10,000-image test set at the end of the run; median, min, max over the cell\'s seeds',
      validationAccuracy: `accuracy on the ${VALIDATION_EXAMPLES} held-out training examples at the end of the run`,
      msToTarget: `training wall time until an evaluation (every evalEvery steps, on a fixed 2,000 of the validation examples) reached ${TARGET} and the whole test ` +
        `set then confirmed it; a run that never did counts its whole time (a lower bound, see reachedTarget)`,
      speedups: 'ratios of the cells\' median msToTarget on capped links',
    },
    results: results.map(({ capped, result }) => ({ link: capped ? 'capped' : 'unlimited', ...result })),
    cells,
    summary: {
      /** Dense fp32 DDP bytes per worker ÷ DGC DDP bytes per worker, same steps, unlimited links (medians over seeds). */
      dgc_bytes_reduction: ratio(cell(false, 'ddp/none')?.bytesPerWorker?.median, cell(false, 'ddp/dgc')?.bytesPerWorker?.median),
      /** Final test accuracy of dense DDP minus DGC DDP (points), same seed: median over seeds, and each. */
      dgc_accuracy_drop_pts: drops.length ? median(drops) : null,
      dgc_accuracy_drop_pts_per_seed: drops,
      /** Capped links, medians over seeds: dense DDP ÷ DiLoCo + DGC time to target (the whole gain)… */
      diloco_dgc_speedup_capped: ratio(ddpMs, dilocoDgcMs),
      /** …what DiLoCo alone gives (dense DDP ÷ dense DiLoCo)… */
      diloco_speedup_capped: ratio(ddpMs, dilocoMs),
      /** …and what DGC adds on top of DiLoCo (dense DiLoCo ÷ DiLoCo + DGC). */
      dgc_over_dense_diloco_speedup_capped: ratio(dilocoMs, dilocoDgcMs),
      /** Seeds per capped cell that reached the target (the others count as lower bounds). */
      reached_target_capped: Object.fromEntries(cells.filter((c) => c.link === 'capped').map((c) => [c.variant, `${c.reachedTarget}/${c.seeds.length}`])),
    },
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`[convergence] wrote ${file}\n${JSON.stringify(report.summary, null, 2)}`);
}
