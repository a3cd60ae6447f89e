// One training run of a GPT on token windows: N in-process workers synced over an in-memory network
// (optionally with capped links), or one worker alone, evaluated on validation windows every few
// steps. `npm run bench -- lm` calls this in a Chromium page (WebGPU) and compares the runs at equal
// tokens and by time to a validation-loss target.
//
// Two clocks. `wallMs` is what this page took: its workers share one device, so their compute adds
// up. `modeledMs` counts a sync as the slowest worker's own compute plus the exchange (real, over the
// capped links) plus the slowest prepare/commit: what N volunteers with a GPU each would take.
// Evaluations are in neither.
import { MemoryNetwork, type LinkFaults } from '@tabfleet/collective';
import type { Dataset } from '@tabfleet/data';
import type { OptimizerConfig } from '@tabfleet/nn';
import type { Backend } from '@tabfleet/tensor';
import { dgcCompressorFor } from './convergence';
import { ModelEngine } from './engine';
import { runSyncs, startWorkers } from './simulate';
import type { CompressionName, StrategyName } from './strategies';
import { presetWorkers } from './workers';

/** Windows per evaluation batch: each batch is one readback, which costs milliseconds whatever its size. */
const EVAL_BATCH = 128;

export interface GptShape {
  layers: number;
  heads: number;
  width: number;
  context: number;
  vocab: number;
}

export interface LmRunConfig {
  gpt: GptShape;
  /** `single`: one worker, no syncs (the reference the distributed runs are held to). */
  strategy: StrategyName | 'single';
  compression: CompressionName;
  H: number;
  workers: number;
  /** Windows per batch per worker. */
  batchSize: number;
  optimizer: OptimizerConfig;
  /** Optimizer steps per worker. */
  maxSteps: number;
  /** Evaluate every this many steps per worker, on the first `evalWindows` validation windows. */
  evalEvery: number;
  evalWindows: number;
  sparsity?: number;
  warmupSteps?: number;
  outerLr?: number;
  outerMomentum?: number;
  link?: LinkFaults;
  seed?: number;
  /** The closing pass reads the first this many validation windows (default: every one). */
  finalWindows?: number;
}

export interface LmEval {
  step: number;
  /** Tokens trained on by all workers together. */
  tokens: number;
  loss: number;
  accuracy: number;
  wallMs: number;
  modeledMs: number;
}

export interface LmRunResult {
  config: LmRunConfig;
  steps: number;
  syncs: number;
  tokens: number;
  evals: LmEval[];
  /** Mean loss and next-token accuracy on the validation windows at the end. */
  finalLoss: number;
  finalAccuracy: number;
  validationTokens: number;
  wallMs: number;
  modeledMs: number;
  bytesPerWorker: number;
  exchangeMs: number;
  parameters: number;
}

export async function runLmConvergence(backend: Backend, data: { train: Dataset; validation: Dataset }, cfg: LmRunConfig, log: (line: string) => void = () => {}): Promise<LmRunResult> {
  if (data.train.features !== cfg.gpt.context || data.validation.features !== cfg.gpt.context) throw new Error(`windows of ${data.train.features} tokens for a context of ${cfg.gpt.context}`);
  const preset = { kind: 'gpt' as const, ...cfg.gpt };
  const seed = cfg.seed ?? 1;
  const tokensPerStep = cfg.batchSize * cfg.gpt.context * cfg.workers;
  const evalSet: Dataset = { ...data.validation, count: Math.min(cfg.evalWindows, data.validation.count) };
  const evals: LmEval[] = [];
  let evalMs = 0;
  const t0 = performance.now();
  const evaluateAt = async (engine: ModelEngine, step: number, modeledMs: number): Promise<void> => {
    const e0 = performance.now();
    const wallMs = e0 - t0 - evalMs;
    const ev = await engine.evaluate(Infinity, EVAL_BATCH, evalSet);
    evalMs += performance.now() - e0;
    const tokens = step * tokensPerStep;
    evals.push({ step, tokens, loss: ev.loss, accuracy: ev.accuracy, wallMs, modeledMs });
    log(`lm ${cfg.strategy}/${cfg.compression} ×${cfg.workers} step ${step}: validation loss ${ev.loss.toFixed(4)}, ${(wallMs / 1000).toFixed(1)} s (modeled ${(modeledMs / 1000).toFixed(1)} s)`);
  };

  let engine: ModelEngine, syncs = 0, bytes = 0, exchangeMs = 0, modeledMs = 0;
  if (cfg.strategy === 'single') {
    if (cfg.workers !== 1) throw new Error('a single-worker run has workers: 1');
    engine = new ModelEngine(backend, {
      preset, seed, optimizer: cfg.optimizer, batchSize: cfg.batchSize, train: data.train, test: data.validation,
      shard: Int32Array.from({ length: data.train.count }, (_, i) => i), dataSeed: 1000,
    });
    while (engine.step < cfg.maxSteps) {
      const s0 = performance.now();
      await engine.trainSteps(Math.min(cfg.evalEvery, cfg.maxSteps - engine.step));
      modeledMs += performance.now() - s0;
      await evaluateAt(engine, engine.step, modeledMs);
    }
  } else {
    const workers = presetWorkers(backend, preset, {
      workers: cfg.workers, data: { train: data.train, test: data.validation }, batchSize: cfg.batchSize, optimizer: cfg.optimizer, seed,
      strategy: { strategy: cfg.strategy, H: cfg.H, compression: cfg.compression, outerLr: cfg.outerLr ?? 0.7, outerMomentum: cfg.outerMomentum ?? 0.9 },
      compressor: cfg.compression === 'dgc' ? dgcCompressorFor(backend, { ...cfg, strategy: cfg.strategy }) : undefined,
    });
    engine = workers[0].engine;
    await startWorkers(workers);
    const net = new MemoryNetwork({ faults: cfg.link, seed });
    const stepsPerSync = workers[0].strategy.stepsPerSync;
    await runSyncs(workers, net, {
      syncs: Math.ceil(cfg.maxSteps / stepsPerSync),
      onSync: async (r) => {
        syncs = r.seq;
        bytes += r.bytesSent.reduce((a, b) => a + b, 0) / r.bytesSent.length;
        exchangeMs += r.exchangeMs;
        modeledMs += Math.max(...r.localMs) + r.exchangeMs + Math.max(...r.applyMs);
        const due = r.step % cfg.evalEvery < stepsPerSync || r.step >= cfg.maxSteps;
        if (due) await evaluateAt(engine, r.step, modeledMs);
      },
    });
  }
  const wallMs = performance.now() - t0 - evalMs;
  const final = await engine.evaluate(cfg.finalWindows ?? Infinity, EVAL_BATCH, data.validation);
  return {
    config: cfg, steps: engine.step, syncs, tokens: engine.step * tokensPerStep, evals, finalLoss: final.loss, finalAccuracy: final.accuracy,
    validationTokens: final.count, wallMs, modeledMs, bytesPerWorker: bytes, exchangeMs,
    parameters: engine.model.store.manifest.reduce((n, p) => n + p.size, 0),
  };
}
