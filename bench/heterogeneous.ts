// `npm run bench -- heterogeneous`: unequal volunteers. 8 LocalSGD workers (WebGPU through Dawn in
// Node, one device shared, so each worker's compute is timed on its own and a sync is modeled as
// max(local) + exchange + max(apply), as on 8 machines), slowed by factors 1, 1, 1, 2, 2, 4, 4, 8
// (each sleeps (f − 1) × its typical compute), in fixed-H rounds and in paced rounds, and all at
// factor 1 as the control; two workloads (heterogeneous-workloads.ts): the Fashion-MNIST MLP and a
// small GPT on the fortunes corpus. Every run of a workload trains on the same number of samples;
// utilization is busy compute ÷ modeled wall (mean over workers); the target is on a validation
// hold-out; the final figure is on the test set. Paced rounds run as the server and runtime run them:
// the server's default budget (pacing.ts roundBudgetMs), each member given the steps that fit it (at
// most the server's MAX_STEPS_FACTOR × H) and stopping at the budget; the first sync, before any pace
// is known, time-boxed (unmeasuredWork); the last syncs cut to the samples left, as the server
// cuts a job's to its target, so paced runs train on the samples the others do.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { MemoryNetwork } from '@tabfleet/collective';
import { runSyncs, startWorkers, type SyncReport } from '@tabfleet/distributed';
import { repoRoot } from '@tabfleet/headless';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { jobSpecSchema } from '@tabfleet/protocol';
import { EXCHANGE_BUDGET_FACTOR, FIRST_WORK_MS, MAX_STEPS_FACTOR, roundBudgetMs, unmeasuredWork } from '@tabfleet/server/testing';
import { loadWorkload, type Workload, type WorkloadName } from './heterogeneous-workloads';
import { benchCommand, runRecord } from './machine';
import type { BenchOptions } from './run';
import { median, spread } from './stats';

export const SPEEDS = [1, 1, 1, 2, 2, 4, 4, 8];

/** A full collection before each worker's timed work (runSyncs' beforeLocal: the 8 workers share this heap). */
v8.setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;
const EQUAL = SPEEDS.map(() => 1);
const WORKLOADS: WorkloadName[] = ['mlp', 'gpt'];
/** The GPT's target: the worst variant's best validation loss (median over seeds), plus this. */
const LOSS_TARGET_MARGIN = 0.01;

type Variant = 'equal-fixed' | 'hetero-fixed' | 'hetero-paced';
const VARIANTS: Variant[] = ['equal-fixed', 'hetero-fixed', 'hetero-paced'];

interface Evaluation { samples: number; modeledMs: number; value: number }

