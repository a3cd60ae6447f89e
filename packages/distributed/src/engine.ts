// The model side of a worker: a model with its flat parameters on a backend, the inner optimizer, and
// this worker's data shard. Sync strategies drive it through these calls; in a browser it lives in
// the engine Web Worker (so every method takes and returns plain transferable values).
import { concatBatches, epochBatches, gather, sequentialBatches, sliceBatch, type Dataset } from '@tabfleet/data';
import {
  createModel, createOptimizer, evaluate, planMemory, recordGradientStep, recordTrainStep,
  type Batch, type MemoryPlan, type Model, type ModelPreset, type Optimizer, type OptimizerConfig, type PlanEstimate, type RecomputeMode,
} from '@tabfleet/nn';
import { anotherStepFits, decodeSafetensors, f32Values, mulberry32, realClock, sleepOn, type Clock } from '@tabfleet/protocol';
import { dispose, type Backend, type Storage, type Tensor } from '@tabfleet/tensor';

export interface EngineOptions {
  preset: ModelPreset;
  /** Initial parameters come from this seed (identical on every worker and backend). */
  seed: number;
  optimizer: OptimizerConfig;
  batchSize: number;
  train: Dataset;
  test: Dataset;
  /** Indices of `train` this worker trains on. */
  shard: Int32Array;
  /** Seeds the batch order per epoch. */
  dataSeed: number;
  /** False: batches walk the shard in order every epoch (tests that compare against one big batch). */
  shuffle?: boolean;
  /**
   * Heterogeneity for tests and benchmarks: this worker is `slowdown` times slower than its device,
   * by sleeping (slowdown − 1) × its typical compute for the samples after each piece of local work
   * (typical: the median ms per sample of its recent work). Not × the compute just measured: a
   * host-side stall (a GC pause, another process) would be multiplied by the factor, which a slower
   * GPU does not do, and on this shared machine that noise swamped the speeds being emulated.
   */
  slowdown?: number;
  /** What compute, budgets and the slowdown's sleep are timed on (default realClock). */
  clock?: Clock;
}

/** A one-value tensor's value (a loss), read back and disposed. */
async function readScalar(t: Tensor): Promise<number> {
  try {
    return (await t.data())[0];
  } finally {
    dispose(t);
  }
}

/**
 * Lets the event loop run (socket pings, messages) between local steps. On the CPU backend a step's
 * loss reads back as a resolved promise, so H steps would otherwise run as one block: a Node volunteer
 * training 16 GPT steps on a loaded machine held its socket past Socket.IO's ping timeout and was
 * dropped from its job (the internet benchmark's DiLoCo runs). A message, not a timer: mocked timers
 * do not hold it, and browsers do not clamp it.
 */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}

/** Pieces of local work whose compute per sample the slowdown's typical pace is the median of. */
const RECENT_WORK_KEPT = 32;

export interface LocalWork {
  /** Mean training loss over the steps. */
  loss: number;
  samples: number;
  steps: number;
  /** Time slept to emulate a slower device (EngineOptions.slowdown), ms; absent when not slowed. */
  sleptMs?: number;
}

export class ModelEngine {
  readonly model: Model;
  readonly optimizer: Optimizer;
  /** Batches consumed (optimizer or gradient steps) so far. */
  step = 0;
  private epoch = 0;
  private batches: Iterator<Batch>;
  private scratch: Storage | null = null;
  /** Examples per forward/backward pass; a step accumulates passes up to the batch (see planMemory). */
  microBatch: number;
  /** Most examples in one evaluation batch: what the memory plan found a pass holds (none: unbounded). */
  private evalBatchLimit = Infinity;
  private readonly clock: Clock;

  constructor(
    readonly backend: Backend,
    private readonly opts: EngineOptions,
  ) {
    this.model = createModel(opts.preset, backend, opts.seed);
    this.optimizer = createOptimizer(this.model.store, opts.optimizer);
    this.microBatch = opts.batchSize;
    this.clock = opts.clock ?? realClock;
    this.batches = this.epochIterator();
    if (this.nextBatchPeek() === null) throw new Error(`shard of ${opts.shard.length} examples holds no batch of ${opts.batchSize}`);
  }

