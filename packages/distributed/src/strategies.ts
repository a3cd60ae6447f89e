// Sync strategies. A sync has two phases, like the server's rounds: `payload()` is what this member
// contributes (kept, so an aborted round re-runs with the same bytes), `prepare(mean)` computes the
// state to adopt from the members' mean and returns its checksum without applying it, and `commit()`
// applies it once the server says every member has its result (`discard()` drops it on abort).
//
//   ddp       every step: average gradients, one optimizer step with the mean.
//   localsgd  H inner steps, then average the parameter deltas since the last sync (Stich).
//   diloco    H inner AdamW steps, then an outer Nesterov step on the mean delta (Douillard et al.).
// Payloads go on the wire as f32, f16, DGC-sparse (index, f16 value) lists with error feedback, or
// block-quantized (int8, 4-bit E2M1) with error feedback.
import { checksumOf, DDP_MICRO_BATCHES, decodeQuantized, QuantizedFeedback, type QuantFormat } from '@tabfleet/protocol';
import type { Storage } from '@tabfleet/tensor';
import type { LocalWork, ModelEngine } from './engine';

export type StrategyName = 'ddp' | 'localsgd' | 'diloco';
export type CompressionName = 'none' | 'fp16' | 'dgc' | QuantFormat;

export type Payload =
  | { kind: 'dense'; values: Float32Array; dtype: 'f32' | 'f16' }
  | { kind: 'sparse'; indices: Uint32Array; values: Float32Array; length: number; dtype: 'f32' | 'f16' }
  /** protocol's encodeQuantized bytes; where it must go dense (star, homes, groups) it goes decoded, as f32. */
  | { kind: 'quantized'; bytes: Uint8Array; length: number; format: QuantFormat; dtype: 'f32' };

const isQuantized = (c: CompressionName): c is QuantFormat => c === 'int8' || c === 'e2m1';

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
const OUTER_MOMENTUM = 'diloco.outer_momentum';
const OPTIMIZER = 'ddp.optimizer.';

function prefixed(state: Record<string, Float32Array>, prefix: string): Record<string, Float32Array> {
  return Object.fromEntries(Object.entries(state).map(([k, v]) => [prefix + k, v]));
}

function unprefixed(state: Record<string, Float32Array>, prefix: string): Record<string, Float32Array> {
  return Object.fromEntries(Object.entries(state).filter(([k]) => k.startsWith(prefix)).map(([k, v]) => [k.slice(prefix.length), v]));
}

abstract class Base implements SyncStrategy {
  abstract readonly name: StrategyName;
  abstract readonly stepsPerSync: number;
  protected cached: Payload | null = null;
  protected next: Float32Array | null = null;
  /** What quantization left unsent (int8, e2m1): added to the next sync's vector. */
  private feedback: QuantizedFeedback | null = null;
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
    this.feedback = null;
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
      this.feedback ??= new QuantizedFeedback(this.engine.length, format);
      const { bytes } = this.feedback.encode(host ?? (await this.engine.readGradients()));
      this.cached = { kind: 'quantized', bytes, length: this.engine.length, format, dtype: 'f32' };
    } else {
      const values = host ?? (await this.engine.readGradients());
      this.cached = { kind: 'dense', values, dtype: this.opts.compression === 'fp16' ? 'f16' : 'f32' };
    }
    return this.cached;
  }

  discard(): void {
    this.next = null;
  }

  protected committed(): void {
    this.cached = null;
    this.next = null;
    this.syncs++;
  }
}

/** Averages gradients every step; the optimizer step with the mean is the commit. */
class Ddp extends Base {
  readonly name = 'ddp';
  readonly stepsPerSync = 1;
  private paramsChecksum = '';

  /** One gradient per sync: on the job's batch, or (paced) on `steps` micro-batches of it (DDP_MICRO_BATCHES per batch). */
  async local(steps?: number): Promise<LocalWork> {
    if (steps === undefined) return this.engine.computeGradients();
    if (!Number.isInteger(steps) || steps < 1) throw new Error(`paced ddp takes a whole number of micro-batches, not ${steps}`);
    return this.engine.computeGradients((steps * this.engine.batchSize) / DDP_MICRO_BATCHES);
  }

  protected async vector() {
    // DGC compresses the gradient where it is; dense gradients are read back whole.
    return this.opts.compression === 'dgc' ? { host: null, device: this.engine.gradientStorage } : { host: await this.engine.readGradients(), device: null };
  }

  /**
   * The update is applied only at commit, so the checksum is of the parameters it applies to (equal
   * on every member exactly when every earlier sync left them equal) followed by that of the mean
   * gradient it will apply.
   */
  async prepare(mean: Float32Array): Promise<string> {
    this.next = mean;
    if (!this.paramsChecksum) this.paramsChecksum = checksumOf(await this.engine.readParams());
    return this.paramsChecksum + checksumOf(mean);
  }

