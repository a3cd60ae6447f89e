// One distributed training run of the Fashion-MNIST MLP with N in-process workers over an in-memory
// network (optionally with capped links): the convergence tests and benchmark call this in a
// Chromium page (WebGPU) and report accuracy, bytes on the wire and time to a target accuracy.
//
// With `validationExamples`, the last that many training examples are held out (never trained on):
// the evaluations during the run use a fixed subset of them, a run "reaches" the target only when
// the whole test set confirms it, and the final accuracy is reported on both. Hyperparameters are
// chosen on the validation figure (bench/tune.ts), so the test figure stays unseen.
import { MemoryNetwork, type LinkFaults } from '@tabfleet/collective';
import type { Dataset } from '@tabfleet/data';
import type { OptimizerConfig } from '@tabfleet/nn';
import type { Backend } from '@tabfleet/tensor';
import { DgcCompressor } from './dgc';
import type { ModelEngine } from './engine';
import { runSyncs, startWorkers } from './simulate';
import type { CompressionName, StrategyName } from './strategies';
import { mlpWorkers } from './workers';

export interface ConvergenceConfig {
  strategy: StrategyName;
  compression: CompressionName;
  H: number;
  workers: number;
  batchSize: number;
  optimizer: OptimizerConfig;
  /** Stop after this many optimizer steps per worker. */
  maxSteps: number;
  /** Also stop once the test accuracy reaches this (after an evaluation). */
  stopAtAccuracy?: number;
  /** Evaluate every this many steps per worker (on `evalExamples` validation examples, or test examples without a validation split). */
  evalEvery: number;
  evalExamples: number;
  /** Hold out the last this many training examples as the validation set (0 or absent: none). */
  validationExamples?: number;
  /** DGC: final sparsity, warm-up length (syncs) and local gradient clipping (ddp; 0 = off). */
  sparsity?: number;
  warmupSteps?: number;
  clipNorm?: number;
  outerLr?: number;
  outerMomentum?: number;
  /** Stop once training has taken this long (wall time, evaluations excluded). */
  maxWallMs?: number;
  /** Faults (bandwidth cap, latency) on every link. */
  link?: LinkFaults;
  seed?: number;
}

export interface ConvergenceResult {
  config: ConvergenceConfig;
  steps: number;
  syncs: number;
  finalAccuracy: number;
  finalLoss: number;
  /** Accuracy on the full test set at the end. */
  testCount: number;
  /** With a validation split: accuracy on the whole validation set at the end, and its size. */
  finalValidationAccuracy: number | null;
  validationCount: number;
  /** Examples trained on (the training set minus the validation split). */
  trainCount: number;
  /** `on`: what the evaluation used (the validation subset, or the test set without a split). */
  evals: { step: number; accuracy: number; wallMs: number; on: 'validation' | 'test' }[];
  /** Evaluations of the whole test set that a validation evaluation at or above the target triggered. */
  confirmations: { step: number; wallMs: number; validationAccuracy: number; testAccuracy: number }[];
  /** Wall time until the target was reached (confirmed on the whole test set with a validation split); null: never. */
  msToTarget: number | null;
  wallMs: number;
  /** Mean bytes each worker put on the wire over the run. */
  bytesPerWorker: number;
  exchangeMs: number;
}

/** DGC as the convergence runs configure it. */
export function dgcCompressorFor(backend: Backend, cfg: Pick<ConvergenceConfig, 'strategy' | 'clipNorm' | 'sparsity' | 'warmupSteps'>): (engine: ModelEngine) => DgcCompressor {
  return (engine) => new DgcCompressor(backend, engine.length, {
    // Momentum correction only where the gradient is compressed (ddp); deltas get plain error feedback.
    momentum: cfg.strategy === 'ddp' ? 0.9 : 0, clipNorm: cfg.strategy === 'ddp' ? cfg.clipNorm ?? 0 : 0,
    finalSparsity: cfg.sparsity ?? 0.999, warmupSteps: cfg.warmupSteps ?? 0,
  });
}

