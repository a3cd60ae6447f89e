// Sync strategies. A sync has two phases, like the server's rounds: `payload()` is what this member
// contributes (kept, so an aborted round re-runs with the same bytes), `prepare(mean)` computes the
// state to adopt from the members' mean and returns its checksum without applying it, and `commit()`
// applies it once the server says every member has its result (`discard()` drops it on abort).
//
//   ddp       every step: average gradients, one optimizer step with the mean.
//   localsgd  H inner steps, then average the parameter deltas since the last sync (Stich).
//   diloco    H inner AdamW steps, then an outer Nesterov step on the mean delta (Douillard et al.).
// Payloads go on the wire as f32, f16, DGC-sparse (index, f16 value) lists with error feedback, or
// block-quantized (int8, 4-bit E2M1) with error feedback. This file holds what every strategy shares
// (the interface, the payload's encodings); strategies.ts and streaming-diloco.ts the strategies.
import { decodeQuantized, QuantizedFeedback, type Fragment, type QuantFormat } from '@tabfleet/protocol';
import type { Storage } from '@tabfleet/tensor';
import type { LocalWork, ModelEngine } from './engine';

export type StrategyName = 'ddp' | 'localsgd' | 'diloco';
export type CompressionName = 'none' | 'fp16' | 'dgc' | QuantFormat;

export type Payload =
  | { kind: 'dense'; values: Float32Array; dtype: 'f32' | 'f16' }
  | { kind: 'sparse'; indices: Uint32Array; values: Float32Array; length: number; dtype: 'f32' | 'f16' }
  /** protocol's encodeQuantized bytes; where it must go dense (star, homes, groups) it goes decoded, as f32. */
  | { kind: 'quantized'; bytes: Uint8Array; length: number; format: QuantFormat; dtype: 'f32' };

export const isQuantized = (c: CompressionName): c is QuantFormat => c === 'int8' || c === 'e2m1';

/** Top-k compression with error feedback (packages/distributed/src/dgc.ts implements it). */
export interface Compressor {
  /** `step` is the sync's index in the job: the sparsity warm-up follows it. */
  compress(vector: Storage, step: number): Promise<{ indices: Uint32Array; values: Float32Array }>;
  /** Forgets the momentum and the unsent residual (they belong to the parameters being replaced). */
  reset(): void;
}

export interface StrategyOptions {
  strategy: StrategyName;
  H: number;
  compression: CompressionName;
  /** DiLoCo's outer Nesterov step. */
  outerLr: number;
  outerMomentum: number;
  /** Required when compression is 'dgc'. */
  compressor?: Compressor;
  /**
   * Streaming DiLoCo (diloco only): the model's fragments (protocol's modelFragments), one synced per sync in turn;
   * `overlapSteps` steps into the next local work a synced fragment's global values arrive, merged
   * with the local ones as `mixing` × local + (1 − mixing) × global. Absent: plain DiLoCo.
   */
  streaming?: { fragments: Fragment[]; overlapSteps: number; mixing: number };
}

export interface SyncStrategy {
  readonly name: StrategyName;
  /** Optimizer steps per sync. */
  readonly stepsPerSync: number;
  /**
   * The local work before the next sync: H steps, or `steps` in a paced round (LocalSGD and DiLoCo:
   * as many as fit the member's pace in the round's time budget; DDP: one gradient, on `steps`
   * micro-batches). With `budgetMs` (paced LocalSGD and DiLoCo), `steps` is a ceiling: the member
   * stops when its next step would overrun the budget, and reports the steps it took.
   */
  local(steps?: number, budgetMs?: number): Promise<LocalWork>;
  payload(): Promise<Payload>;
  prepare(mean: Float32Array): Promise<string>;
  /** LocalSGD in grouped (Moshpit) syncs: the group's mean parameters become the sync's result, as `prepare` does. */
  prepareParams?(mean: Float32Array): Promise<string>;
  commit(): Promise<void>;
  discard(): void;
  /**
   * Call after the parameters were replaced by a global model (start, late join, reload) that has
   * `syncsDone` syncs behind it, so a late joiner's DGC warm-up is where everyone else's is; `state`
   * is what `globalState()` gave at that sync (from the checkpoint; none: start afresh).
   */
  reset(syncsDone?: number, state?: Record<string, Float32Array>): Promise<void>;
  /** State beyond the parameters that every member holds identically (goes into checkpoints). */
  globalState(): Promise<Record<string, Float32Array>>;
  /**
   * The model every member agrees on, where the parameters are not it between syncs (Streaming
   * DiLoCo: each fragment as its last sync left it, while the parameters carry local progress).
   * Checkpoints, digests and evaluations of the global model read this. Absent: the parameters.
   */
  globalModel?(): Float32Array;
  /**
   * Redundant recompute (LocalSGD and DiLoCo only; absent for DDP): this sync's local work as a
   * replayable unit, the parameters of the last committed sync it starts from, and the delta since.
   */
  readonly replay?: {
    localUnit(unit: { batchSeed: number; steps: number }): Promise<LocalWork>;
    committedParams(): Float32Array;
    delta(): Promise<Float32Array>;
  };
}

