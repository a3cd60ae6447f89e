// One distributed training run of the Fashion-MNIST MLP with N in-process workers over an in-memory
// network (optionally with capped links): the convergence tests and benchmark call this in a
// Chromium page (WebGPU) and report accuracy, bytes on the wire and time to a target accuracy.
import { MemoryNetwork, type LinkFaults } from '@tabfleet/collective';
import type { Dataset } from '@tabfleet/data';
import type { OptimizerConfig } from '@tabfleet/nn';
import type { Backend } from '@tabfleet/tensor';
import { DgcCompressor } from './dgc';
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
  /** Evaluate every this many steps per worker (on `evalExamples` test examples). */
  evalEvery: number;
  evalExamples: number;
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
  evals: { step: number; accuracy: number; wallMs: number }[];
  /** Wall time until an evaluation first reached `stopAtAccuracy` (null: never). */
  msToTarget: number | null;
  wallMs: number;
  /** Mean bytes each worker put on the wire over the run. */
  bytesPerWorker: number;
  exchangeMs: number;
}

export async function runConvergence(backend: Backend, data: { train: Dataset; test: Dataset }, cfg: ConvergenceConfig, log: (line: string) => void = () => {}): Promise<ConvergenceResult> {
  const dgc = cfg.compression === 'dgc';
  const workers = mlpWorkers(backend, {
    workers: cfg.workers, data, batchSize: cfg.batchSize, optimizer: cfg.optimizer, seed: cfg.seed,
    strategy: { strategy: cfg.strategy, H: cfg.H, compression: cfg.compression, outerLr: cfg.outerLr ?? 0.7, outerMomentum: cfg.outerMomentum ?? 0.9 },
    compressor: dgc
      ? (engine) => new DgcCompressor(backend, engine.length, {
          // Momentum correction only where the gradient is compressed (ddp); deltas get plain error feedback.
          momentum: cfg.strategy === 'ddp' ? 0.9 : 0, clipNorm: cfg.strategy === 'ddp' ? cfg.clipNorm ?? 0 : 0,
          finalSparsity: cfg.sparsity ?? 0.999, warmupSteps: cfg.warmupSteps ?? 0,
        })
      : undefined,
  });
  await startWorkers(workers);
  const net = new MemoryNetwork({ faults: cfg.link, seed: cfg.seed ?? 1 });
  const evals: ConvergenceResult['evals'] = [];
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
      const e0 = performance.now();
      const ev = await workers[0].engine.evaluate(cfg.evalExamples);
      evalMs += performance.now() - e0;
      // Evaluation time is not training time.
      const wallMs = performance.now() - t0 - evalMs;
      evals.push({ step: r.step, accuracy: ev.accuracy, wallMs });
      log(`${cfg.strategy}/${cfg.compression} step ${r.step}: loss ${r.loss.toFixed(3)}, accuracy ${(100 * ev.accuracy).toFixed(2)}%, ${(wallMs / 1000).toFixed(1)} s`);
      if (cfg.stopAtAccuracy !== undefined && ev.accuracy >= cfg.stopAtAccuracy) {
        msToTarget ??= wallMs;
        return true;
      }
      return overTime;
    },
  });
  const wallMs = performance.now() - t0 - evalMs;
  const final = await workers[0].engine.evaluate();
  return {
    config: cfg, steps: workers[0].engine.step, syncs, finalAccuracy: final.accuracy, finalLoss: final.loss, testCount: final.count,
    evals, msToTarget, wallMs, bytesPerWorker: bytes, exchangeMs,
  };
}