interface RunResult {
  workload: WorkloadName;
  variant: Variant;
  seed: number;
  syncs: number;
  samples: number;
  /** Modeled time: Σ over syncs of max(local) + exchange + max(apply). */
  modeledMs: number;
  utilization: number;
  msToTarget: number | null;
  samplesToTarget: number | null;
  /** The workload's metric (accuracy or loss) on the whole validation hold-out and on the test set. */
  finalValidation: number;
  finalTest: number;
  stepsPerWorker: number[];
  evals: Evaluation[];
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

async function runOne(w: Workload, variant: Variant, seed: number, log: (s: string) => void): Promise<RunResult> {
  const workers = w.workers(seed, variant === 'equal-fixed' ? EQUAL : SPEEDS);
  await startWorkers(workers);
  // The job the paced variant stands for: the server's default budget rule reads its H and strategy.
  const pacedJob = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: w.H, pacing: 'paced', trust: 'trusted',
    hyperparameters: { lr: 0.05, batchSize: w.batch }, targetSteps: 1 });
  let budgetMs = Infinity;
  const totalSamples = w.stepsPerWorker * SPEEDS.length * w.batch;
  const evalEvery = totalSamples / w.evaluations;
  let samples = 0, modeledMs = 0, busyMs = 0, nextEval = evalEvery, lastOverheadMs = 0;
  // As the server paces it: a time box until paces are known, the last syncs cut to the samples left.
  const stepsLeft = () => Math.ceil((totalSamples - samples) / (SPEEDS.length * w.batch));
  const first = unmeasuredWork(pacedJob, stepsLeft());
  const pace = variant === 'hetero-paced'
    ? { get budgetMs() { return budgetMs; }, maxSteps: MAX_STEPS_FACTOR * w.H, firstSteps: first.steps, firstBudgetMs: first.budgetMs, get stepsLeft() { return stepsLeft(); } }
    : undefined;
  const evals: Evaluation[] = [];
  const roundTimes: RunResult['roundTimes'] = [];
  // For the budget, as the server keeps them (pacing.ts): what each sync took beyond its planned
  // local work (its SyncTimeModel overhead), the exchange before that is known (one member's share:
  // the server's round clock, begin to commit), and each worker's ms per step (slowdown included).
  const overheads: number[] = [];
  const exchanges: number[] = [];
  const paces: number[][] = SPEEDS.map(() => []);
  const syncLog: RunResult['syncLog'] = [];
  const ms = (xs: number[]) => xs.map((x) => Math.round(x));
  const reports = await runSyncs(workers, new MemoryNetwork({ seed }), {
    syncs: 100_000,
    pace,
    beforeLocal: collectGarbage,
    onSync: async (r) => {
      const measured = roundMs(r);
      syncLog.push({ steps: r.steps, stepsMs: ms(r.stepsMs), localMs: ms(r.localMs), exchangeMs: Math.round(r.exchangeMs), applyMs: ms(r.applyMs) });
      if (r.predictedLocalMs) roundTimes.push({ predictedMs: Math.max(...r.predictedLocalMs) + lastOverheadMs, measuredMs: measured });
      // What a round costs beyond its steps (payloads, exchange, apply): the predictor carries the last one forward.
      lastOverheadMs = measured - Math.max(...r.stepsMs);
      exchanges.push(r.exchangeMs / r.localMs.length);
      if (r.predictedLocalMs) overheads.push(Math.max(0, measured - Math.max(...r.predictedLocalMs)));
      r.stepsMs.forEach((t, i) => paces[i].push(t / r.steps[i]));
      // The server's default budget from the medians so far (the exchange after sync 1's shader compiles).
      const overheadMs = overheads.length ? median(overheads) : exchanges.length > 1 ? median(exchanges.slice(1)) : exchanges[0];
      if (pace) budgetMs = roundBudgetMs(pacedJob, paces.map(median), overheadMs)!;
      samples += r.steps.reduce((a, n) => a + n * w.batch, 0);
      modeledMs += measured;
      busyMs += r.localMs.reduce((a, b) => a + b, 0) + r.applyMs.reduce((a, b) => a + b, 0);
      if (samples >= nextEval || samples >= totalSamples) {
        nextEval += evalEvery;
        const value = await w.validate(workers[0].engine);
        evals.push({ samples, modeledMs, value });
        log(`${w.name} ${variant} seed ${seed}: ${samples} samples, validation ${w.metric} ${value.toFixed(4)}, modeled ${(modeledMs / 1000).toFixed(1)} s, ` +
          `utilization ${(busyMs / (SPEEDS.length * modeledMs)).toFixed(2)}, steps this sync ${r.steps.join(' ')}`);
      }
      return samples >= totalSamples;
    },
  });
  const final = await w.final(workers[0].engine);
  log(`${w.name} ${variant} seed ${seed}: test ${w.metric} ${final.test.toFixed(4)}, ${reports.length} syncs, modeled ${(modeledMs / 1000).toFixed(1)} s`);
  return {
    workload: w.name, variant, seed, syncs: reports.length, samples, modeledMs, utilization: busyMs / (SPEEDS.length * modeledMs), msToTarget: null, samplesToTarget: null,
    finalValidation: final.validation, finalTest: final.test, stepsPerWorker: workers.map((x) => x.engine.step), evals, roundTimes, syncLog,
  };
}

const reaches = (w: Workload, value: number, target: number) => (w.metric === 'accuracy' ? value >= target : value <= target);

/** The target of a workload: its fixed one, or the worst variant's best validation loss (median over seeds) + the margin. */
function targetOf(w: Workload, runs: RunResult[]): number {
  if (w.target !== null) return w.target;
  const bestOf = (v: Variant) => median(runs.filter((r) => r.variant === v).map((r) => Math.min(...r.evals.map((e) => e.value))));
  return Math.max(...VARIANTS.map(bestOf)) * (1 + LOSS_TARGET_MARGIN);
}

