// A volunteer's model side for one job: builds the engine and sync strategy from the job spec, loads
// its data shard and the global model from the server, and runs the strategy's phases. Lives in the
// engine Web Worker in browsers (every method takes and returns plain, transferable values) and runs
// directly in Node tests.
import { decodeFashionShard, decodeTextShard, gaussianBlobs, loadFashionMnistTest, shardIndices, type Dataset } from '@tabfleet/data';
import { DgcCompressor, ModelEngine, createStrategy, defaultWarmupSyncs, type Payload, type SyncStrategy } from '@tabfleet/distributed';
import { contextOf, presetOf, type ModelPreset, type OptimizerConfig, type PlanEstimate } from '@tabfleet/nn';
import {
  DATASET_TRAIN_SIZES, TOKENIZER_VOCAB, architectureOf, defaultOptimizer, estimateMemory, isStreaming, layoutOf, checkpointDigestAsync, modelFragments,
  pacedStepCeiling, targetStepsOf, realClock, sleepOn,
  type Assignment, type Clock, type JobSpec, type ReplicaTask, type ReplicaUnit,
} from '@tabfleet/protocol';
import type { Backend } from '@tabfleet/tensor';
import { fetchModel, readCounted, type OnBytes } from './checkpoint-transfer';
import { loadDataset } from './solo';

/** What a round averages: deltas from the job's model, or (Moshpit groups) the parameters. */
export type SyncOf = 'delta' | 'params';

/** The inner optimizer a job's strategy uses. */
export function innerOptimizer(spec: JobSpec): OptimizerConfig {
  const h = spec.hyperparameters;
  const kind = h.optimizer ?? defaultOptimizer(spec.strategy);
  if (kind !== 'sgd') return { kind, lr: h.lr, weightDecay: h.weightDecay };
  // With DGC, DDP's momentum lives in the compressor (momentum correction), so the optimizer has none.
  const momentum = spec.strategy === 'ddp' && spec.compression === 'dgc' ? 0 : h.momentum;
  return { kind: 'sgd', lr: h.lr, momentum, nesterov: momentum > 0, weightDecay: h.weightDecay };
}

/** How long a tab keeps asking for a file the server refuses for now (429, 503) before it gives up. */
const DOWNLOAD_RETRY_FOR_MS = 120_000;

/**
 * A file from the server. Refusals that pass are asked again after the server's Retry-After (or a
 * backoff) with jitter: tabs behind one address that join at once exceed the shard downloads the
 * server serves per address, and the later ones wait their turn instead of failing their job.
 */
async function fetchBytes(url: string, { clock, onBytes }: Downloads): Promise<Uint8Array> {
  const giveUpAt = clock.now() + DOWNLOAD_RETRY_FOR_MS;
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(url);
    if (res.ok) return readCounted(res, onBytes);
    const body = await res.text().catch(() => '');
    if ((res.status !== 429 && res.status !== 503) || clock.now() >= giveUpAt) throw new Error(`GET ${url}: HTTP ${res.status} ${body}`.trim());
    const retryAfterMs = 1000 * Number(res.headers.get('retry-after') ?? NaN);
    const waitMs = Number.isFinite(retryAfterMs) ? retryAfterMs : Math.min(4_000, 250 * 2 ** attempt);
    await sleepOn(clock, waitMs * (0.5 + Math.random()));
  }
}

/**
 * The step's memory as protocol's estimate replays it from the architecture, for the planner: a batch
 * far under the budget is then probed once, not at 1 and 2 examples first. Undefined where the estimate
 * cannot be made (an architecture it refuses): the planner probes as without one. (A backend that
 * measures no memory, the CPU's, plans the whole batch whatever it is given.)
 */
function planEstimateOf(spec: JobSpec, backend: Backend): PlanEstimate | undefined {
  const conv = (backend as { convVariant?: 'direct' | 'gemm' }).convVariant;
  try {
    const e = estimateMemory(architectureOf(spec), { optimizer: innerOptimizer(spec).kind, batchSize: spec.hyperparameters.batchSize, conv });
    return { perExample: e.perExample.plain, peakAtBatch: e.batch.plain };
  } catch {
    return undefined;
  }
}

