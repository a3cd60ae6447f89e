// The WebGPU runtime under the backend: buffer pool, pipeline cache, a per-submission uniform arena,
// and one compute pass that collects every dispatch until a flush. A training step therefore becomes
// one command buffer, and the only wait is the readback the caller asks for.
import type { MemoryUse } from '../backend';
import { SHADERS, type ShaderName } from '../shaders.generated';
import { GpuDeviceLostError, GpuKernelError, GpuOutOfMemoryError, type AdapterSummary } from './device';
import { KernelProfiler, type KernelTime } from './profiler';

const UNIFORM_SLOT = 256; // minUniformBufferOffsetAlignment
// WebGPU's usage flag values, spelled out so this module loads before the WebGPU globals exist (Node).
const USAGE = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 } as const;
const MAP_MODE_READ = 0x1;
const STORAGE_USAGE = USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST;

let nextBufferId = 1;
/** Buffers up to this many bytes are pooled in powers of two; larger ones in BUCKET_STEPS_PER_OCTAVE steps an octave. */
export const LARGE_BUCKET_BYTES = 2 ** 20;
export const BUCKET_STEPS_PER_OCTAVE = 8;
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

export class GpuStorage {
  constructor(
    readonly buffer: GPUBuffer,
    readonly id: number,
    /** Byte offset into buffer (views of the flat parameter buffer). */
    readonly offset: number,
    /** Elements. */
    readonly size: number,
    readonly isView: boolean,
  ) {}
}

export interface Dispatch {
  shader: ShaderName;
  /** Entry point when the module has several (default 'main'). */
  entryPoint?: string;
  /** Override constants; part of the pipeline key. */
  constants?: Record<string, number | boolean>;
  /** Contents of the shader's uniform struct at @binding(0); u32 words or raw bytes. */
  uniforms: Uint32Array | ArrayBuffer;
  /** Storage buffers at @binding(1..n) in order. */
  buffers: GpuStorage[];
  workgroups: [number, number?, number?];
}

export class GpuRuntime {
  private readonly pool = new Map<number, GPUBuffer[]>();
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly stagingPool = new Map<number, GPUBuffer[]>();
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private arena: GPUBuffer;
  private arenaMirror: Uint8Array;
  private arenaUsed = 0;
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private pendingDispatches = 0;
  private error: Error | null = null;
  /** Kernels recorded since the last completed readback, named in asynchronous GPU errors. */
  private readonly recentKernels = new Set<string>();
  private lostReason: string | null = null;
  private profiler: KernelProfiler | null = null;
  /** Dispatches and submissions since creation (benchmarks and tests read these). */
  readonly counters = { dispatches: 0, submits: 0, readbacks: 0, buffersCreated: 0 };
  /**
   * Live storage bytes (pooled buffers handed out, dedicated ones) a tab allows itself. WebGPU does not
   * say how much memory an adapter has, so the tab decides (the worker from its settings); past it an
   * allocation throws GpuOutOfMemoryError instead of risking the device.
   */
  memoryBudgetBytes = Infinity;
  private liveBytes = 0;
  private peakBytes = 0;
  private createdBytes = 0;
  private largestBytes = 0;

  constructor(readonly device: GPUDevice, readonly adapter: AdapterSummary) {
    this.arenaMirror = new Uint8Array(4096 * UNIFORM_SLOT);
    this.arena = this.createArena(this.arenaMirror.byteLength);
    device.addEventListener('uncapturederror', (ev) => {
      const msg = (ev as GPUUncapturedErrorEvent).error.message;
      this.error ??= new GpuKernelError(`GPU error in a submission running kernels [${[...this.recentKernels].join(', ')}]: ${msg}`);
    });
    void device.lost.then((info) => {
      this.lostReason = `${info.reason}: ${info.message}`;
    });
  }

  private createArena(bytes: number): GPUBuffer {
    return this.device.createBuffer({ label: 'uniform-arena', size: bytes, usage: USAGE.UNIFORM | USAGE.COPY_DST });
  }

  private checkHealthy(): void {
    if (this.lostReason !== null) throw new GpuDeviceLostError(`GPU device lost (${this.lostReason})`);
    if (this.error) {
      const e = this.error;
      this.error = null;
      throw e;
    }
  }

  // ---- buffers -------------------------------------------------------------------------------

