// Streaming DiLoCo (Douillard et al. 2025): DiLoCo whose syncs each carry one fragment of the model
// (protocol's streaming.ts cuts them, strided across blocks), in turn, so a sync sends about
// 1/F of the model and each fragment is synced every F syncs. A fragment's outer gradient is its
// agreed (global) values less the member's own; the outer Nesterov step runs on that fragment's
// slice of the momentum. With `overlapSteps` τ the new global values are not written at the commit
// but τ steps into the next local work, merged with what the member learned meanwhile:
// θ ← α·θ_local + (1 − α)·θ_global (the paper's overlap). The τ steps count from the payload: a
// runtime that trains them while the exchange runs (the volunteer runtime's overlap.ts) merges at the
// commit; one that trains after the commit (the in-process runner) merges τ steps into its next work.
//
// The agreed model is `base`: every fragment as its last sync left it, identical on every member.
// The parameters differ from it between syncs by each member's local progress, so checkpoints,
// digests and evaluations of the global model read `globalModel()`.
import { checksumOf, fragmentOfSync, gatherFragment, scatterFragment, type Fragment } from '@tabfleet/protocol';
import type { LocalWork, ModelEngine } from './engine';
import { Base, OUTER_MOMENTUM, outerMomentumOf, type StrategyOptions } from './strategy-base';

export class StreamingDiloco extends Base {
  readonly name = 'diloco';
  readonly stepsPerSync: number;
  private readonly fragments: Fragment[];
  private readonly overlapSteps: number;
  private readonly mixing: number;
  private base: Float32Array = new Float32Array(0);
  private momentum: Float32Array | null = null;
  /** The prepared sync's fragment: its new global values and momentum slice. */
  private prepared: { fragment: number; values: Float32Array; momentum: Float32Array } | null = null;
  /** A committed fragment's global values still to merge into the parameters (overlap). */
  private pending: { fragment: number; values: Float32Array } | null = null;
  /** Local steps since this sync's payload was taken: the overlap τ counts from there. */
  private stepsSincePayload = 0;

  constructor(engine: ModelEngine, opts: StrategyOptions) {
    super(engine, opts);
    if (!opts.streaming) throw new Error('StreamingDiloco needs its fragments');
    if (opts.compression === 'dgc') throw new Error('Streaming DiLoCo sends fragments dense or block-quantized, not DGC-sparse');
    const { fragments, overlapSteps, mixing } = opts.streaming;
    if (!(Number.isInteger(overlapSteps) && overlapSteps >= 0 && overlapSteps < opts.H)) throw new Error(`overlapSteps ${overlapSteps}: need a whole number below H (${opts.H})`);
    if (!(mixing >= 0 && mixing < 1)) throw new Error(`mixing ${mixing}: need a share in [0, 1)`);
    const covered = fragments.reduce((a, f) => a + f.length, 0);
    if (fragments.length === 0 || fragments.some((f) => f.ranges.some(([, end]) => end > engine.length))) throw new Error(`fragments do not fit a model of ${engine.length} values`);
    if (covered > engine.length) throw new Error(`fragments hold ${covered} values, the model ${engine.length}`);
    this.stepsPerSync = opts.H;
    this.fragments = fragments;
    this.overlapSteps = overlapSteps;
    this.mixing = mixing;
  }

  /** The fragment this sync carries: by the count of committed syncs, as every member and the server count them. */
  get fragment(): number {
    return fragmentOfSync(this.syncs, this.fragments.length);
  }

  protected override feedbackSlot(): number {
    return this.fragment;
  }

  /** H steps (fixed pacing only); a fragment still pending is merged once `overlapSteps` steps followed its payload. */
  async local(steps = this.opts.H, budgetMs?: number): Promise<LocalWork> {
    if (!(Number.isInteger(steps) && steps >= 1)) throw new Error(`local steps ${steps}: need a positive integer`);
    if (budgetMs !== undefined) throw new Error('Streaming DiLoCo takes fixed rounds of H steps: no time budget');
    if (!this.pending) return this.train(steps);
    const before = Math.max(0, Math.min(this.overlapSteps - this.stepsSincePayload, steps));
    const first = before > 0 ? await this.train(before) : null;
    await this.mergePending();
    if (before === steps) return first!;
    const rest = await this.train(steps - before);
    return first ? joinWork(first, rest) : rest;
  }