/** What a tab's downloads are waited on and counted with. */
interface Downloads {
  clock: Clock;
  onBytes: OnBytes;
}

/** This worker's training shard and the test set, as the job's dataset says. */
async function loadJobData(spec: JobSpec, assignment: Assignment, serverUrl: string, preset: ModelPreset, net: Downloads): Promise<{ train: Dataset; test: Dataset; indices: Int32Array }> {
  const shard = assignment.shard;
  if (spec.dataset === 'fashion-mnist') {
    const base = `${serverUrl}/datasets/fashion-mnist`;
    // The assignment's URL carries the ticket the server asks for (and may be relative to the server).
    const shardUrl = assignment.dataUrl ? new URL(assignment.dataUrl, serverUrl).href : `${base}/shards/${shard.index}/${shard.count}?seed=${spec.seed}`;
    const [train, test] = await Promise.all([
      fetchBytes(shardUrl, net).then(decodeFashionShard),
      loadFashionMnistTest((name) => fetchBytes(`${base}/${name}`, net)),
    ]);
    return { train, test, indices: Int32Array.from({ length: train.count }, (_, i) => i) };
  }
  if (spec.dataset === 'fortunes' || spec.dataset === 'text-upload' || spec.dataset === 'image-upload') {
    // The server cuts the dataset: this member's training shard (its assignment's ticketed URL) and
    // the validation part every evaluator reads (text: tokenized and cut at the model's context).
    if (!assignment.dataUrl) throw new Error(`a ${spec.dataset} job needs its shard URL from the server`);
    const shardUrl = new URL(assignment.dataUrl, serverUrl);
    // The same dataset, cut, job and ticket: an upload's validation part is served to its members only.
    const validationUrl = new URL(shardUrl.href.replace(/\/shards\/\d+\/\d+\?/, '/validation?'));
    validationUrl.searchParams.set('shard', `${shard.index}/${shard.count}`);
    const vocab = spec.tokenizer ? TOKENIZER_VOCAB[spec.tokenizer] : 0;
    const decode = spec.dataset === 'image-upload' ? decodeFashionShard : (b: Uint8Array) => decodeTextShard(b, vocab);
    const [train, test] = await Promise.all([fetchBytes(shardUrl.href, net).then(decode), fetchBytes(validationUrl.href, net).then(decode)]);
    return { train, test, indices: Int32Array.from({ length: train.count }, (_, i) => i) };
  }
  if (spec.dataset === 'synthetic-blobs') {
    const all = gaussianBlobs(DATASET_TRAIN_SIZES['synthetic-blobs'] + 2048, 784, 10, spec.seed);
    const train: Dataset = { ...all, count: DATASET_TRAIN_SIZES['synthetic-blobs'] };
    const test: Dataset = { ...all, x: all.x.subarray(train.count * 784), y: all.y.subarray(train.count), count: 2048 };
    return { train, test, indices: shardIndices(train.count, shard.index, shard.count, spec.seed) };
  }
  const { train, test } = await loadDataset({ kind: 'text', sentences: 4000, seed: spec.seed, tokenizer: spec.tokenizer === 'bytes' ? 'bytes' : 'chars' }, contextOf(preset) ?? 64);
  return { train, test, indices: shardIndices(train.count, shard.index, shard.count, spec.seed) };
}

export interface JobEngineInfo {
  length: number;
  /** How this tab runs a step: examples per pass, recompute, and why (planMemory). */
  memory: { microBatch: number; recompute: boolean; passes: number; reason: string; predictedPeakBytes: number; budgetBytes: number };
  stepsPerSync: number;
  targetSteps: number;
  trainExamples: number;
}