  get length(): number {
    return this.model.store.length;
  }

  /** Examples per optimizer step (the job's batch). */
  get batchSize(): number {
    return this.opts.batchSize;
  }

  private epochIterator(): Iterator<Batch> {
    const { train, shard, batchSize, dataSeed, shuffle } = this.opts;
    if (shuffle === false) return inOrder(train, shard, batchSize);
    return epochBatches(train, shard, batchSize, dataSeed, this.epoch)[Symbol.iterator]();
  }

  private peeked: Batch | null = null;
  private nextBatchPeek(): Batch | null {
    if (!this.peeked) {
      const r = this.batches.next();
      this.peeked = r.done ? null : r.value;
    }
    return this.peeked;
  }

  /** The next batch of the shard, starting a new (reshuffled) epoch when one runs out; one step. */
  private nextBatch(): Batch {
    this.step++;
    return this.drawBatch();
  }

  private drawBatch(): Batch {
    let b = this.nextBatchPeek();
    if (!b) {
      this.epoch++;
      this.batches = this.epochIterator();
      b = this.nextBatchPeek()!;
    }
    this.peeked = null;
    return b;
  }

  /** Examples of a batch that a paced ddp step used only in part: the next step starts with them. */
  private carried: Batch | null = null;

  /** The next `n` examples of the shard, across batches (paced ddp's steps are micro-batches); one step. */
  private nextExamples(n: number): Batch {
    this.step++;
    const parts: Batch[] = [];
    for (let have = 0; have < n; ) {
      const b = this.carried ?? this.drawBatch();
      this.carried = null;
      const need = n - have;
      if (b.size > need) {
        parts.push(sliceBatch(b, 0, need));
        this.carried = sliceBatch(b, need, b.size);
      } else parts.push(b);
      have += Math.min(need, b.size);
    }
    return concatBatches(parts);
  }

  /**
   * Sizes a step to this backend's memory budget and binding limit from probe passes on examples of the
   * shard (one, of the batch, where `estimate` says it fits far under the budget), then trains that
   * way: the micro-batch, and recompute when `mode` allows it.
   */
  async planMemory(mode: RecomputeMode, estimate?: PlanEstimate): Promise<MemoryPlan> {
    const budgetBytes = this.backend.memory?.().budgetBytes ?? Infinity;
    const { train, shard, batchSize } = this.opts;
    const plan = await planMemory(this.model, batchSize, (n) => gather(train, shard.subarray(0, n)), { budgetBytes, mode, estimate });
    this.useMemoryPlan(plan);
    return plan;
  }

  useMemoryPlan(plan: { microBatch: number; recompute: boolean; maxExamples?: number }): void {
    this.microBatch = plan.microBatch;
    this.evalBatchLimit = Math.max(1, plan.maxExamples ?? plan.microBatch);
    if (this.model.recompute !== undefined) this.model.recompute = plan.recompute;
  }

  /** Epochs of the shard completed so far (fractional). */
  get epochs(): number {
    const perEpoch = Math.floor(this.opts.shard.length / this.opts.batchSize);
    return this.step / perEpoch;
  }

  /**
   * `n` optimizer steps with the inner optimizer, two in flight; one loss readback each. With
   * `budgetMs` (paced rounds), at most `n`: steps stop once less than half the next would fit the
   * budget (at least one is taken), so a member whose steps run slow this time does fewer, not later.
   */
  trainSteps(n: number, budgetMs?: number): Promise<LocalWork> {
    return budgetMs === undefined ? this.train(n, () => this.nextBatch()) : this.trainWithin(n, budgetMs);
  }

  /**
   * A work unit anyone can recompute (redundant recompute): `steps` optimizer steps from the current
   * parameters with a fresh inner optimizer, on batches drawn from `data` (default: this worker's
   * shard) by `batchSeed` alone, whatever this worker trained before.
   */
  trainUnit(unit: { batchSeed: number; steps: number }, data: { train: Dataset; shard: Int32Array } = this.opts): Promise<LocalWork> {
    this.optimizer.loadState({});
    const rand = mulberry32(unit.batchSeed);
    const { batchSize } = this.opts;
    return this.train(unit.steps, () => {
      const indices = new Int32Array(batchSize);
      for (let i = 0; i < batchSize; i++) indices[i] = data.shard[Math.floor(rand() * data.shard.length)];
      this.step++;
      return gather(data.train, indices);
    });
  }

