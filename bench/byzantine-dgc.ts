// DGC under the robust rule (issue 37's `dgc_robust_accuracy_drop_pts`): the byzantine benchmark's
// 16 LocalSGD workers of the Fashion-MNIST MLP, no attackers, averaged in ONE untrusted group of 16
// by CenteredClip, once with dense f32 deltas and once with DGC-sparse ones (error feedback, the
// sparsity warm-up, the sparsity the validation sweep below chose), over the same seeds. The drop is
// the dense runs' median test accuracy less the DGC runs', in points; its goal (0.5) was set before any run.
//
// One group of 16, not Moshpit groups: protocol's jobs.ts refuses DGC with groupSize (a sparse delta
// needs a reference every member of the group holds, and members of a new Moshpit group hold
// different models). One group of at most 16 is the untrusted path that takes DGC.
//
// A control beside it (`meanControl`, on by default): the same pair under the trusted ring's plain
// mean, so the drop splits into what DGC costs at this length anyway and what the robust rule adds.
// And a longer pair (`longer`): the robust rule's dense and DGC runs at 48 syncs, four times the
// cells' length, since DGC's error feedback returns what it held back only over later syncs. The
// summary key stays the 12-sync drop as first defined; the 48-sync drop is reported beside it
// (chosen after the 12-sync runs missed the goal and one 48-sync probe of seed 1 gave 0.39 points).
//
// The sparsity is chosen on the validation split (the last training examples, held out) before any
// test-split run: dense and DGC at each of VALIDATION_SPARSITIES, 12 syncs, VALIDATION_SEEDS; the
// sweep chooses the sparsest candidate whose median validation drop is within CHOICE_BOUND_PTS, and
// the test-split runs use that choice. The goal is met only when it is also the product's default
// for an untrusted job (protocol's UNTRUSTED_DELTA_SPARSITY), so the product runs what was measured.
//
// The rule's history: first it took the sparsest candidate within the goal itself, over seeds 1-3.
// It chose 2% (0.46 points on validation), whose test drop was 0.82 (byzantine.json, 2026-11-29):
// one validation accuracy on 5,000 examples has a standard error of about 0.5 points, so a choice at
// the goal's edge can miss it on test. The bound of half the goal and five validation seeds were set
// after that result and before the runs that replaced it.
//
// `measureDgcRobust` is what `npm run bench -- byzantine` calls; its runs go to child processes
// (bench/byzantine-dgc-child.ts), one per core up to `processes`.
import { fileURLToPath } from 'node:url';
import { MemoryNetwork } from '@tabfleet/collective';
import type { Dataset } from '@tabfleet/data';
import { DgcCompressor, defaultWarmupSyncs, holdOutTail, mlpWorkers, runSyncs, startWorkers } from '@tabfleet/distributed';
import { defaultsFor } from '@tabfleet/protocol';
import type { Backend } from '@tabfleet/tensor';
import { ROBUST_RULE, WORKERS, type JobSettings } from './byzantine-config';
import { ChildPool } from './child-pool';
import { median, spread, type Spread } from './stats';

/** The goal, fixed before the first run: DGC may cost at most this many points of test accuracy under the robust rule. */
export const DGC_ROBUST_GOAL_PTS = 0.5;
/** Syncs of the longer pair (quick: 4). */
export const LONGER_SYNCS = 48;
/** The final sparsity an untrusted LocalSGD job with DGC takes by default (protocol's defaultsFor). */
export const DGC_SPARSITY = defaultsFor('localsgd', 'dgc', 'mlp-fashion', 'untrusted').sparsity;
/** The validation sweep's candidates: a trusted job's default (what tune chose for 4 workers) and three denser. */
export const VALIDATION_SPARSITIES = [0.99, 0.98, 0.95, 0.9];
/** Seeds of the validation sweep (quick: 1). */
export const VALIDATION_SEEDS = [1, 2, 3, 4, 5];
/** The sweep's bound on a candidate's median validation drop: half the goal, room for the split's noise. */
export const CHOICE_BOUND_PTS = DGC_ROBUST_GOAL_PTS / 2;
export const CHOICE_RULE = `the sparsest candidate whose median validation accuracy is within ${CHOICE_BOUND_PTS} points of the dense runs' (none: the densest)`;

export type Payloads = 'dense' | 'dgc';
/** The robust rule in one group, or the ring's plain mean (the control). */
export type Averaging = typeof ROBUST_RULE | 'mean';

export interface DgcRun {
  payloads: Payloads;
  averaging: Averaging;
  seed: number;
  syncs: number;
  /** Examples evaluated at the end (null: all of them). */
  evalExamples: number | null;
  /** DGC's final sparsity (dense runs: null). */
  sparsity: number | null;
  /** Evaluated on the validation split (the sweep) or the test set. */
  split: 'validation' | 'test';
}