export class JobEngine {
  private engine: ModelEngine | null = null;
  private strategy: SyncStrategy | null = null;
  private spec: JobSpec | null = null;
  private assignment: Assignment | null = null;
  /** A second model for recomputing other members' work units, and the last other shard it read. */
  private replica: ModelEngine | null = null;
  private replicaData: { index: number; train: Dataset; shard: Int32Array } | null = null;
  /** Checkpoint URLs may be relative to it (a server listening on every interface). */
  private serverUrl = '';
  /** Odd while a commit or load changes the model, bumped again after: servedCheckpoint sees a change under it. */
  private modelVersion = 0;
  /** Bytes downloaded for the job so far (shards, models): the runtime's heartbeat shows a load moving. */
  private downloaded = 0;
  /** The model download under way (loadModel), which abandonModelLoad stops. */
  private modelDownload: AbortController | null = null;
  private readonly downloads: Downloads;

  /**
   * `slowdown`: this tab pretends to be that many times slower (tests and benchmarks of unequal
   * volunteers); `clock`: what local work and its budget are timed on (default realClock).
   */
  constructor(private readonly backend: Backend, private readonly opts: { slowdown?: number; clock?: Clock } = {}) {
    this.downloads = { clock: opts.clock ?? realClock, onBytes: (n) => void (this.downloaded += n) };
  }

  private get ready(): { engine: ModelEngine; strategy: SyncStrategy; spec: JobSpec } {
    if (!this.engine || !this.strategy || !this.spec) throw new Error('no job set up: call setup() first');
    return { engine: this.engine, strategy: this.strategy, spec: this.spec };
  }

  async setup(assignment: Assignment, serverUrl: string): Promise<JobEngineInfo> {
    const spec = assignment.job.spec;
    const preset = presetOf(spec);
    this.serverUrl = serverUrl;
    const data = await loadJobData(spec, assignment, serverUrl, preset, this.downloads);
    const engine = new ModelEngine(this.backend, {
      preset, seed: spec.seed, optimizer: innerOptimizer(spec), batchSize: spec.hyperparameters.batchSize,
      train: data.train, test: data.test, shard: data.indices, dataSeed: spec.seed * 7919 + assignment.shard.index, slowdown: this.opts.slowdown, clock: this.opts.clock,
    });
    const targetSteps = targetStepsOf(spec);
    // What the job holds beside its steps is allocated before they are planned, so the planner's probes
    // count it: DGC's accumulator (and DDP's momentum), and the scratch buffer a host-side delta is
    // compressed from (LocalSGD, DiLoCo). Planned first, a GPT's step used the room these took later.
    const compressor = spec.compression === 'dgc'
      ? new DgcCompressor(this.backend, engine.length, {
          momentum: spec.strategy === 'ddp' ? spec.hyperparameters.momentum : 0,
          clipNorm: spec.strategy === 'ddp' ? 5 : 0,
          finalSparsity: spec.sparsity,
          // Counted in syncs (the strategy passes its sync count as the step).
          warmupSteps: defaultWarmupSyncs(Math.ceil(targetSteps / (spec.strategy === 'ddp' ? 1 : spec.H))),
        })
      : undefined;
    if (compressor && spec.strategy !== 'ddp') engine.reserveScratch();
    const memory = await engine.planMemory(spec.recompute, planEstimateOf(spec, this.backend));
    const streaming = isStreaming(spec)
      ? { fragments: modelFragments(layoutOf(spec), spec.fragments), overlapSteps: spec.overlapSteps, mixing: spec.fragmentMixing }
      : undefined;
    this.strategy = createStrategy(engine, {
      strategy: spec.strategy, H: spec.H, compression: spec.compression, outerLr: spec.hyperparameters.outerLr, outerMomentum: spec.hyperparameters.outerMomentum, compressor,
      streaming,
    });
    this.engine = engine;
    this.spec = spec;
    this.assignment = assignment;
    this.replica = null;
    this.replicaData = null;
    const { microBatch, recompute, passes, reason, predictedPeakBytes, budgetBytes } = memory;
    return { length: engine.length, stepsPerSync: this.strategy.stepsPerSync, targetSteps, trainExamples: data.indices.length, memory: { microBatch, recompute, passes, reason,
      predictedPeakBytes, budgetBytes } };
  }

