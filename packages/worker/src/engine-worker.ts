// The dedicated Web Worker that owns the WebGPU device and trains; the page talks to it via comlink.
import * as Comlink from 'comlink';
import { CpuBackend, WebGpuBackend, type Backend } from '@tabfleet/tensor';
import { defaultGpuMemoryBytes } from '@tabfleet/nn';
import type { Assignment, JobSpec, ReplicaTask, ReplicaUnit } from '@tabfleet/protocol';
import { JobEngine, type JobEngineInfo, type SyncOf } from './job-engine';
import { Sampler, type SampleRequest } from './sampler';
import { trainSolo, type Progress, type SoloTrainConfig, type TrainReport } from './solo';

export type BackendChoice = 'webgpu' | 'cpu';

export interface BackendInfo {
  kind: BackendChoice;
  description: string;
  adapter: { vendor: string; architecture: string; device: string; description: string; isCpu: boolean; features: string[]; maxStorageBufferBindingSize: number; maxBufferSize: number } | null;
  /** GPU memory this tab allows itself (WebGPU only). */
  memoryBudgetBytes?: number;
}

export interface EngineInitOptions {
  gpuMemoryMiB?: number;
  slowdown?: number;
}

export class EngineApi {
  private backend: Backend | null = null;
  private job: JobEngine | null = null;
  private sampler: Sampler | null = null;
  /** Emulate a device this many times slower (tests of unequal volunteers: the volunteer page's `?slowdown=`). */
  private slowdown: number | undefined;
  /** How the backend was opened, to open it again after the device is lost. */
  private opened: { choice: BackendChoice; opts: EngineInitOptions } | null = null;
  private deviceLost: ((reason: string) => void) | null = null;

  /** Opens the backend. 'cpu' is the explicit, labelled fallback for machines without WebGPU. */
  async init(choice: BackendChoice, opts: EngineInitOptions = {}): Promise<BackendInfo> {
    this.opened = { choice, opts };
    this.slowdown = opts.slowdown;
    if (choice === 'cpu') {
      this.backend = new CpuBackend('f32');
      return { kind: 'cpu', description: this.backend.description, adapter: null };
    }
    // What this tab allows itself: the volunteer's setting, else from the device's memory (planMemory sizes steps to it).
    const deviceMemory = (self.navigator as Navigator & { deviceMemory?: number }).deviceMemory;
    const memoryBudgetBytes = opts.gpuMemoryMiB ? opts.gpuMemoryMiB * 2 ** 20 : defaultGpuMemoryBytes(deviceMemory);
    const gpu = await WebGpuBackend.create((self.navigator as Navigator).gpu, { memoryBudgetBytes });
    this.backend = gpu;
    // A driver reset or GPU process crash: the page hears of it at once (not at the next failing call).
    void gpu.rt.device.lost.then((info) => {
      if (this.backend === gpu) this.deviceLost?.(`${info.reason}${info.message ? `: ${info.message}` : ''}`);
    });
    const a = gpu.adapter;
    return { kind: 'webgpu', description: gpu.description, adapter: { ...a }, memoryBudgetBytes };
  }

  /** Called (through Comlink.proxy) when the WebGPU device is lost. */
  onDeviceLost(callback: (reason: string) => void): void {
    this.deviceLost = callback;
  }

  /** Opens the backend again as it was first opened: a new device after a loss; the job and sampler start over. */
  async restart(): Promise<BackendInfo> {
    if (!this.opened) throw new Error('engine not initialized: call init() first');
    this.job = null;
    this.sampler = null;
    return this.init(this.opened.choice, this.opened.opts);
  }

  /** Destroys the real GPUDevice: to the page this is what a driver reset looks like (the lifecycle tests use it). */
  loseDevice(): void {
    if (!(this.backend instanceof WebGpuBackend)) throw new Error('no WebGPU device to lose: the engine runs on the CPU');
    this.backend.rt.device.destroy();
  }

  private get jobEngine(): JobEngine {
    if (!this.job) throw new Error('no job: call setup() first');
    return this.job;
  }

  // A volunteer's job (the page's VolunteerRuntime calls these; see job-engine.ts).
  async setup(assignment: Assignment, serverUrl: string): Promise<JobEngineInfo> {
    if (!this.backend) throw new Error('engine not initialized: call init() first');
    this.job = new JobEngine(this.backend, { slowdown: this.slowdown });
    return this.job.setup(assignment, serverUrl);
  }
  loadModel(url: string | null, step: number) {
    return this.jobEngine.loadModel(url, step);
  }
  downloadedBytes() {
    return this.job?.downloadedBytes() ?? 0;
  }
  abandonModelLoad() {
    this.job?.abandonModelLoad();
  }
  loadCheckpoint(bytes: Uint8Array, step: number) {
    return this.jobEngine.loadCheckpoint(bytes, step);
  }
  async servedCheckpoint(step: number) {
    const bytes = await this.jobEngine.servedCheckpoint(step);
    return Comlink.transfer(bytes, [bytes.buffer]);
  }
  local(steps?: number, budgetMs?: number) {
    return this.jobEngine.local(steps, budgetMs);
  }
  payload(of?: SyncOf) {
    return this.jobEngine.payload(of);
  }
  prepare(mean: Float32Array, of?: SyncOf) {
    return this.jobEngine.prepare(mean, of);
  }
  commit() {
    return this.jobEngine.commit();
  }
  discard() {
    this.job?.discard();
  }
  currentStep() {
    return this.job?.currentStep() ?? 0;
  }
  async checkpoint() {
    const bytes = await this.jobEngine.checkpoint();
    return Comlink.transfer(bytes, [bytes.buffer]);
  }
  evaluate(limit?: number) {
    return this.jobEngine.evaluate(limit);
  }
  digest() {
    return this.jobEngine.digest();
  }
  localUnit(unit: ReplicaUnit) {
    return this.jobEngine.localUnit(unit);
  }
  async unitDelta() {
    const delta = await this.jobEngine.unitDelta();
    return Comlink.transfer(delta, [delta.buffer]);
  }
  async replicate(task: ReplicaTask) {
    const delta = await this.jobEngine.replicate(task);
    return Comlink.transfer(delta, [delta.buffer]);
  }

  // Text from a checkpoint (the dashboard's sample box).
  async loadSampler(spec: JobSpec, checkpoint: Uint8Array): Promise<void> {
    if (!this.backend) throw new Error('engine not initialized: call init() first');
    this.sampler = await Sampler.load(this.backend, spec, checkpoint);
  }
  sample(req: SampleRequest, onText: (piece: string) => void): Promise<string> {
    if (!this.sampler) throw new Error('no checkpoint loaded: call loadSampler() first');
    return this.sampler.sample(req, onText);
  }

  async trainSolo(cfg: SoloTrainConfig, onProgress: (p: Progress) => void): Promise<TrainReport> {
    if (!this.backend) throw new Error('engine not initialized: call init() first');
    return trainSolo(this.backend, cfg, onProgress);
  }
}

Comlink.expose(new EngineApi());