  private async train(steps: number): Promise<LocalWork> {
    const work = await this.engine.trainSteps(steps);
    this.stepsSincePayload += work.steps;
    return work;
  }

  /** This sync's fragment of the outer gradient: its global values less this member's. */
  protected async vector() {
    if (this.pending) await this.mergePending();
    this.stepsSincePayload = 0;
    const f = this.fragments[this.fragment];
    const local = gatherFragment(await this.engine.readParams(), f);
    const global = gatherFragment(this.base, f);
    for (let i = 0; i < local.length; i++) local[i] = global[i] - local[i];
    return { host: local, device: null };
  }

  /** Outer Nesterov step on the fragment: m ← μm + Δ; θ_global ← θ_global − lr(Δ + μm). */
  async prepare(mean: Float32Array): Promise<string> {
    const fragment = this.fragment;
    const f = this.fragments[fragment];
    if (mean.length !== f.length) throw new Error(`fragment ${fragment} has ${f.length} values, the mean ${mean.length}`);
    const { outerLr: lr, outerMomentum: mu } = this.opts;
    const m = this.momentum ? gatherFragment(this.momentum, f) : new Float32Array(f.length);
    const values = gatherFragment(this.base, f);
    for (let i = 0; i < values.length; i++) {
      m[i] = mu * m[i] + mean[i];
      values[i] -= lr * (mean[i] + mu * m[i]);
    }
    this.prepared = { fragment, values, momentum: m };
    return checksumOf(values);
  }

  async commit(): Promise<void> {
    const p = this.prepared;
    if (!p) throw new Error('commit without a prepared sync');
    const f = this.fragments[p.fragment];
    // In place: the model may be hundreds of MiB, and no one keeps `globalModel()` across a commit.
    scatterFragment(this.base, f, p.values);
    this.momentum ??= new Float32Array(this.engine.length);
    scatterFragment(this.momentum, f, p.momentum);
    this.pending = { fragment: p.fragment, values: p.values };
    if (this.stepsSincePayload >= this.overlapSteps) await this.mergePending();
    this.prepared = null;
    this.committed();
  }

  override discard(): void {
    super.discard();
    this.prepared = null;
  }

  globalModel(): Float32Array {
    return this.base;
  }

  /** The pending fragment into the parameters: α·local + (1 − α)·global (α 0: the global values). */
  private async mergePending(): Promise<void> {
    const { fragment, values } = this.pending!;
    this.pending = null;
    const f = this.fragments[fragment];
    const params = await this.engine.readParams();
    const merged = gatherFragment(params, f);
    for (let i = 0; i < merged.length; i++) merged[i] = this.mixing * merged[i] + (1 - this.mixing) * values[i];
    scatterFragment(params, f, merged);
    this.engine.writeParams(params);
  }

  protected async restart(state: Record<string, Float32Array>): Promise<void> {
    this.base = await this.engine.readParams();
    this.prepared = null;
    this.pending = null;
    this.stepsSincePayload = 0;
    this.momentum = outerMomentumOf(state, this.engine.length);
  }

  /** The outer momentum of every fragment (a joiner needs it), as plain DiLoCo keeps it. */
  override async globalState(): Promise<Record<string, Float32Array>> {
    return this.momentum ? { [OUTER_MOMENTUM]: this.momentum } : {};
  }
}

/** Two pieces of local work as one: steps and samples added, the loss weighed by steps. */
export function joinWork(a: LocalWork, b: LocalWork): LocalWork {
  const steps = a.steps + b.steps;
  return {
    loss: steps > 0 ? (a.loss * a.steps + b.loss * b.steps) / steps : b.loss,
    samples: a.samples + b.samples,
    steps,
    ...(a.sleptMs !== undefined || b.sleptMs !== undefined ? { sleptMs: (a.sleptMs ?? 0) + (b.sleptMs ?? 0) } : {}),
  };
}