  /** Recent local work's compute, ms per sample (for the slowdown's sleep and the budget's next step). */
  private readonly recentMsPerSample: number[] = [];

  /** The median of `recentMsPerSample`; 0 before any work. */
  private typicalMsPerSample(): number {
    const xs = [...this.recentMsPerSample].sort((a, b) => a - b);
    return xs.length ? xs[(xs.length - 1) >> 1] : 0;
  }

  /**
   * Records `samples` of compute since `t0`, then sleeps (slowdown − 1) × their typical compute (see
   * EngineOptions.slowdown); returns the ms slept (undefined when not slowed).
   */
  private async slowDown(t0: number, samples: number): Promise<number | undefined> {
    this.recentMsPerSample.push((this.clock.now() - t0) / Math.max(1, samples));
    if (this.recentMsPerSample.length > RECENT_WORK_KEPT) this.recentMsPerSample.shift();
    const factor = this.opts.slowdown ?? 1;
    if (!(factor > 1)) return undefined;
    const t1 = this.clock.now();
    await sleepOn(this.clock, (factor - 1) * samples * this.typicalMsPerSample());
    return this.clock.now() - t1;
  }

  /**
   * Steps until less than half a typical step still fits `budgetMs`, or `n` are done. Two in flight,
   * as `train` keeps them (the clock sees a step done when its loss is read, and the step recorded
   * behind it counts as taken); a slowed worker one at a time, sleeping after each, so its sleep
   * never overlaps its own compute.
   */
  private async trainWithin(n: number, budgetMs: number): Promise<LocalWork> {
    const factor = this.opts.slowdown ?? 1;
    const t0 = this.clock.now();
    let sum = 0, done = 0, recorded = 0, lastDone = t0;
    let sleptMs: number | undefined;
    let pending: Tensor | null = null;
    const finish = async (loss: Tensor) => {
      sum += await readScalar(loss);
      await yieldToEventLoop();
      const slept = await this.slowDown(lastDone, this.opts.batchSize);
      if (slept !== undefined) sleptMs = (sleptMs ?? 0) + slept;
      lastDone = this.clock.now();
      done++;
    };
    while (recorded < n) {
      const loss = recordTrainStep(this.model, this.optimizer, this.nextBatch(), this.microBatch);
      recorded++;
      if (factor > 1) await finish(loss);
      else {
        if (pending) await finish(pending);
        pending = loss;
      }
      // Another step if at least half of it fits after the one in flight (the budget's nearest whole
      // step, as the server's steps round), at this worker's typical pace, not this sync's: one slow
      // step does not end the work early.
      const stepMs = factor * this.opts.batchSize * this.typicalMsPerSample();
      if (!anotherStepFits(this.clock.now() - t0 + (pending ? stepMs : 0), stepMs, budgetMs)) break;
    }
    if (pending) await finish(pending);
    return { loss: sum / done, samples: done * this.opts.batchSize, steps: done, ...(sleptMs === undefined ? {} : { sleptMs }) };
  }

  private async train(n: number, next: () => Batch): Promise<LocalWork> {
    const t0 = this.clock.now();
    let sum = 0;
    let pending: Tensor | null = null;
    const readLoss = async (t: Tensor) => {
      sum += await readScalar(t);
      await yieldToEventLoop();
    };
    for (let i = 0; i < n; i++) {
      const loss = recordTrainStep(this.model, this.optimizer, next(), this.microBatch);
      if (pending) await readLoss(pending);
      pending = loss;
    }
    if (pending) await readLoss(pending);
    const sleptMs = await this.slowDown(t0, n * this.opts.batchSize);
    return { loss: sum / Math.max(n, 1), samples: n * this.opts.batchSize, steps: n, ...(sleptMs === undefined ? {} : { sleptMs }) };
  }