export interface DgcRunResult extends DgcRun {
  steps: number;
  testAccuracy: number;
  testLoss: number;
  testCount: number;
  /** Contributions the group's owners refused, summed over syncs (no attackers: every one honest). */
  refusedHonest: number;
  /** Median over syncs of the bytes one worker sent (mean over workers). */
  bytesPerWorkerPerSync: number;
  wallMs: number;
}

/** One run in this process: WORKERS members in one group averaging by the robust rule (or in one ring by the mean). */
export async function runDgcCell(backend: Backend, data: { train: Dataset; test: Dataset }, run: DgcRun, job: JobSettings): Promise<DgcRunResult> {
  const t0 = performance.now();
  // The byzantine cells train on the same examples (the validation split held out, unused here).
  const { head: train, tail: validation } = holdOutTail(data.train, job.validationExamples);
  const evaluated = run.split === 'validation' ? validation : data.test;
  const dgc = run.payloads === 'dgc';
  const workers = mlpWorkers(backend, {
    workers: WORKERS, data: { train, test: evaluated }, batchSize: job.batchSize, seed: run.seed, optimizer: job.optimizer,
    strategy: { strategy: 'localsgd', H: job.H, compression: dgc ? 'dgc' : 'none', outerLr: 1, outerMomentum: 0 },
    // As a volunteer's job engine sets up DGC for LocalSGD deltas: plain error feedback, the warm-up counted in syncs.
    compressor: dgc
      ? (engine) => new DgcCompressor(backend, engine.length, { momentum: 0, clipNorm: 0, finalSparsity: run.sparsity ?? DGC_SPARSITY, warmupSteps: defaultWarmupSyncs(run.syncs) })
      : undefined,
  });
  await startWorkers(workers);
  const group = run.averaging === 'mean' ? undefined : { rule: run.averaging };
  const reports = await runSyncs(workers, new MemoryNetwork({ seed: run.seed }), { syncs: run.syncs, group });
  const test = await workers[0].engine.evaluate(run.evalExamples ?? Infinity, 500, evaluated);
  return {
    ...run, steps: workers[0].engine.step, testAccuracy: test.accuracy, testLoss: test.loss, testCount: test.count,
    refusedHonest: reports.reduce((n, r) => n + r.refused.length, 0),
    bytesPerWorkerPerSync: median(reports.map((r) => r.bytesSent.reduce((a, b) => a + b, 0) / r.bytesSent.length)),
    wallMs: performance.now() - t0,
  };
}

export interface DgcRobustReport {
  description: string;
  quick: boolean;
  rule: typeof ROBUST_RULE;
  workers: number;
  /** The DGC sparsity of the test-split runs: the sweep's choice (without a sweep, the product's default). */
  sparsity: number;
  job: JobSettings;
  seeds: number[];
  syncs: number;
  runs: DgcRunResult[];
  /** Test accuracy by payloads, in seed order (the robust rule's runs). */
  perSeed: { seed: number; dense: number; dgc: number }[];
  medians: { dense: number; dgc: number };
  spread: { dense: Spread | null; dgc: Spread | null };
  /** Median dense − median DGC test accuracy, in points (positive: DGC lost accuracy). */
  dgc_robust_accuracy_drop_pts: number;
  /** The same pair under the ring's plain mean (null without `meanControl`): DGC's cost without the robust rule. */
  meanControl: { perSeed: { seed: number; dense: number; dgc: number }[]; medians: { dense: number; dgc: number }; dgc_mean_accuracy_drop_pts: number } | null;
  /** The robust rule's pair at `syncs` (LONGER_SYNCS; null without `longer`): DGC's cost once error feedback has had time. */
  longer: { syncs: number; perSeed: { seed: number; dense: number; dgc: number }[]; medians: { dense: number; dgc: number }; dgc_robust_accuracy_drop_pts: number } | null;
  /** The validation split's sweep of sparsities, and whether its choice is the product's default. */
  validation: ValidationSweep | null;
  /** Median bytes per worker per sync, DGC ÷ dense. */
  bytes_ratio: number;
  goal: number;
  /** The test-split drop within the goal, and the validation sweep chose the default. */
  met: boolean;
  wallMs: number;
}

export interface ValidationSweep {
  syncs: number;
  seeds: number[];
  dense: { perSeed: number[]; median: number };
  candidates: { sparsity: number; perSeed: number[]; median: number; drop_pts: number }[];
  rule: string;
  chosen: number;
  /** The choice is protocol's UNTRUSTED_DELTA_SPARSITY, which the test-split runs use. */
  chosenIsDefault: boolean;
}

