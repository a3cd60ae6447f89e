// Optimizers over the flat parameter vector: one WGSL update dispatch per step for the whole model.
import type { Storage } from '@tabfleet/tensor';
import type { ParamStore } from './params';

export interface Optimizer {
  /** Applies one update from the flat gradient; recorded into the current command buffer. */
  step(): void;
  readonly name: string;
  lr: number;
  /** The state (momentum buffers, step count) as flat f32 arrays by name, for checkpoints. */
  readState(): Promise<Record<string, Float32Array>>;
  /** Replaces the state; a missing entry starts from zero, as a fresh optimizer does. */
  loadState(state: Record<string, Float32Array>): void;
}

/** Writes `values` (or zeros when absent) into a state buffer of `length`, checking the length. */
function loadBuffer(store: ParamStore, dst: Storage, name: string, values: Float32Array | undefined): void {
  if (!values) return store.backend.fill(dst, 0);
  if (values.length !== store.length) throw new Error(`optimizer state ${name} has ${values.length} values, the model ${store.length}`);
  store.backend.write(dst, values);
}

export interface SgdConfig {
  lr: number;
  momentum?: number;
  nesterov?: boolean;
  weightDecay?: number;
}

export class Sgd implements Optimizer {
  readonly name = 'sgd';
  lr: number;
  private readonly velocity: Storage;
  constructor(private readonly store: ParamStore, private readonly cfg: SgdConfig) {
    this.lr = cfg.lr;
    this.velocity = store.backend.alloc(store.length, 'f32');
    store.backend.fill(this.velocity, 0);
  }
  step(): void {
    this.store.backend.sgdStep(this.store.flatParams, this.store.flatGrads, this.velocity, {
      lr: this.lr, momentum: this.cfg.momentum ?? 0, nesterov: this.cfg.nesterov ?? false, weightDecay: this.cfg.weightDecay ?? 0,
    });
  }
  async readState(): Promise<Record<string, Float32Array>> {
    if (!this.cfg.momentum) return {};
    return { velocity: (await this.store.backend.read(this.velocity, 'f32')) as Float32Array };
  }
  loadState(state: Record<string, Float32Array>): void {
    loadBuffer(this.store, this.velocity, 'velocity', state.velocity);
  }
}

export interface AdamWConfig {
  lr: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
}

/** Adam's moments and step count as checkpoint state (AdamW and LAMB keep the same). */
async function readMoments(store: ParamStore, m: Storage, v: Storage, t: number): Promise<Record<string, Float32Array>> {
  const be = store.backend;
  return { m: (await be.read(m, 'f32')) as Float32Array, v: (await be.read(v, 'f32')) as Float32Array, step: Float32Array.of(t) };
}

/** Loads what readMoments wrote; returns the step count. */
function loadMoments(store: ParamStore, m: Storage, v: Storage, state: Record<string, Float32Array>): number {
  loadBuffer(store, m, 'm', state.m);
  loadBuffer(store, v, 'v', state.v);
  return state.step?.[0] ?? 0;
}

export class AdamW implements Optimizer {
  readonly name = 'adamw';
  lr: number;
  private readonly m: Storage;
  private readonly v: Storage;
  private t = 0;
  constructor(private readonly store: ParamStore, private readonly cfg: AdamWConfig) {
    this.lr = cfg.lr;
    const be = store.backend;
    this.m = be.alloc(store.length, 'f32');
    this.v = be.alloc(store.length, 'f32');
    be.fill(this.m, 0);
    be.fill(this.v, 0);
  }
  step(): void {
    this.t++;
    this.store.backend.adamwStep(this.store.flatParams, this.store.flatGrads, this.m, this.v, {
      lr: this.lr, beta1: this.cfg.beta1 ?? 0.9, beta2: this.cfg.beta2 ?? 0.999, eps: this.cfg.eps ?? 1e-8, weightDecay: this.cfg.weightDecay ?? 0, step: this.t,
    });
  }
  readState(): Promise<Record<string, Float32Array>> {
    return readMoments(this.store, this.m, this.v, this.t);
  }
  loadState(state: Record<string, Float32Array>): void {
    this.t = loadMoments(this.store, this.m, this.v, state);
  }
}

/**
 * LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes"):
 * AdamW's update, scaled per parameter tensor by the trust ratio ‖w‖/‖u‖ (1 when either norm is 0,
 * as NVIDIA's apex FusedLAMB; weight decay and the ratio apply to every tensor, biases and norms
 * included, as apex does by default). Three dispatches per step whatever the model's size: moments and
 * update, per-tensor norms, apply. The tensors are the store's manifest.
 */
export class Lamb implements Optimizer {
  readonly name = 'lamb';
  lr: number;
  private readonly m: Storage;
  private readonly v: Storage;
  private readonly update: Storage;
  private readonly segments: Storage;
  private readonly norms: Storage;
  private readonly tensors: number;
  private t = 0;
  constructor(private readonly store: ParamStore, private readonly cfg: AdamWConfig) {
    this.lr = cfg.lr;
    const be = store.backend;
    [this.m, this.v, this.update] = [0, 1, 2].map(() => be.alloc(store.length, 'f32'));
    for (const b of [this.m, this.v, this.update]) be.fill(b, 0);
    const manifest = store.manifest;
    this.segments = be.upload(Int32Array.from(manifest.flatMap((e) => [e.offset, e.size])));
    this.tensors = manifest.length;
    this.norms = be.alloc(2 * this.tensors, 'f32');
  }
  step(): void {
    this.t++;
    this.store.backend.lambStep(this.store.flatParams, this.store.flatGrads, this.m, this.v, this.update, this.segments, this.norms, this.tensors, {
      lr: this.lr, beta1: this.cfg.beta1 ?? 0.9, beta2: this.cfg.beta2 ?? 0.999, eps: this.cfg.eps ?? 1e-6, weightDecay: this.cfg.weightDecay ?? 0, step: this.t,
    });
  }
  readState(): Promise<Record<string, Float32Array>> {
    return readMoments(this.store, this.m, this.v, this.t);
  }
  loadState(state: Record<string, Float32Array>): void {
    this.t = loadMoments(this.store, this.m, this.v, state);
  }
}

export type OptimizerConfig = ({ kind: 'sgd' } & SgdConfig) | ({ kind: 'adamw' } & AdamWConfig) | ({ kind: 'lamb' } & AdamWConfig);

export function createOptimizer(store: ParamStore, cfg: OptimizerConfig): Optimizer {
  return cfg.kind === 'sgd' ? new Sgd(store, cfg) : cfg.kind === 'adamw' ? new AdamW(store, cfg) : new Lamb(store, cfg);
}