  /**
   * Forward and backward on the next batch, or on the next `examples` examples (paced ddp); the
   * gradient (their mean) stays in the flat gradient buffer.
   */
  async computeGradients(examples = this.opts.batchSize): Promise<LocalWork> {
    const t0 = this.clock.now();
    const batch = this.nextExamples(examples);
    const loss = recordGradientStep(this.model, batch, undefined, Math.min(this.microBatch, batch.size));
    const value = await readScalar(loss);
    const sleptMs = await this.slowDown(t0, batch.size);
    return { loss: value, samples: batch.size, steps: 1, ...(sleptMs === undefined ? {} : { sleptMs }) };
  }

  get gradientStorage(): Storage {
    return this.model.store.flatGrads;
  }

  async readGradients(): Promise<Float32Array> {
    return (await this.backend.read(this.model.store.flatGrads, 'f32')) as Float32Array;
  }

  /** Writes an (averaged) gradient and takes one optimizer step with it. */
  applyGradients(gradient: Float32Array): void {
    if (gradient.length !== this.length) throw new Error(`gradient has ${gradient.length} values, the model ${this.length}`);
    this.backend.write(this.model.store.flatGrads, gradient);
    this.optimizer.step();
    this.backend.flush();
  }

  /**
   * Resolves when the device has done the work submitted so far (one value read back). Workers
   * sharing a device in benchmarks call it after their commit, so the next worker's local work is
   * not timed with this one's queued updates.
   */
  async settled(): Promise<void> {
    await this.backend.read(this.backend.view(this.model.store.flatParams, 0, 1), 'f32');
  }

  readParams(): Promise<Float32Array> {
    return this.model.store.readFlat();
  }

  writeParams(values: Float32Array): void {
    this.model.store.writeFlat(values);
  }

  /** Allocates the scratch buffer uploadScratch writes to now (a memory plan made after counts it). */
  reserveScratch(): void {
    this.scratch ??= this.backend.alloc(this.length, 'f32');
  }

  /** A GPU vector for compressing host data (parameter deltas), reused across calls. */
  uploadScratch(values: Float32Array): Storage {
    this.reserveScratch();
    this.backend.write(this.scratch!, values);
    return this.scratch!;
  }

  /** Accuracy and loss of the current parameters on the test set, or `on` (at most `limit` examples). */
  async evaluate(limit = Infinity, batchSize = 500, on: Dataset = this.opts.test): Promise<{ accuracy: number; loss: number; count: number }> {
    const test = on;
    const view: Dataset = limit < test.count ? { ...test, count: limit } : test;
    // In batches the memory plan allows: 500 sequences of a GPT are far more than a tab's budget holds.
    // The event loop runs between them: on the CPU backend an evaluation of the 10,000 test images was
    // one 4.5 s block, and a process of eight Node volunteers and their server, beside a busy loop,
    // went past Socket.IO's ping timeout at the job's last (evaluated) sync.
    return evaluate(this.model, sequentialBatches(view, Math.min(batchSize, this.evalBatchLimit)), yieldToEventLoop);
  }

  /** The parameters (or `params`, a model of the same layout) as safetensors, with `extra` flat tensors beside them (a strategy's global state). */
  async checkpoint(metadata: Record<string, string> = {}, extra: Record<string, Float32Array> = {}, params?: Float32Array): Promise<Uint8Array> {
    const { store } = this.model;
    return store.safetensorsOf(params ?? (await store.readFlat()), { preset: JSON.stringify(this.opts.preset), ...metadata }, extra);
  }

  /** Loads the parameters; returns the checkpoint's other tensors (flat f32) by name. */
  loadCheckpoint(bytes: Uint8Array): Record<string, Float32Array> {
    this.model.store.loadSafetensors(bytes);
    const params = new Set(this.model.store.manifest.map((p) => p.name));
    const extra: Record<string, Float32Array> = {};
    for (const [name, t] of Object.entries(decodeSafetensors(bytes).tensors)) if (!params.has(name) && t.dtype === 'F32') extra[name] = f32Values(t);
    return extra;
  }
}

function* inOrder(ds: Dataset, indices: Int32Array, batchSize: number): Generator<Batch> {
  for (let i = 0; i + batchSize <= indices.length; i += batchSize) yield gather(ds, indices.subarray(i, i + batchSize));
}