export const DESCRIPTION = `dgc_robust_accuracy_drop_pts: ${WORKERS} LocalSGD workers of the Fashion-MNIST MLP (the byzantine benchmark's job), no attackers, averaged `
  + `in one untrusted group of ${WORKERS} by ${ROBUST_RULE}; the median test accuracy over seeds with dense f32 deltas less that with DGC deltas `
  + '(at the sparsity the validation sweep chose, which must be an untrusted job\'s default; f16 values, error feedback, sparsity warm-up), in points. One group, not Moshpit groups: '
  + 'jobs.ts refuses DGC with groupSize (members of a new Moshpit group hold different models, so a sparse delta has no shared reference). Each owner reads '
  + 'a sparse contribution as dense with zeros where the member sent nothing, then screens and combines the part as any other. meanControl: the same pair '
  + 'averaged by the trusted ring\'s plain mean (sparse allgather for DGC), so the drop splits into DGC\'s own cost at this length and the rule\'s share. '
  + `validation: the robust rule's dense and DGC runs at ${VALIDATION_SPARSITIES.join(', ')} on the validation split (training examples held out), `
  + `${VALIDATION_SEEDS.length} seeds, the same length, run first; it chooses ${CHOICE_RULE}, the test-split runs use that choice, and the report says whether it is the default.`;

const CHILD = fileURLToPath(new URL('./byzantine-dgc-child.ts', import.meta.url));

export interface DgcRobustOptions {
  quick: boolean;
  job: JobSettings;
  /** Child processes running side by side (default 2). */
  processes?: number;
  /** Also run the pair under the ring's plain mean (default true). */
  meanControl?: boolean;
  /** Also run the robust rule's pair at LONGER_SYNCS (default true). */
  longer?: boolean;
  /** Run the validation sweep of VALIDATION_SPARSITIES first and use its choice (default true; false: the product's default). */
  sweep?: boolean;
  log?: (line: string) => void;
}

/**
 * The validation sweep, then dense and DGC runs at its choice over the seeds, by the robust rule and
 * (control) the mean, and the robust rule's longer pair (quick: one seed, two syncs and four, 1,000
 * examples evaluated; full: 5 validation seeds and 3 test seeds, 12 syncs and 48, the whole test
 * set and validation split).
 */
export async function measureDgcRobust(opts: DgcRobustOptions): Promise<DgcRobustReport> {
  const t0 = performance.now();
  const log = opts.log ?? (() => {});
  const seeds = opts.quick ? [1] : [1, 2, 3];
  const syncs = opts.quick ? 2 : 12;
  const evalExamples = opts.quick ? 1000 : null;
  const pool = new ChildPool<{ run: DgcRun; job: JobSettings }, DgcRunResult>(CHILD, Math.max(1, opts.processes ?? 2));
  const averagings: Averaging[] = opts.meanControl === false ? [ROBUST_RULE] : [ROBUST_RULE, 'mean'];
  const longerSyncs = opts.quick ? 4 : LONGER_SYNCS;
  const runAll = (plan: DgcRun[]) => Promise.all(plan.map(async (run) => {
    const r = await pool.run({ run, job: opts.job });
    log(`dgc-robust ${run.payloads}${run.sparsity === null ? '' : ` ${run.sparsity}`} by ${run.averaging} seed ${run.seed}, ${run.syncs} syncs: `
      + `${run.split} ${(100 * r.testAccuracy).toFixed(2)}%, ${Math.round(r.bytesPerWorkerPerSync)} B/worker/sync, ${r.refusedHonest} refused, ${(r.wallMs / 1000).toFixed(1)} s`);
    return r;
  }));
  let runs: DgcRunResult[];
  try {
    // The sweep first: its choice is the sparsity the test-split runs use.
    const validationSeeds = opts.quick ? [1] : VALIDATION_SEEDS;
    const swept = opts.sweep === false ? [] : await runAll(validationSeeds.flatMap((seed) => [null, ...VALIDATION_SPARSITIES].map((sparsity): DgcRun => (
      { payloads: sparsity === null ? 'dense' : 'dgc', averaging: ROBUST_RULE, seed, syncs, evalExamples, sparsity, split: 'validation' }))));
    const sparsity = sweepOf(syncs, swept)?.chosen ?? DGC_SPARSITY;
    if (opts.sweep !== false) log(`dgc-robust: the validation sweep chose sparsity ${sparsity} (${CHOICE_RULE}); the product's default is ${DGC_SPARSITY}`);
    const onTest = (payloads: Payloads, averaging: Averaging, length: number, seed: number): DgcRun => ({
      payloads, averaging, seed, syncs: length, evalExamples, sparsity: payloads === 'dgc' ? sparsity : null, split: 'test',
    });
    // The longer pair first (the longest runs), then the robust rule's and the control's.
    const tests = [
      ...(opts.longer === false ? [] : [{ averaging: ROBUST_RULE, syncs: longerSyncs }]), ...averagings.map((averaging) => ({ averaging, syncs })),
    ].flatMap((x) => seeds.flatMap((seed) => (['dense', 'dgc'] as const).map((p) => onTest(p, x.averaging, x.syncs, seed))));
    runs = [...(await runAll(tests)), ...swept];
  } finally {
    pool.close();
  }
  return summarizeDgc(opts, seeds, syncs, runs, performance.now() - t0);
}

