// `npm run bench -- heterogeneous`: unequal volunteers. 8 LocalSGD workers of the Fashion-MNIST MLP
// (WebGPU through Dawn in Node, one device shared, so each worker's compute is timed on its own and a
// sync is modeled as max(local) + exchange + max(apply), as on 8 machines), slowed by factors
// 1, 1, 1, 2, 2, 4, 4, 8 (each sleeps (f − 1) × its typical compute), in fixed-H rounds and in paced
// rounds, and all at factor 1 as the control. Every run trains on the same number of samples;
// utilization is busy compute ÷ modeled wall (mean over workers); the target is validation accuracy
// (the last 5,000 training examples, held out); final accuracy is on the test set. Paced rounds run
// as the server and runtime run them: the server's default budget (H steps of the fastest member, or
// 9× the round's overhead, whichever is longer: pacing.ts), each member given the steps that fit it
// and stopping at the budget. The GPT is not in it yet.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { MemoryNetwork } from '@tabfleet/collective';
import { holdOutTail, mlpWorkers, runSyncs, startWorkers, type SyncReport } from '@tabfleet/distributed';
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import { repoRoot } from '@tabfleet/headless';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { jobSpecSchema } from '@tabfleet/protocol';
import { roundBudgetMs } from '@tabfleet/server/testing';
import { machineInfo } from './machine';
import type { BenchOptions } from './run';
import { median, spread } from './stats';

export const SPEEDS = [1, 1, 1, 2, 2, 4, 4, 8];
const EQUAL = SPEEDS.map(() => 1);
const H = 8;
const BATCH = 32;
const TARGET = 0.84;
const VALIDATION_EXAMPLES = 5000;

type Variant = 'equal-fixed' | 'hetero-fixed' | 'hetero-paced';
const VARIANTS: Variant[] = ['equal-fixed', 'hetero-fixed', 'hetero-paced'];

interface RunResult {
  variant: Variant;
  seed: number;
  syncs: number;
  samples: number;
  /** Modeled time: Σ over syncs of max(local) + exchange + max(apply). */
  modeledMs: number;
  utilization: number;
  msToTarget: number | null;
  samplesToTarget: number | null;
  finalTestAccuracy: number;
  finalValidationAccuracy: number;
  stepsPerWorker: number[];
  evals: { samples: number; modeledMs: number; accuracy: number }[];
  /** Paced syncs: predicted vs measured round time (ms). */
  roundTimes: { predictedMs: number; measuredMs: number }[];
  /** Every sync: each worker's steps, the steps' time and its whole local work (payload included), the exchange, each apply (ms). */
  syncLog: { steps: number[]; stepsMs: number[]; localMs: number[]; exchangeMs: number; applyMs: number[] }[];
}

/**
 * A sync on N machines: the slowest member's local work, then the exchange, then the slowest apply.
 * The in-memory ring runs every member's share of the exchange in this one thread, one after another
 * (unlimited links: it is CPU work), so one member's share of it, which they do at once, is 1/N.
 */
