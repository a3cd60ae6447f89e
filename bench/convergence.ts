// `npm run bench -- convergence`: 4 workers train the Fashion-MNIST MLP in one headless Chromium page
// (WebGPU, one shared device) synced by real Ring collectives over the in-memory transport, for each
// strategy and compression, once on unlimited links and once with every link capped at 10 Mbit/s and
// 40 ms latency (home internet). Reports final accuracy, bytes on the wire per worker, wall time and
// time to the target accuracy. Writes bench/results/convergence.json.
//
//   bytesPerWorker  ring frame bytes one worker sent over the run (headers included), mean over workers
//   wallMs          training time: local steps + syncs, evaluations excluded
//   msToTarget      wall time until an evaluation (every evalEvery steps; capped runs: the whole test set) reached the target
// The 4 workers share the page's 2 cores, so compute is serial across workers: real volunteers each
// have their own GPU, so the capped runs here overstate compute relative to the network.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { defaultWarmupSyncs, type ConvergenceConfig, type ConvergenceResult } from '@tabfleet/distributed';
import { defaultsFor } from '@tabfleet/protocol';
import { repoRoot, browserSession, openPage } from '@tabfleet/headless';
import { machineInfo } from './machine';
import type { BenchOptions } from './run';
import { median } from './stats';

/** 10 Mbit/s and 40 ms one way, on every link. */
const CAPPED = { bandwidth: 10e6 / 8, latencyMs: 40 };
const TARGET = 0.85;

type Variant = Pick<ConvergenceConfig, 'strategy' | 'compression' | 'H'>;

const VARIANTS: Variant[] = [
  { strategy: 'ddp', compression: 'none', H: 1 },
  { strategy: 'ddp', compression: 'fp16', H: 1 },
  { strategy: 'ddp', compression: 'dgc', H: 1 },
  { strategy: 'localsgd', compression: 'none', H: 8 },
  { strategy: 'localsgd', compression: 'dgc', H: 8 },
  { strategy: 'diloco', compression: 'none', H: 16 },
  { strategy: 'diloco', compression: 'dgc', H: 16 },
];

/**
 * Seeds (init and data order) of the unlimited dense-vs-DGC DDP pair: final accuracy moves by about a
 * point between seeds, as much as the drop being measured, so the summary takes the median over seeds.
 */
const DROP_SEEDS = [1, 2, 3];

export function convergenceConfig(v: Variant, quick: boolean, capped: boolean, seed = 1): ConvergenceConfig {
  // DDP: batch 64, lr 0.1, plain momentum (DGC's momentum correction is plain momentum, held in the
  // compressor, so its optimizer has none). LocalSGD: Nesterov SGD; DiLoCo: inner AdamW.
  const ddp = v.strategy === 'ddp';
  const maxSteps = quick ? 16 : ddp ? 640 : 512;
  const optimizer: ConvergenceConfig['optimizer'] = v.strategy === 'diloco' ? { kind: 'adamw', lr: 1e-3 }
    : ddp ? (v.compression === 'dgc' ? { kind: 'sgd', lr: 0.1 } : { kind: 'sgd', lr: 0.1, momentum: 0.9 })
    : { kind: 'sgd', lr: 0.05, momentum: 0.9, nesterov: true };
  // Sparsity and DiLoCo's outer step as a job gets them by default (packages/protocol defaultsFor).
  const { sparsity, outerLr, outerMomentum } = defaultsFor(v.strategy, v.compression);
  return {
    ...v, workers: 4, batchSize: ddp ? 64 : 32, optimizer, seed, outerLr, outerMomentum,
    // The target is checked on the whole test set: on 2,000 images (±0.8 points) runs "reached" 85%
    // while the whole set said 83.5–84.5%. Unlimited runs evaluate on 2,000 for the curve only.
    maxSteps, evalEvery: quick ? 8 : 32, evalExamples: quick ? 500 : capped ? 10_000 : 2000, stopAtAccuracy: capped ? TARGET : undefined,
    sparsity, warmupSteps: defaultWarmupSyncs(Math.ceil(maxSteps / v.H)), clipNorm: 5, link: capped ? CAPPED : undefined,
    // Capped dense DDP moves 1.2 MB per step at 1.25 MB/s; a run that hits this cap reports a lower bound.
    maxWallMs: capped ? (quick ? 20_000 : 15 * 60_000) : undefined,
  };
}