const points = (dense: number, dgc: number) => Math.round((dense - dgc) * 1e4) / 100;

/** The validation sweep: each candidate's median drop, and the sparsest within CHOICE_BOUND_PTS (none: the densest). */
export function sweepOf(syncs: number, runs: DgcRunResult[]): ValidationSweep | null {
  const swept = runs.filter((r) => r.split === 'validation');
  if (!swept.length) return null;
  const seeds = [...new Set(swept.map((r) => r.seed))].sort((a, b) => a - b);
  const accuracies = (sparsity: number | null) => seeds.map((seed) => swept.find((r) => r.seed === seed && r.sparsity === sparsity)!.testAccuracy);
  const dense = accuracies(null);
  const candidates = VALIDATION_SPARSITIES.map((sparsity) => {
    const perSeed = accuracies(sparsity);
    return { sparsity, perSeed, median: median(perSeed), drop_pts: points(median(dense), median(perSeed)) };
  });
  const within = candidates.filter((c) => c.drop_pts <= CHOICE_BOUND_PTS).sort((a, b) => b.sparsity - a.sparsity);
  const chosen = within.length ? within[0].sparsity : Math.min(...VALIDATION_SPARSITIES);
  return { syncs, seeds, dense: { perSeed: dense, median: median(dense) }, candidates, rule: CHOICE_RULE, chosen, chosenIsDefault: chosen === DGC_SPARSITY };
}

export function summarizeDgc(opts: Pick<DgcRobustOptions, 'quick' | 'job'>, seeds: number[], syncs: number, all: DgcRunResult[], wallMs: number): DgcRobustReport {
  const runs = all.filter((r) => r.split === 'test');
  const pair = (averaging: Averaging, length = syncs) => {
    const of = (p: Payloads, seed: number) => runs.find((r) => r.payloads === p && r.averaging === averaging && r.seed === seed && r.syncs === length)!;
    const perSeed = seeds.map((seed) => ({ seed, dense: of('dense', seed).testAccuracy, dgc: of('dgc', seed).testAccuracy }));
    const medians = { dense: median(perSeed.map((s) => s.dense)), dgc: median(perSeed.map((s) => s.dgc)) };
    return { perSeed, medians, drop: points(medians.dense, medians.dgc) };
  };
  const { perSeed, medians, drop } = pair(ROBUST_RULE);
  const control = runs.some((r) => r.averaging === 'mean') ? pair('mean') : null;
  const longerSyncs = runs.find((r) => r.syncs !== syncs)?.syncs;
  const longer = longerSyncs === undefined ? null : pair(ROBUST_RULE, longerSyncs);
  const bytes = (p: Payloads) => median(runs.filter((r) => r.payloads === p && r.averaging === ROBUST_RULE && r.syncs === syncs).map((r) => r.bytesPerWorkerPerSync));
  const validation = sweepOf(syncs, all);
  return {
    description: DESCRIPTION, quick: opts.quick, rule: ROBUST_RULE, workers: WORKERS, sparsity: runs.find((r) => r.payloads === 'dgc')?.sparsity ?? DGC_SPARSITY,
    job: opts.job, seeds, syncs, runs: all, perSeed, medians,
    spread: { dense: spread(perSeed.map((s) => s.dense)), dgc: spread(perSeed.map((s) => s.dgc)) },
    dgc_robust_accuracy_drop_pts: drop,
    meanControl: control && { perSeed: control.perSeed, medians: control.medians, dgc_mean_accuracy_drop_pts: control.drop },
    longer: longer && { syncs: longerSyncs!, perSeed: longer.perSeed, medians: longer.medians, dgc_robust_accuracy_drop_pts: longer.drop },
    validation,
    bytes_ratio: bytes('dgc') / bytes('dense'), goal: DGC_ROBUST_GOAL_PTS, met: drop <= DGC_ROBUST_GOAL_PTS && validation?.chosenIsDefault !== false, wallMs,
  };
}
