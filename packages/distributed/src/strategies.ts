// The strategies: DDP, and LocalSGD and DiLoCo on one Periodic base (Streaming DiLoCo: streaming-diloco.ts).
import { checksumOf, DDP_MICRO_BATCHES } from '@tabfleet/protocol';
import type { LocalWork, ModelEngine } from './engine';
import { Base, OPTIMIZER, OUTER_MOMENTUM, outerMomentumOf, prefixed, unprefixed, type StrategyOptions, type SyncStrategy } from './strategy-base';
import { StreamingDiloco } from './streaming-diloco';

export * from './strategy-base';

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
    this.momentum = outerMomentumOf(state, this.engine.length);
  }

  /** The outer momentum: a late joiner without it would compute a different outer step. */
  override async globalState(): Promise<Record<string, Float32Array>> {
    return this.momentum ? { [OUTER_MOMENTUM]: this.momentum } : {};
  }
}

export function createStrategy(engine: ModelEngine, opts: StrategyOptions): SyncStrategy {
  if (opts.streaming && opts.strategy !== 'diloco') throw new Error(`Streaming DiLoCo syncs DiLoCo's outer step by fragments: not ${opts.strategy}`);
  if (opts.streaming) return new StreamingDiloco(engine, opts);
  if (opts.strategy === 'ddp') return new Ddp(engine, opts);
  return opts.strategy === 'localsgd' ? new LocalSgd(engine, opts) : new Diloco(engine, opts);
}
