// Training one model in this tab: load data, train epochs with progress, evaluate. Runs inside the
// engine's Web Worker; platform-neutral (no DOM), so Node tests can drive it too.
import {
  encodeText, epochBatches, generateCorpus, CHARSET, loadFashionMnistFromUrl, sequentialBatches, shardIndices, textWindows, type Dataset,
} from '@tabfleet/data';
import {
  contextOf, createModel, createOptimizer, evaluate, PRESETS, recordTrainStep, type Model, type ModelPreset, type OptimizerConfig, type PresetName,
} from '@tabfleet/nn';
import { dispose, type Backend } from '@tabfleet/tensor';

export type DatasetSpec =
  | { kind: 'fashion-mnist'; baseUrl: string; trainLimit?: number }
  /** The generated corpus, as characters (vocabulary 32) or UTF-8 bytes (256). */
  | { kind: 'text'; sentences: number; seed: number; tokenizer?: 'chars' | 'bytes' };

export interface SoloTrainConfig {
  preset: PresetName | ModelPreset;
  dataset: DatasetSpec;
  optimizer: OptimizerConfig;
  batchSize: number;
  epochs: number;
  seed: number;
  /** Stop after this many steps (tests, benchmarks). */
  maxSteps?: number;
  /** Evaluate on the test split every this many steps (0: only at the end). */
  evalEvery?: number;
}

export interface Progress {
  epoch: number;
  step: number;
  totalSteps: number;
  loss: number;
  samplesPerSec: number;
  elapsedMs: number;
  testAccuracy?: number;
  testLoss?: number;
}

export interface TrainReport {
  backend: string;
  steps: number;
  finalLoss: number;
  testAccuracy: number;
  testLoss: number;
  testCount: number;
  elapsedMs: number;
  msPerStep: number;
  losses: number[];
}

export async function loadDataset(spec: DatasetSpec, context = 64): Promise<{ train: Dataset; test: Dataset }> {
  if (spec.kind === 'fashion-mnist') {
    const d = await loadFashionMnistFromUrl(spec.baseUrl);
    if (spec.trainLimit && spec.trainLimit < d.train.count) d.train.count = spec.trainLimit;
    return d;
  }
  const text = generateCorpus(spec.sentences, spec.seed);
  const bytes = spec.tokenizer === 'bytes';
  const ids = bytes ? Int32Array.from(new TextEncoder().encode(text)) : encodeText(text);
  const all = textWindows(ids, context, bytes ? 256 : CHARSET.length);
  const split = Math.floor(all.count * 0.9);
  const test: Dataset = { ...all, x: all.x.subarray(split * context), y: all.y.subarray(split * context), count: all.count - split };
  return { train: { ...all, count: split }, test };
}

export function resolvePreset(p: PresetName | ModelPreset): ModelPreset {
  if (typeof p !== 'string') return p;
  const preset = PRESETS[p];
  if (!preset) throw new Error(`unknown model preset ${p}`);
  return preset as ModelPreset;
}

export async function trainSolo(backend: Backend, cfg: SoloTrainConfig, onProgress: (p: Progress) => void, data?: { train: Dataset; test: Dataset }): Promise<TrainReport> {
  const preset = resolvePreset(cfg.preset);
  const { train, test } = data ?? (await loadDataset(cfg.dataset, contextOf(preset) ?? 64));
  const model: Model = createModel(preset, backend, cfg.seed);
  const opt = createOptimizer(model.store, cfg.optimizer);
  const indices = shardIndices(train.count, 0, 1, cfg.seed);
  const perEpoch = Math.floor(indices.length / cfg.batchSize);
  const totalSteps = Math.min(perEpoch * cfg.epochs, cfg.maxSteps ?? Infinity);
  const losses: number[] = [];
  const start = performance.now();
  let step = 0;
  // Two steps in flight: record step n+1 while step n's loss is read back.
  let inflight: Promise<number> | null = null;
  const drain = async () => {
    if (inflight) losses.push(await inflight);
    inflight = null;
  };
  for (let epoch = 0; epoch < cfg.epochs && step < totalSteps; epoch++) {
    for (const batch of epochBatches(train, indices, cfg.batchSize, cfg.seed, epoch)) {
      if (step >= totalSteps) break;
      const loss = recordTrainStep(model, opt, batch);
      const read = loss.data().then((v) => (dispose(loss), v[0]));
      await drain();
      inflight = read;
      step++;
      if (!Number.isFinite(losses.at(-1) ?? 0)) throw new Error(`training diverged at step ${step}: loss ${losses.at(-1)}`);
      const evalNow = cfg.evalEvery && step % cfg.evalEvery === 0;
      if (step % 20 === 0 || evalNow) {
        const elapsedMs = performance.now() - start;
        const p: Progress = { epoch, step, totalSteps, loss: losses.at(-1) ?? NaN, samplesPerSec: (step * cfg.batchSize) / (elapsedMs / 1000), elapsedMs };
        if (evalNow) {
          await drain();
          const r = await evaluate(model, sequentialBatches(test, 1000));
          Object.assign(p, { testAccuracy: r.accuracy, testLoss: r.loss });
        }
        onProgress(p);
      }
    }
  }
  await drain();
  const elapsedMs = performance.now() - start;
  const final = await evaluate(model, sequentialBatches(test, contextOf(preset) !== null ? 32 : 1000));
  onProgress({ epoch: cfg.epochs - 1, step, totalSteps, loss: losses.at(-1) ?? NaN, samplesPerSec: (step * cfg.batchSize) / (elapsedMs / 1000), elapsedMs,
    testAccuracy: final.accuracy, testLoss: final.loss });
  return {
    backend: backend.description, steps: step, finalLoss: losses.at(-1) ?? NaN, testAccuracy: final.accuracy, testLoss: final.loss,
    testCount: final.count, elapsedMs, msPerStep: elapsedMs / Math.max(1, step), losses,
  };
}
