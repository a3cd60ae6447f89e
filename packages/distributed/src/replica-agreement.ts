// How closely two honest adapters agree on one work unit (redundant recompute's tolerance): the same
// unit (starting parameters, batches drawn by one seed, fresh optimizer) trained on two backends, e.g.
// SwiftShader WebGPU and the CPU reference standing in for two different GPUs, and compared as the
// server compares replicas (protocol's compareReplicas).
import { shardIndices, type Dataset } from '@tabfleet/data';
import { PRESETS, type OptimizerConfig } from '@tabfleet/nn';
import { compareReplicas, type ReplicaComparison } from '@tabfleet/protocol';
import type { Backend } from '@tabfleet/tensor';
import { ModelEngine } from './engine';

export interface AgreementConfig {
  /** Units compared; each starts where the previous one ended (the model moves as in training). */
  units: number;
  steps: number;
  batchSize: number;
  optimizer: OptimizerConfig;
  /** The shard the units draw from, of `shards`. */
  shard: number;
  shards: number;
  seed: number;
}

export interface UnitAgreement extends ReplicaComparison {
  batchSeed: number;
  /** The same comparison against a faulty result (the second backend's delta ×1.5): must disagree. */
  faultyAgrees: boolean;
}

export async function measureReplicaAgreement(backends: [Backend, Backend], data: { train: Dataset; test: Dataset }, cfg: AgreementConfig): Promise<UnitAgreement[]> {
  const shard = shardIndices(data.train.count, cfg.shard, cfg.shards, cfg.seed);
  const [a, b] = backends.map((backend) => new ModelEngine(backend, {
    preset: PRESETS['mlp-fashion'], seed: cfg.seed, optimizer: cfg.optimizer, batchSize: cfg.batchSize, train: data.train, test: data.test, shard, dataSeed: 0,
  }));
  const out: UnitAgreement[] = [];
  for (let u = 0; u < cfg.units; u++) {
    const batchSeed = cfg.seed * 1_000_003 + u;
    const start = await a.readParams();
    b.writeParams(start);
    await a.trainUnit({ batchSeed, steps: cfg.steps });
    await b.trainUnit({ batchSeed, steps: cfg.steps });
    const [endA, endB] = await Promise.all([a.readParams(), b.readParams()]);
    const da = start.map((v, i) => v - endA[i]);
    const db = start.map((v, i) => v - endB[i]);
    out.push({ batchSeed, ...compareReplicas(da, db), faultyAgrees: compareReplicas(da, db.map((v) => 1.5 * v)).agree });
  }
  return out;
}