function summaryOf(w: Workload, runs: RunResult[]) {
  const of = (v: Variant) => runs.filter((r) => r.variant === v);
  const med = (v: Variant, f: (r: RunResult) => number) => median(of(v).map(f));
  const toTarget = (v: Variant) => of(v).map((r) => r.msToTarget ?? Infinity);
  const errors = of('hetero-paced').flatMap((r) => r.roundTimes.map((t) => Math.abs(t.predictedMs - t.measuredMs) / t.measuredMs));
  return {
    /** Busy compute ÷ modeled wall, mean over workers, median over seeds. */
    paced_utilization: med('hetero-paced', (r) => r.utilization),
    fixed_utilization: med('hetero-fixed', (r) => r.utilization),
    /** Median time to the validation target, fixed H ÷ paced (Infinity when fixed never got there). */
    paced_speedup_to_target: median(toTarget('hetero-fixed')) / median(toTarget('hetero-paced')),
    /** The test metric against all-equal workers at equal samples (median over seeds): accuracy points lost (MLP), or the relative loss increase (GPT). */
    ...(w.metric === 'accuracy'
      ? { paced_accuracy_drop_pts: 100 * (med('equal-fixed', (r) => r.finalTest) - med('hetero-paced', (r) => r.finalTest)) }
      : { paced_loss_increase: med('hetero-paced', (r) => r.finalTest) / med('equal-fixed', (r) => r.finalTest) - 1 }),
    /** Median relative error of the predicted round time over every paced sync after the first. */
    autotune_round_time_error: errors.length ? median(errors) : null,
  };
}

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'heterogeneous.quick.json' : 'heterogeneous.json');
  const seeds = opts.quick ? [1] : [1, 2, 3];
  const log = (s: string) => console.log(`[heterogeneous] ${s}`);
  const t0 = Date.now();
  const backend = await createNodeGpuBackend();
  const workloads: Record<string, unknown> = {};
  const results: RunResult[] = [];
  const summaries: Record<string, ReturnType<typeof summaryOf>> = {};
  for (const name of WORKLOADS) {
    const w = await loadWorkload(name, backend, opts.quick);
    const runs: RunResult[] = [];
    for (const seed of seeds) for (const variant of VARIANTS) runs.push(await runOne(w, variant, seed, log));
    const target = targetOf(w, runs);
    for (const r of runs) {
      const hit = r.evals.find((e) => reaches(w, e.value, target));
      r.msToTarget = hit?.modeledMs ?? null;
      r.samplesToTarget = hit?.samples ?? null;
    }
    const spreads = Object.fromEntries(VARIANTS.map((v) => {
      const of = runs.filter((r) => r.variant === v);
      return [v, { utilization: spread(of.map((r) => r.utilization)), finalTest: spread(of.map((r) => r.finalTest)),
        msToTarget: spread(of.flatMap((r) => (r.msToTarget === null ? [] : [r.msToTarget]))) }];
    }));
    workloads[name] = {
      ...w.setup, metric: w.metric, H: w.H, batch: w.batch, totalSamples: w.stepsPerWorker * SPEEDS.length * w.batch, target, spreads,
    };
    summaries[name] = summaryOf(w, runs);
    results.push(...runs);
    log(`${name} summary ${JSON.stringify(summaries[name])}`);
  }
  const { mlp, gpt } = summaries;
  const report = {
    benchmark: 'heterogeneous',
    ...runRecord(t0, benchCommand('heterogeneous', opts)),
    quick: opts.quick,
    adapter: backend.description,
    setup: {
      speeds: SPEEDS, seeds, strategy: 'localsgd', workloads,
      pacedBudget: `the server's default (pacing.ts roundBudgetMs): max(H steps of the fastest, ${EXCHANGE_BUDGET_FACTOR} × the median overhead beyond the planned ` +
        `local work), at most ${MAX_STEPS_FACTOR}H steps of the fastest, snapped to two whole steps of the slowest member that fits twice that; from the medians so ` +
        `far; members stop at the budget (nearest step); the first sync ${FIRST_WORK_MS} ms of steps each (paces unknown; at most ${MAX_STEPS_FACTOR}H), the last cut to the samples left (no budget)`,
      exchangeModel: 'in-thread exchange time ÷ N (members exchange at once)',
    },
    results,
    /** The MLP's figures under the names, and the GPT's prefixed gpt_. */
    summary: { ...mlp, ...Object.fromEntries(Object.entries(gpt).map(([k, v]) => [`gpt_${k}`, v])) },
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  log(`summary ${JSON.stringify(report.summary)}`);
  log(`wrote ${file}`);
}