  /**
   * Pool sizes: powers of two up to 1 MiB (small tensors reuse well), then eight steps an octave, so a
   * large tensor wastes at most an eighth of itself (GPT-2's 196 MiB logits took 256 MiB, now 208).
   * Protocol's memory-estimate.ts (pooledBytes) follows this rule; nn's memory-estimate test holds them equal.
   */
  static bucket(bytes: number): number {
    const pow = 2 ** Math.ceil(Math.log2(Math.max(bytes, 4)));
    if (pow <= LARGE_BUCKET_BYTES) return Math.max(256, pow);
    const step = pow / 2 / BUCKET_STEPS_PER_OCTAVE;
    return Math.ceil(bytes / step) * step;
  }

  alloc(elements: number, label = 'tensor'): GpuStorage {
    // Pooled buckets (see bucket); a tensor whose bucket would pass the binding limit gets its own size.
    const exact = Math.max(16, Math.ceil((elements * 4) / 16) * 16);
    const bucket = GpuRuntime.bucket(elements * 4);
    const bytes = bucket > this.bindingLimit && exact <= this.bindingLimit ? exact : bucket;
    this.checkBudget(bytes, label);
    let buffer = this.pool.get(bytes)?.pop();
    if (!buffer) buffer = this.createStorageBuffer(bytes, label);
    this.countLive(bytes);
    return new GpuStorage(buffer, this.idOf(buffer), 0, elements, false);
  }

  /** A buffer outside the pool (flat parameter store), sized exactly. */
  allocDedicated(elements: number, label: string): GpuStorage {
    const bytes = Math.max(16, Math.ceil((elements * 4) / 16) * 16);
    this.checkBudget(bytes, label);
    const buffer = this.createStorageBuffer(bytes, label);
    this.countLive(bytes);
    return new GpuStorage(buffer, this.idOf(buffer), 0, elements, true);
  }

  private get bindingLimit(): number {
    return Math.min(this.adapter.maxStorageBufferBindingSize, this.adapter.maxBufferSize);
  }

  private checkBudget(bytes: number, label: string): void {
    // Every storage buffer is bound whole, so the binding limit caps one tensor (WebGPU would report it late).
    const cap = this.bindingLimit;
    if (bytes > cap) throw new GpuOutOfMemoryError(`${label}: one tensor of ${mib(bytes)} exceeds this adapter's largest storage binding (${mib(cap)})`);
    if (this.liveBytes + bytes > this.memoryBudgetBytes) {
      throw new GpuOutOfMemoryError(`${label}: ${mib(bytes)} more would make ${mib(this.liveBytes + bytes)} live, past this tab's GPU memory budget of ${mib(this.memoryBudgetBytes)}`);
    }
  }

  private createStorageBuffer(bytes: number, label: string): GPUBuffer {
    // Free pooled buffers of other sizes go first when a new one would pass the budget.
    if (this.createdBytes + bytes > this.memoryBudgetBytes) this.trimPool();
    this.createdBytes += bytes;
    this.counters.buffersCreated++;
    return this.device.createBuffer({ label, size: bytes, usage: STORAGE_USAGE });
  }

  private countLive(bytes: number): void {
    this.liveBytes += bytes;
    if (this.liveBytes > this.peakBytes) this.peakBytes = this.liveBytes;
    if (bytes > this.largestBytes) this.largestBytes = bytes;
  }

  /** Destroys every free pooled buffer (after submitting the work recorded so far, which may use them). */
  trimPool(): void {
    this.flush();
    for (const free of this.pool.values()) for (const b of free.splice(0)) {
      this.createdBytes -= b.size;
      b.destroy();
    }
    this.bindGroups.clear();
  }

  memory(): MemoryUse {
    return { liveBytes: this.liveBytes, peakBytes: this.peakBytes, largestBytes: this.largestBytes, createdBytes: this.createdBytes, budgetBytes: this.memoryBudgetBytes };
  }

  /** Starts a new peak at the current live bytes, and a new largest tensor (before the step to measure). */
  resetPeakMemory(): void {
    this.peakBytes = this.liveBytes;
    this.largestBytes = 0;
  }

  private idOf(buffer: GPUBuffer): number {
    let id = this.bufferIds.get(buffer);
    if (id === undefined) this.bufferIds.set(buffer, (id = nextBufferId++));
    return id;
  }

  release(s: GpuStorage): void {
    if (s.isView) return;
    const bytes = s.buffer.size;
    this.liveBytes -= bytes;
    let free = this.pool.get(bytes);
    if (!free) this.pool.set(bytes, (free = []));
    free.push(s.buffer);
  }