/** The first `count − n` examples and the last `n` (views, no copy). */
export function holdOutTail(ds: Dataset, n: number): { head: Dataset; tail: Dataset } {
  if (!Number.isInteger(n) || n < 0 || n >= ds.count) throw new Error(`cannot hold out ${n} of ${ds.count} examples`);
  const cut = ds.count - n;
  const xPer = ds.features, yPer = ds.labelsPerExample;
  return {
    head: { ...ds, count: cut, x: ds.x.subarray(0, cut * xPer), y: ds.y.subarray(0, cut * yPer) },
    tail: { ...ds, count: n, x: ds.x.subarray(cut * xPer), y: ds.y.subarray(cut * yPer) },
  };
}

export async function runConvergence(backend: Backend, data: { train: Dataset; test: Dataset }, cfg: ConvergenceConfig, log: (line: string) => void = () => {}): Promise<ConvergenceResult> {
  const dgc = cfg.compression === 'dgc';
  const split = cfg.validationExamples ? holdOutTail(data.train, cfg.validationExamples) : null;
  const validation = split?.tail ?? null;
  const workers = mlpWorkers(backend, {
    workers: cfg.workers, data: { train: split?.head ?? data.train, test: data.test }, batchSize: cfg.batchSize, optimizer: cfg.optimizer, seed: cfg.seed,
    strategy: { strategy: cfg.strategy, H: cfg.H, compression: cfg.compression, outerLr: cfg.outerLr ?? 0.7, outerMomentum: cfg.outerMomentum ?? 0.9 },
    compressor: dgc ? dgcCompressorFor(backend, cfg) : undefined,
  });
  await startWorkers(workers);
  const net = new MemoryNetwork({ faults: cfg.link, seed: cfg.seed ?? 1 });
  const evals: ConvergenceResult['evals'] = [];
  const confirmations: ConvergenceResult['confirmations'] = [];
  const t0 = performance.now();
  let msToTarget: number | null = null, bytes = 0, exchangeMs = 0, syncs = 0, evalMs = 0;
  const stepsPerSync = workers[0].strategy.stepsPerSync;
  await runSyncs(workers, net, {
    syncs: Math.ceil(cfg.maxSteps / stepsPerSync),
    onSync: async (r) => {
      syncs = r.seq;
      bytes += r.bytesSent.reduce((a, b) => a + b, 0) / r.bytesSent.length;
      exchangeMs += r.exchangeMs;
      const overTime = cfg.maxWallMs !== undefined && performance.now() - t0 - evalMs > cfg.maxWallMs;
      if (r.step % cfg.evalEvery >= stepsPerSync && r.step < cfg.maxSteps && !overTime) return false;
      const engine = workers[0].engine;
      const e0 = performance.now();
      // Training time so far: evaluations are not training time.
      const wallMs = e0 - t0 - evalMs;
      // A fixed subset: the first evalExamples of the validation set (or of the test set without one).
      const ev = await engine.evaluate(cfg.evalExamples, 500, validation ?? data.test);
      const on = validation ? 'validation' : 'test';
      evals.push({ step: r.step, accuracy: ev.accuracy, wallMs, on });
      let reached = cfg.stopAtAccuracy !== undefined && ev.accuracy >= cfg.stopAtAccuracy;
      if (reached && validation) {
        // The validation subset says so; the whole test set decides.
        const test = await engine.evaluate();
        confirmations.push({ step: r.step, wallMs, validationAccuracy: ev.accuracy, testAccuracy: test.accuracy });
        reached = test.accuracy >= cfg.stopAtAccuracy!;
      }
      evalMs += performance.now() - e0;
      log(`${cfg.strategy}/${cfg.compression} step ${r.step}: loss ${r.loss.toFixed(3)}, ${on} accuracy ${(100 * ev.accuracy).toFixed(2)}%, ${(wallMs / 1000).toFixed(1)} s`);
      if (reached) {
        msToTarget ??= wallMs;
        return true;
      }
      return overTime;
    },
  });
  const wallMs = performance.now() - t0 - evalMs;
  const final = await workers[0].engine.evaluate();
  const finalValidation = validation ? await workers[0].engine.evaluate(Infinity, 500, validation) : null;
  return {
    config: cfg, steps: workers[0].engine.step, syncs, finalAccuracy: final.accuracy, finalLoss: final.loss, testCount: final.count,
    finalValidationAccuracy: finalValidation?.accuracy ?? null, validationCount: finalValidation?.count ?? 0, trainCount: split?.head.count ?? data.train.count,
    evals, confirmations, msToTarget, wallMs, bytesPerWorker: bytes, exchangeMs,
  };
}