  /**
   * Loads the global model (null url: the seeded initial parameters) and restarts the strategy from it.
   * Returns the loaded parameters' digest (the server checks it against the checkpoint's).
   */
  async loadModel(url: string | null, step: number): Promise<{ digest: string }> {
    if (!url) return this.load(null, step);
    const download = (this.modelDownload = new AbortController());
    try {
      return await this.load(await fetchModel(new URL(url, this.serverUrl).href, this.downloads.clock, this.downloads.onBytes, download.signal), step);
    } finally {
      if (this.modelDownload === download) this.modelDownload = null;
    }
  }

  /** Stops the model download under way, if any (the server sent a newer model): its loadModel rejects, the model unchanged. */
  abandonModelLoad(): void {
    this.modelDownload?.abort(new Error('the model download was abandoned: the server sent a newer model'));
  }

  /** Bytes downloaded for this job so far, counted up as they arrive (a load in progress moves it). */
  downloadedBytes(): number {
    return this.downloaded;
  }

  /** Loads a checkpoint in hand (a member sent it: the caller checked its digest), as loadModel does. */
  loadCheckpoint(bytes: Uint8Array, step: number): Promise<{ digest: string }> {
    return this.load(bytes, step);
  }

  private async load(checkpoint: Uint8Array | null, step: number): Promise<{ digest: string }> {
    const { engine, strategy } = this.ready;
    this.modelVersion++;
    try {
      const state = checkpoint ? engine.loadCheckpoint(checkpoint) : {};
      engine.step = step;
      await strategy.reset(Math.floor(step / strategy.stepsPerSync), state);
    } finally {
      this.modelVersion++;
    }
    return { digest: await checkpointDigestAsync(await engine.readParams(), await strategy.globalState()) };
  }

  /**
   * The model of the last commit as a checkpoint, for a joiner that asked this member for it: the
   * global model (LocalSGD's and DiLoCo's base, while the parameters move on in local steps; Streaming
   * DiLoCo's global model; DDP's parameters, which change only at commits) with the strategy's global
   * state. Throws when a commit or load ran meanwhile: the checkpoint would mix two models.
   */
  async servedCheckpoint(step: number): Promise<Uint8Array> {
    const { engine, strategy } = this.ready;
    const version = this.modelVersion;
    if (version % 2) throw new Error('the model is changing (a commit or load is under way)');
    const params = strategy.globalModel?.() ?? strategy.replay?.committedParams() ?? (await engine.readParams());
    const bytes = await engine.checkpoint({ step: String(step) }, await strategy.globalState(), params);
    if (this.modelVersion !== version) throw new Error('the model changed while its checkpoint was built');
    return bytes;
  }

  /** `steps` local steps (paced: with `budgetMs`, at most `pacedStepCeiling(steps, trust)`, stopping at the budget). */
  local(steps?: number, budgetMs?: number) {
    return this.ready.strategy.local(budgetMs === undefined || steps === undefined ? steps : pacedStepCeiling(steps, this.ready.spec.trust), budgetMs);
  }

  /**
   * What this member sends: its strategy's payload (a delta from the job's model), or in Moshpit
   * rounds its parameters themselves (members' models differ across groups, so deltas from their
   * own bases would never meet). With compression fp16 they go as f16 (jobs.ts allows it only in
   * untrusted groups; DGC never: a sparse delta has no model the group's members share).
   */
  async payload(of: SyncOf = 'delta'): Promise<Payload> {
    if (of === 'params') return { kind: 'dense', dtype: this.ready.spec.compression === 'fp16' ? 'f16' : 'f32', values: await this.ready.engine.readParams() };
    return this.ready.strategy.payload();
  }

  /** The state to adopt from the round's mean (of deltas, or of a Moshpit group's parameters); its checksum. */
  prepare(mean: Float32Array, of: SyncOf = 'delta'): Promise<string> {
    const { strategy } = this.ready;
    if (of === 'delta') return strategy.prepare(mean);
    if (!strategy.prepareParams) throw new Error(`a ${strategy.name} job does not average parameters in Moshpit groups`);
    return strategy.prepareParams(mean);
  }

  async commit(): Promise<void> {
    this.modelVersion++;
    try {
      await this.ready.strategy.commit();
    } finally {
      this.modelVersion++;
    }
  }