  view(s: GpuStorage, offsetElements: number, size: number): GpuStorage {
    const offset = s.offset + offsetElements * 4;
    if (offset % 256 !== 0) throw new Error(`view offset ${offsetElements} is not 256-byte aligned`);
    return new GpuStorage(s.buffer, s.id, offset, size, true);
  }

  /** Host → GPU. Flushes first so the write cannot overtake queued work that still reads this buffer. */
  write(dst: GpuStorage, data: ArrayBufferView): void {
    if (this.pendingDispatches > 0) this.flush();
    this.device.queue.writeBuffer(dst.buffer, dst.offset, data.buffer, data.byteOffset, data.byteLength);
  }

  async read(src: GpuStorage): Promise<ArrayBuffer> {
    this.checkHealthy();
    const bytes = src.size * 4;
    const size = GpuRuntime.bucket(bytes);
    const staging = this.stagingPool.get(size)?.pop() ??
      this.device.createBuffer({ label: 'readback', size, usage: USAGE.MAP_READ | USAGE.COPY_DST });
    this.endPass();
    this.ensureEncoder().copyBufferToBuffer(src.buffer, src.offset, staging, 0, Math.ceil(bytes / 4) * 4);
    this.flush();
    this.counters.readbacks++;
    try {
      await staging.mapAsync(MAP_MODE_READ, 0, bytes);
    } catch (e) {
      this.checkHealthy();
      throw e;
    }
    const out = staging.getMappedRange(0, bytes).slice(0);
    staging.unmap();
    let free = this.stagingPool.get(size);
    if (!free) this.stagingPool.set(size, (free = []));
    free.push(staging);
    this.checkHealthy();
    this.recentKernels.clear();
    return out;
  }

  // ---- dispatch ------------------------------------------------------------------------------

  private pipeline(shader: ShaderName, entryPoint: string, constants: Record<string, number | boolean> | undefined): GPUComputePipeline {
    const key = `${shader}:${entryPoint}${constants ? `|${JSON.stringify(constants)}` : ''}`;
    let p = this.pipelines.get(key);
    if (!p) {
      const module = this.device.createShaderModule({ label: shader, code: SHADERS[shader] });
      p = this.device.createComputePipeline({
        label: key,
        layout: 'auto',
        compute: { module, entryPoint, constants: numericConstants(constants) },
      });
      (p as unknown as { __key: string }).__key = key;
      this.pipelines.set(key, p);
    }
    return p;
  }

  /** The pipelines this device compiled (shader:entryPoint|constants): each costs a CPU adapter LLVM time. */
  compiledPipelines(): string[] {
    return [...this.pipelines.keys()];
  }

  private ensureEncoder(): GPUCommandEncoder {
    return (this.encoder ??= this.device.createCommandEncoder({ label: 'tabfleet-step' }));
  }

  private endPass(): void {
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
  }

  dispatch(d: Dispatch): void {
    if (this.lostReason !== null) throw new GpuDeviceLostError(`GPU device lost (${this.lostReason})`);
    const expected = storageBindingCount(d.shader);
    if (d.buffers.length !== expected) throw new GpuKernelError(`${d.shader}: expects ${expected} storage buffers, got ${d.buffers.length}`);
    const pipeline = this.pipeline(d.shader, d.entryPoint ?? 'main', d.constants);
    const uniformBytes = d.uniforms instanceof ArrayBuffer ? new Uint8Array(d.uniforms) : new Uint8Array(d.uniforms.buffer, d.uniforms.byteOffset, d.uniforms.byteLength);
    if (uniformBytes.byteLength > UNIFORM_SLOT) throw new Error(`${d.shader}: uniforms exceed ${UNIFORM_SLOT} bytes`);
    if ((this.arenaUsed + 1) * UNIFORM_SLOT > this.arenaMirror.byteLength) this.growArena();
    const slot = this.arenaUsed++;
    this.arenaMirror.set(uniformBytes, slot * UNIFORM_SLOT);
    const bindGroup = this.bindGroup(pipeline, slot, Math.max(16, Math.ceil(uniformBytes.byteLength / 16) * 16), d.buffers);
    if (this.profiler) {
      if (this.profiler.full) this.flush();
      this.endPass();
      this.pass = this.ensureEncoder().beginComputePass({ label: d.shader, timestampWrites: this.profiler.nextPass(d.entryPoint ? `${d.shader}:${d.entryPoint}` : d.shader) });
    }
    if (!this.pass) this.pass = this.ensureEncoder().beginComputePass({ label: 'tabfleet-compute' });
    this.pass.setPipeline(pipeline);
    this.pass.setBindGroup(0, bindGroup);
    const [x, y = 1, z = 1] = d.workgroups;
    if (x > 0 && y > 0 && z > 0) this.pass.dispatchWorkgroups(x, y, z);
    if (this.profiler) this.endPass();
    this.pendingDispatches++;
    this.counters.dispatches++;
    this.recentKernels.add(d.shader);
  }