function isDropPair(v: Variant): boolean {
  return v.strategy === 'ddp' && v.compression !== 'fp16';
}

function ratio(a: number | null, b: number | null): number | null {
  return a !== null && b !== null && b > 0 ? a / b : null;
}

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'convergence.quick.json' : 'convergence.json');
  const variants = opts.quick ? VARIANTS.filter((v) => v.compression !== 'fp16' && v.strategy !== 'localsgd') : VARIANTS;
  console.log(`[convergence] ${opts.quick ? 'quick mode, ' : ''}${variants.length} variants × unlimited and capped links; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const t0 = Date.now();
  const session = await browserSession();
  const results: { capped: boolean; result: ConvergenceResult }[] = [];
  let adapter = '';
  try {
    const tab = await openPage(session.browser, `${session.baseUrl}/e2e/pages/distributed.html`, { log: (l) => /accuracy|rror/.test(l) && console.log(l) });
    for (const capped of [false, true]) {
      for (const v of variants) {
        const seeds = !capped && !opts.quick && isDropPair(v) ? DROP_SEEDS : [1];
        for (const seed of seeds) {
          const cfg = convergenceConfig(v, opts.quick, capped, seed);
          const r = await tab.page.evaluate((c) => window.tabfleetDistributed.run(c), cfg);
          adapter = r.adapter;
          console.log(`[convergence] ${capped ? 'capped' : 'unlimited'} ${v.strategy}/${v.compression} seed ${seed}: ${(100 * r.finalAccuracy).toFixed(2)}% after ${r.steps} steps, ${(r.bytesPerWorker / 1e6).toFixed(2)} MB/worker, ${(r.wallMs / 1000).toFixed(1)} s${r.msToTarget !== null ? `, ${(r.msToTarget / 1000).toFixed(1)} s to ${100 * TARGET}%` : ''}`);
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
  const find = (capped: boolean, strategy: string, compression: string, seed = 1) => results.find((x) => x.capped === capped && x.result.config.strategy === strategy && x.result.config.compression === compression && x.result.config.seed === seed)?.result ?? null;
  const dense = find(false, 'ddp', 'none'), dgc = find(false, 'ddp', 'dgc');
  // Per seed: dense minus DGC final accuracy (points), same init and data order.
  const drops = (opts.quick ? [1] : DROP_SEEDS).flatMap((seed) => {
    const d = find(false, 'ddp', 'none', seed), c = find(false, 'ddp', 'dgc', seed);
    return d && c ? [100 * (d.finalAccuracy - c.finalAccuracy)] : [];
  });
  const denseCapped = find(true, 'ddp', 'none'), dilocoDgcCapped = find(true, 'diloco', 'dgc');
  // A dense DDP run that never reached the target within its time cap gives a lower bound.
  const denseToTarget = denseCapped ? denseCapped.msToTarget ?? denseCapped.wallMs : null;
  const report = {
    benchmark: 'convergence', quick: opts.quick, date: new Date().toISOString(), durationMs: Date.now() - t0,
    machine: machineInfo(), adapter, browser: session.browser.version(), target: TARGET, cappedLink: CAPPED,
    results: results.map(({ capped, result }) => ({ link: capped ? 'capped' : 'unlimited', ...result })),
    summary: {
      /** Dense fp32 DDP bytes per worker ÷ DGC DDP bytes per worker, same steps, unlimited links. */
      dgc_bytes_reduction: ratio(dense?.bytesPerWorker ?? null, dgc?.bytesPerWorker ?? null),
      /** Final test accuracy of dense DDP minus DGC DDP (points), same steps: median over seeds. */
      dgc_accuracy_drop_pts: drops.length ? median(drops) : null,
      dgc_accuracy_drop_pts_per_seed: drops,
      /** Capped links: DDP dense time to target ÷ DiLoCo + DGC time to target. */
      diloco_dgc_speedup_capped: ratio(denseToTarget, dilocoDgcCapped?.msToTarget ?? null),
      /** True when the capped dense DDP run hit its time cap first (the speedup is then a lower bound). */
      ddp_capped_reached_target: denseCapped?.msToTarget !== null,
    },
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`[convergence] wrote ${file}\n${JSON.stringify(report.summary, null, 2)}`);
}
