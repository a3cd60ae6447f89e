// N in-process workers of one job on one backend (tests, the convergence and byzantine runs).
import { shardIndices, type Dataset } from '@tabfleet/data';
import { PRESETS, type ModelPreset, type OptimizerConfig } from '@tabfleet/nn';
import type { Clock } from '@tabfleet/protocol';
import type { Backend } from '@tabfleet/tensor';
import { flipLabels } from './attacks';
import { ModelEngine } from './engine';
import type { SimWorker } from './simulate';
import { createStrategy, type Compressor, type StrategyOptions } from './strategies';

export interface JobSetup {
  workers: number;
  data: { train: Dataset; test: Dataset };
  optimizer: OptimizerConfig;
  batchSize: number;
  strategy: Omit<StrategyOptions, 'compressor'>;
  /** Builds a compressor for worker i (DGC). */
  compressor?: (engine: ModelEngine) => Compressor;
  seed?: number;
  /** Ranks that train on flipped labels (label-flipping attackers, attacks.ts). */
  flippedLabelRanks?: readonly number[];
  /** Per rank: how many times slower than the device it runs (EngineOptions.slowdown); default all 1. */
  slowdowns?: readonly number[];
  /** The engines' clock (EngineOptions.clock; default realClock). */
  clock?: Clock;
}

/** N workers of the MLP job, each on its shard, sharing one backend. */
export function mlpWorkers(backend: Backend, job: JobSetup): SimWorker[] {
  return presetWorkers(backend, PRESETS['mlp-fashion'], job);
}

/** N workers of a job training `preset` (`data.test`: what they evaluate on), each on its shard, sharing one backend. */
export function presetWorkers(backend: Backend, preset: ModelPreset, job: JobSetup): SimWorker[] {
  const { train } = job.data;
  const flipped = job.flippedLabelRanks?.length ? { ...train, y: flipLabels(train.y, train.classes) } : train;
  return Array.from({ length: job.workers }, (_, rank) => {
    const engine = new ModelEngine(backend, {
      preset, seed: job.seed ?? 1, optimizer: job.optimizer, batchSize: job.batchSize,
      train: job.flippedLabelRanks?.includes(rank) ? flipped : train, test: job.data.test, shard: shardIndices(train.count, rank, job.workers, job.seed ?? 1), dataSeed: 1000 + rank,
      slowdown: job.slowdowns?.[rank], clock: job.clock,
    });
    const strategy = createStrategy(engine, { ...job.strategy, compressor: job.compressor?.(engine) });
    return { id: `w${rank}`, engine, strategy };
  });
}