  discard(): void {
    this.ready.strategy.discard();
  }

  /** This sync's local work as a replayable unit (redundant recompute); its delta is `unitDelta()`. */
  localUnit(unit: ReplicaUnit) {
    const { strategy } = this.ready;
    if (!strategy.replay) throw new Error(`a ${strategy.name} job has no replayable work units`);
    if (unit.shard.index !== this.assignment!.shard.index) throw new Error(`unit ${unit.unitId} is shard ${unit.shard.index}'s work, this member trains shard ${this.assignment!.shard.index}`);
    return strategy.replay.localUnit(unit);
  }

  /** The delta (start − end parameters) of this sync's local work so far. */
  unitDelta(): Promise<Float32Array> {
    const { strategy } = this.ready;
    if (!strategy.replay) throw new Error(`a ${strategy.name} job has no replayable work units`);
    return strategy.replay.delta();
  }

  /** Recomputes another member's unit on a second model from the last committed parameters; returns its delta. */
  async replicate(task: ReplicaTask): Promise<Float32Array> {
    const { strategy, spec } = this.ready;
    if (!strategy.replay) throw new Error(`a ${strategy.name} job has no replayable work units`);
    const data = await this.shardOf(task);
    this.replica ??= new ModelEngine(this.backend, {
      preset: presetOf(spec), seed: spec.seed, optimizer: innerOptimizer(spec), batchSize: spec.hyperparameters.batchSize,
      train: data.train, test: data.train, shard: data.shard, dataSeed: 0, slowdown: this.opts.slowdown, clock: this.opts.clock,
    });
    const { engine } = this.ready;
    this.replica.useMemoryPlan({ microBatch: engine.microBatch, recompute: engine.model.recompute ?? false });
    const start = strategy.replay.committedParams();
    this.replica.writeParams(start);
    await this.replica.trainUnit(task.unit, data);
    const end = await this.replica.readParams();
    const delta = new Float32Array(start.length);
    for (let i = 0; i < delta.length; i++) delta[i] = start[i] - end[i];
    return delta;
  }

  private async shardOf(task: ReplicaTask): Promise<{ train: Dataset; shard: Int32Array }> {
    const { index, count } = task.unit.shard;
    if (this.replicaData?.index === index) return this.replicaData;
    const spec = this.ready.spec;
    const assignment: Assignment = { ...this.assignment!, shard: { index, count }, dataUrl: task.dataUrl };
    const data = await loadJobData(spec, assignment, this.serverUrl, presetOf(spec), this.downloads);
    this.replicaData = { index, train: data.train, shard: data.indices };
    return this.replicaData;
  }

  /** Optimizer steps taken (a method, not a getter, so it works through comlink). */
  currentStep(): number {
    return this.engine?.step ?? 0;
  }

  /** checkpointDigest of the global model and state as they are now (an evaluator reports it with its accuracy). */
  async digest(): Promise<string> {
    const { engine, strategy } = this.ready;
    return checkpointDigestAsync(strategy.globalModel?.() ?? (await engine.readParams()), await strategy.globalState());
  }

  /** The global model as a checkpoint (with the strategy's global state). */
  async checkpoint(): Promise<Uint8Array> {
    const { engine, strategy } = this.ready;
    const state = await strategy.globalState();
    return this.onGlobalModel(() => engine.checkpoint({ step: String(engine.step) }, state));
  }

  /** The global model's accuracy and loss. */
  evaluate(limit?: number) {
    return this.onGlobalModel(() => this.ready.engine.evaluate(limit));
  }

  /**
   * Runs `fn` with the global model in the parameters and puts this member's own back after: Streaming
   * DiLoCo's parameters carry local progress the global model has not taken in. Called between a
   * commit and the next local work, never during it.
   */
  private async onGlobalModel<T>(fn: () => Promise<T>): Promise<T> {
    const { engine, strategy } = this.ready;
    const global = strategy.globalModel?.();
    if (!global) return fn();
    const own = await engine.readParams();
    engine.writeParams(global);
    try {
      return await fn();
    } finally {
      engine.writeParams(own);
    }
  }
}