const roundMs = (r: SyncReport) => Math.max(...r.localMs) + r.exchangeMs / r.localMs.length + Math.max(...r.applyMs);
/** The job the paced variant stands for: the server's default budget rule is applied to it. */
const PACED_JOB = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H, pacing: 'paced', trust: 'trusted', hyperparameters: { lr: 0.05, batchSize: BATCH }, targetSteps: 1 });
/** Given steps at most this many (members stop at the budget, up to twice what they were given). */
const MAX_STEPS = 8 * H;

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'heterogeneous.quick.json' : 'heterogeneous.json');
  const seeds = opts.quick ? [1] : [1, 2, 3];
  // Equal samples for every run: 256 steps of H per worker at equal speed (quick: a smoke test).
  const totalSamples = (opts.quick ? 24 : 256) * SPEEDS.length * BATCH;
  const evalEverySamples = totalSamples / (opts.quick ? 2 : 16);
  const evalExamples = opts.quick ? 500 : 2000;
  const log = (s: string) => console.log(`[heterogeneous] ${s}`);
  const t0 = performance.now();
  const backend = await createNodeGpuBackend();
  const all = await fashionMnistFromDisk();
  const split = holdOutTail(all.train, VALIDATION_EXAMPLES);
  const results: RunResult[] = [];

  for (const seed of seeds) {
    for (const variant of VARIANTS) {
      const workers = mlpWorkers(backend, {
        workers: SPEEDS.length, data: { train: split.head, test: all.test }, batchSize: BATCH, seed,
        optimizer: { kind: 'sgd', lr: 0.05, momentum: 0.9, nesterov: true },
        strategy: { strategy: 'localsgd', H, compression: 'none', outerLr: 1, outerMomentum: 0 },
        slowdowns: variant === 'equal-fixed' ? EQUAL : SPEEDS,
      });
      await startWorkers(workers);
      let budgetMs = Infinity;
      const pace = variant === 'hetero-paced' ? { get budgetMs() { return budgetMs; }, maxSteps: MAX_STEPS } : undefined;
      let samples = 0, modeledMs = 0, busyMs = 0, nextEval = evalEverySamples, msToTarget: number | null = null, samplesToTarget: number | null = null;
      const evals: RunResult['evals'] = [];
      const roundTimes: RunResult['roundTimes'] = [];
      let lastOverheadMs = 0;
      // Every sync's overhead and each worker's ms per step (slowdown included), for the budget.
      const overheads: number[] = [];
      const paces: number[][] = SPEEDS.map(() => []);
      const syncLog: RunResult['syncLog'] = [];
      const ms = (xs: number[]) => xs.map((x) => Math.round(x));
      const reports = await runSyncs(workers, new MemoryNetwork({ seed }), {
        syncs: 100_000,
        pace,
        onSync: async (r) => {
          const measured = roundMs(r);
          syncLog.push({ steps: r.steps, stepsMs: ms(r.stepsMs), localMs: ms(r.localMs), exchangeMs: Math.round(r.exchangeMs), applyMs: ms(r.applyMs) });
          if (r.predictedLocalMs) roundTimes.push({ predictedMs: Math.max(...r.predictedLocalMs) + lastOverheadMs, measuredMs: measured });
          // What a round costs beyond its steps (payloads, exchange, apply): the predictor carries the last one forward.
          lastOverheadMs = measured - Math.max(...r.stepsMs);
          overheads.push(lastOverheadMs);
          r.stepsMs.forEach((ms, i) => paces[i].push(ms / r.steps[i]));
          // The server's default budget (pacing.ts) from the medians so far: the paces, and the overhead for its exchange time (after sync 1's shader compiles).
          if (pace) budgetMs = roundBudgetMs(PACED_JOB, paces.map(median), overheads.length > 1 ? median(overheads.slice(1)) : overheads[0])!;
          samples += r.steps.reduce((a, n) => a + n * BATCH, 0);
          modeledMs += measured;
          busyMs += r.localMs.reduce((a, b) => a + b, 0) + r.applyMs.reduce((a, b) => a + b, 0);
          if (samples >= nextEval || samples >= totalSamples) {
            nextEval += evalEverySamples;
            const ev = await workers[0].engine.evaluate(evalExamples, 500, split.tail);
            evals.push({ samples, modeledMs, accuracy: ev.accuracy });
            if (ev.accuracy >= TARGET && msToTarget === null) {
              msToTarget = modeledMs;
              samplesToTarget = samples;
            }
            log(`${variant} seed ${seed}: ${samples} samples, validation ${(100 * ev.accuracy).toFixed(2)}%, modeled ${(modeledMs / 1000).toFixed(1)} s, utilization ${(busyMs / (SPEEDS.length * modeledMs)).toFixed(2)}, steps this sync ${r.steps.join(' ')}`);
          }
          return samples >= totalSamples;
        },
      });
      const test = await workers[0].engine.evaluate();
      const validation = await workers[0].engine.evaluate(Infinity, 500, split.tail);
      results.push({
        variant, seed, syncs: reports.length, samples, modeledMs, utilization: busyMs / (SPEEDS.length * modeledMs), msToTarget, samplesToTarget,
        finalTestAccuracy: test.accuracy, finalValidationAccuracy: validation.accuracy, stepsPerWorker: workers.map((w) => w.engine.step), evals, roundTimes, syncLog,
      });
      log(`${variant} seed ${seed}: test ${(100 * test.accuracy).toFixed(2)}%, ${reports.length} syncs, modeled ${(modeledMs / 1000).toFixed(1)} s, to ${100 * TARGET}%: ${msToTarget === null ? 'not reached' : `${(msToTarget / 1000).toFixed(1)} s`}`);
    }
  }

  const of = (v: Variant) => results.filter((r) => r.variant === v);
  const med = (v: Variant, f: (r: RunResult) => number) => median(of(v).map(f));
  const toTarget = (v: Variant) => of(v).map((r) => r.msToTarget ?? Infinity);
  const errors = of('hetero-paced').flatMap((r) => r.roundTimes.map((t) => Math.abs(t.predictedMs - t.measuredMs) / t.measuredMs));
  const report = {
    benchmark: 'heterogeneous',
    quick: opts.quick,
    date: new Date().toISOString(),
    machine: machineInfo(),
    adapter: backend.description,
    setup: { speeds: SPEEDS, H, batch: BATCH, strategy: 'localsgd', target: TARGET, validationExamples: VALIDATION_EXAMPLES, totalSamples, seeds, pacedBudget: 'the server\'s default (pacing.ts roundBudgetMs): max(H steps of the fastest, 9 × the median overhead), from the medians so far; members stop at the budget (nearest step)', exchangeModel: 'in-thread exchange time ÷ N (members exchange at once)' },
    results,
    spreads: Object.fromEntries(VARIANTS.map((v) => [v, { utilization: spread(of(v).map((r) => r.utilization)), finalTestAccuracy: spread(of(v).map((r) => r.finalTestAccuracy)), msToTarget: spread(toTarget(v).filter(Number.isFinite)) }])),
    summary: {
      /** Busy compute ÷ modeled wall, mean over workers, median over seeds. */
      paced_utilization: med('hetero-paced', (r) => r.utilization),
      fixed_utilization: med('hetero-fixed', (r) => r.utilization),
      /** Median time to the validation target, fixed H ÷ paced (Infinity when fixed never got there). */
      paced_speedup_to_target: median(toTarget('hetero-fixed')) / median(toTarget('hetero-paced')),
      /** Test accuracy points lost against all-equal workers at equal samples (median over seeds). */
      paced_accuracy_drop_pts: 100 * (med('equal-fixed', (r) => r.finalTestAccuracy) - med('hetero-paced', (r) => r.finalTestAccuracy)),
      /** Median relative error of the predicted round time over every paced sync after the first. */
      autotune_round_time_error: errors.length ? median(errors) : null,
    },
    totalSeconds: (performance.now() - t0) / 1000,
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  log(`summary ${JSON.stringify(report.summary)}`);
  log(`wrote ${file}`);
}