/** Mean of payloads as a dense vector (the star path and tests; the ring does this on the wire). */
export function payloadToDense(p: Payload, length: number): Float32Array {
  if (p.kind === 'dense') return p.values;
  if (p.kind === 'quantized') return decodeQuantized(p.bytes, p.length, p.format);
  const out = new Float32Array(length);
  for (let i = 0; i < p.indices.length; i++) out[p.indices[i]] = p.values[i];
  return out;
}

/** Names of the strategies' global state in checkpoints (beside the model's parameters). */
export const OUTER_MOMENTUM = 'diloco.outer_momentum';
export const OPTIMIZER = 'ddp.optimizer.';

/** DiLoCo's outer momentum from a checkpoint's state (none: null), checked against the model's length. */
export function outerMomentumOf(state: Record<string, Float32Array>, length: number): Float32Array | null {
  const m = state[OUTER_MOMENTUM] ?? null;
  if (m && m.length !== length) throw new Error(`checkpoint ${OUTER_MOMENTUM} has ${m.length} values, the model ${length}`);
  return m;
}

export function prefixed(state: Record<string, Float32Array>, prefix: string): Record<string, Float32Array> {
  return Object.fromEntries(Object.entries(state).map(([k, v]) => [prefix + k, v]));
}

export function unprefixed(state: Record<string, Float32Array>, prefix: string): Record<string, Float32Array> {
  return Object.fromEntries(Object.entries(state).filter(([k]) => k.startsWith(prefix)).map(([k, v]) => [k.slice(prefix.length), v]));
}

/** What every strategy's payload does: cached per sync, DGC-compressed, quantized with error feedback, or dense. */
export abstract class Base implements SyncStrategy {
  abstract readonly name: StrategyName;
  abstract readonly stepsPerSync: number;
  protected cached: Payload | null = null;
  protected next: Float32Array | null = null;
  /** What quantization left unsent (int8, e2m1), per vector slot (a streaming fragment): added to its next sync's vector. */
  private readonly feedback = new Map<number, QuantizedFeedback>();
  protected syncs = 0;

  constructor(
    protected readonly engine: ModelEngine,
    protected readonly opts: StrategyOptions,
  ) {
    if (opts.compression === 'dgc' && !opts.compressor) throw new Error('dgc compression needs a compressor');
  }

  abstract local(steps?: number, budgetMs?: number): Promise<LocalWork>;
  protected abstract vector(): Promise<{ host: Float32Array | null; device: Storage | null }>;
  abstract prepare(mean: Float32Array): Promise<string>;
  abstract commit(): Promise<void>;
  protected abstract restart(state: Record<string, Float32Array>): Promise<void>;

  async reset(syncsDone = 0, state: Record<string, Float32Array> = {}): Promise<void> {
    this.syncs = syncsDone;
    this.cached = null;
    this.next = null;
    this.opts.compressor?.reset();
    this.feedback.clear();
    await this.restart(state);
  }

  async globalState(): Promise<Record<string, Float32Array>> {
    return {};
  }

  async payload(): Promise<Payload> {
    if (this.cached) return this.cached;
    const { host, device } = await this.vector();
    if (this.opts.compression === 'dgc') {
      const source = device ?? this.engine.uploadScratch(host!);
      const sparse = await this.opts.compressor!.compress(source, this.syncs);
      // Values go as f16: the error feedback keeps what was not sent, and f16 loses < 0.05% of what was.
      this.cached = { kind: 'sparse', indices: sparse.indices, values: sparse.values, length: this.engine.length, dtype: 'f16' };
    } else if (isQuantized(this.opts.compression)) {
      const format = this.opts.compression;
      const vector = host ?? (await this.engine.readGradients());
      const slot = this.feedbackSlot();
      let feedback = this.feedback.get(slot);
      if (!feedback) this.feedback.set(slot, (feedback = new QuantizedFeedback(vector.length, format)));
      const { bytes } = feedback.encode(vector);
      this.cached = { kind: 'quantized', bytes, length: vector.length, format, dtype: 'f32' };
    } else {
      const values = host ?? (await this.engine.readGradients());
      this.cached = { kind: 'dense', values, dtype: this.opts.compression === 'fp16' ? 'f16' : 'f32' };
    }
    return this.cached;
  }

  discard(): void {
    this.next = null;
  }

  /** Which vector this sync's payload is (error feedback is kept per vector): one, unless streaming. */
  protected feedbackSlot(): number {
    return 0;
  }

  protected committed(): void {
    this.cached = null;
    this.next = null;
    this.syncs++;
  }
}