  private growArena(): void {
    // Submit what uses the current arena, then switch to a bigger one (bind groups name the buffer).
    this.flush();
    const bigger = new Uint8Array(this.arenaMirror.byteLength * 2);
    this.arena.destroy();
    this.arenaMirror = bigger;
    this.arena = this.createArena(bigger.byteLength);
    this.bindGroups.clear();
  }

  private bindGroup(pipeline: GPUComputePipeline, slot: number, uniformSize: number, buffers: GpuStorage[]): GPUBindGroup {
    let key = `${(pipeline as unknown as { __key: string }).__key}#${slot}:${uniformSize}`;
    for (const b of buffers) key += `|${b.id}@${b.offset}+${b.size}`;
    let g = this.bindGroups.get(key);
    if (!g) {
      if (this.bindGroups.size > 20000) this.bindGroups.clear();
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.arena, offset: slot * UNIFORM_SLOT, size: uniformSize } }];
      // Bindings round up to 16 bytes (every pooled and dedicated buffer has the room) so vec4 kernels
      // can cover a tensor whose length is not a multiple of 4.
      buffers.forEach((b, i) => entries.push({ binding: i + 1, resource: { buffer: b.buffer, offset: b.offset, size: Math.min(b.buffer.size - b.offset, Math.max(16, Math.ceil(b.size / 4) * 16)) } }));
      g = this.device.createBindGroup({ label: (pipeline as unknown as { __key: string }).__key, layout: pipeline.getBindGroupLayout(0), entries });
      this.bindGroups.set(key, g);
    }
    return g;
  }

  /** Submits everything recorded so far as one command buffer. */
  flush(): void {
    this.checkHealthy();
    if (!this.encoder) return;
    this.endPass();
    if (this.arenaUsed > 0) this.device.queue.writeBuffer(this.arena, 0, this.arenaMirror.buffer, 0, this.arenaUsed * UNIFORM_SLOT);
    const afterSubmit = this.profiler?.beforeSubmit(this.encoder);
    this.device.queue.submit([this.encoder.finish()]);
    afterSubmit?.();
    this.counters.submits++;
    this.encoder = null;
    this.arenaUsed = 0;
    this.pendingDispatches = 0;
  }

  /**
   * Starts timing every dispatch (needs the adapter's 'timestamp-query' feature). Each dispatch then
   * runs in its own pass, so this is for finding the expensive kernels, not for end-to-end figures.
   */
  startProfile(): void {
    if (!this.device.features.has('timestamp-query')) throw new Error('this adapter has no timestamp-query feature');
    this.flush();
    this.profiler = new KernelProfiler(this.device);
  }

  /** Stops profiling; total GPU time per kernel, most expensive first. */
  async stopProfile(): Promise<KernelTime[]> {
    const p = this.profiler;
    if (!p) throw new Error('no profile running');
    this.flush();
    this.profiler = null;
    return p.collect();
  }

  /** Resolves when all submitted work has finished. */
  async sync(): Promise<void> {
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    this.checkHealthy();
  }
}

const bindingCounts = new Map<ShaderName, number>();

/** Storage bindings a kernel declares (all but the uniform at @binding(0)). */
function storageBindingCount(shader: ShaderName): number {
  let n = bindingCounts.get(shader);
  if (n === undefined) {
    n = new Set(SHADERS[shader].match(/@binding\((\d+)\)/g)).size - 1;
    bindingCounts.set(shader, n);
  }
  return n;
}

/** Override constants as numbers (booleans become 0/1, which WGSL's bool overrides accept). */
function numericConstants(c: Record<string, number | boolean> | undefined): Record<string, number> | undefined {
  if (!c) return undefined;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(c)) out[k] = typeof v === 'boolean' ? Number(v) : v;
  return out;
}