  async commit(): Promise<void> {
    if (!this.next) throw new Error('commit without a prepared sync');
    this.engine.applyGradients(this.next);
    this.paramsChecksum = '';
    this.committed();
  }

  protected async restart(state: Record<string, Float32Array>): Promise<void> {
    this.paramsChecksum = '';
    this.engine.optimizer.loadState(unprefixed(state, OPTIMIZER));
  }

  /** Every member steps the same optimizer with the same mean: its state is global (a joiner needs it). */
  override async globalState(): Promise<Record<string, Float32Array>> {
    return prefixed(await this.engine.optimizer.readState(), OPTIMIZER);
  }
}

/** Shared by LocalSGD and DiLoCo: H inner steps from `base`, then the delta since `base` is synced. */
abstract class Periodic extends Base {
  readonly stepsPerSync: number;
  protected base: Float32Array = new Float32Array(0);

  constructor(engine: ModelEngine, opts: StrategyOptions) {
    super(engine, opts);
    this.stepsPerSync = opts.H;
  }

  async local(steps = this.opts.H, budgetMs?: number): Promise<LocalWork> {
    if (!(Number.isInteger(steps) && steps >= 1)) throw new Error(`local steps ${steps}: need a positive integer`);
    if (budgetMs !== undefined && !(budgetMs > 0)) throw new Error(`local budget ${budgetMs} ms: need a positive time`);
    return this.engine.trainSteps(steps, budgetMs);
  }

  readonly replay = {
    localUnit: (unit: { batchSeed: number; steps: number }) => this.engine.trainUnit(unit),
    committedParams: () => this.base,
    delta: async () => (await this.vector()).host,
  };

  protected async restart(_state: Record<string, Float32Array>): Promise<void> {
    this.base = await this.engine.readParams();
  }

  /** The delta base − params (DiLoCo's outer gradient; LocalSGD negates it back). */
  protected async vector() {
    const params = await this.engine.readParams();
    const delta = new Float32Array(params.length);
    for (let i = 0; i < delta.length; i++) delta[i] = this.base[i] - params[i];
    return { host: delta, device: null };
  }

  async commit(): Promise<void> {
    if (!this.next) throw new Error('commit without a prepared sync');
    this.engine.writeParams(this.next);
    this.base = this.next;
    this.committed();
  }
}

/** Parameters become base − mean delta: the members' mean parameters (exactly, without compression). */
class LocalSgd extends Periodic {
  readonly name = 'localsgd';

  async prepare(mean: Float32Array): Promise<string> {
    const next = new Float32Array(mean.length);
    for (let i = 0; i < next.length; i++) next[i] = this.base[i] - mean[i];
    return this.prepareParams(next);
  }

  async prepareParams(mean: Float32Array): Promise<string> {
    if (mean.length !== this.engine.length) throw new Error(`mean has ${mean.length} values, the model ${this.engine.length}`);
    this.next = mean;
    return checksumOf(mean);
  }
}

/** Outer Nesterov step on the mean delta: m ← μm + Δ; θ ← θ_base − lr(Δ + μm). */
class Diloco extends Periodic {
  readonly name = 'diloco';
  private momentum: Float32Array | null = null;
  private nextMomentum: Float32Array | null = null;

  async prepare(mean: Float32Array): Promise<string> {
    const { outerLr: lr, outerMomentum: mu } = this.opts;
    const m = this.momentum ?? new Float32Array(mean.length);
    const nm = new Float32Array(mean.length);
    const next = new Float32Array(mean.length);
    for (let i = 0; i < next.length; i++) {
      nm[i] = mu * m[i] + mean[i];
      next[i] = this.base[i] - lr * (mean[i] + mu * nm[i]);
    }
    this.next = next;
    this.nextMomentum = nm;
    return checksumOf(next);
  }

  override async commit(): Promise<void> {
    this.momentum = this.nextMomentum;
    await super.commit();
  }

  override discard(): void {
    super.discard();
    this.nextMomentum = null;
  }

  protected override async restart(state: Record<string, Float32Array>): Promise<void> {
    await super.restart(state);
    const m = state[OUTER_MOMENTUM] ?? null;
    if (m && m.length !== this.engine.length) throw new Error(`checkpoint ${OUTER_MOMENTUM} has ${m.length} values, the model ${this.engine.length}`);
    this.momentum = m;
  }

  /** The outer momentum: a late joiner without it would compute a different outer step. */
  override async globalState(): Promise<Record<string, Float32Array>> {
    return this.momentum ? { [OUTER_MOMENTUM]: this.momentum } : {};
  }
}

export function createStrategy(engine: ModelEngine, opts: StrategyOptions): SyncStrategy {
  if (opts.strategy === 'ddp') return new Ddp(engine, opts);
  return opts.strategy === 'localsgd' ? new LocalSgd(engine, opts) : new Diloco(engine, opts);
}
