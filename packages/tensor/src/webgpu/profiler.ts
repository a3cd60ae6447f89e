// Per-kernel GPU time from timestamp queries. While profiling, every dispatch gets its own compute
// pass with begin/end timestamps (so timings include per-pass overhead and should be read as
// relative costs); results accumulate per kernel name until the profile is collected.

const MAP_READ = 0x1, COPY_SRC = 0x4, COPY_DST = 0x8, QUERY_RESOLVE = 0x200;
const MAX_QUERIES = 4096;

export interface KernelTime {
  kernel: string;
  count: number;
  ms: number;
}

export class KernelProfiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolve: GPUBuffer;
  private labels: string[] = [];
  private readonly pending: Promise<void>[] = [];
  private readonly totals = new Map<string, { count: number; ns: number }>();

  constructor(private readonly device: GPUDevice) {
    this.querySet = device.createQuerySet({ type: 'timestamp', count: MAX_QUERIES });
    this.resolve = device.createBuffer({ size: MAX_QUERIES * 8, usage: QUERY_RESOLVE | COPY_SRC });
  }

  get full(): boolean {
    return this.labels.length * 2 >= MAX_QUERIES;
  }

  /** Timestamp writes for the pass of the next dispatch, labelled `kernel`. */
  nextPass(kernel: string): GPUComputePassTimestampWrites {
    const i = this.labels.length;
    this.labels.push(kernel);
    return { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** Called with the encoder about to be submitted; reads its timestamps back after submission. */
  beforeSubmit(encoder: GPUCommandEncoder): () => void {
    const labels = this.labels;
    this.labels = [];
    if (labels.length === 0) return () => {};
    const bytes = labels.length * 16;
    const readback = this.device.createBuffer({ size: bytes, usage: MAP_READ | COPY_DST });
    encoder.resolveQuerySet(this.querySet, 0, labels.length * 2, this.resolve, 0);
    encoder.copyBufferToBuffer(this.resolve, 0, readback, 0, bytes);
    return () => {
      this.pending.push(readback.mapAsync(MAP_READ).then(() => {
        const t = new BigInt64Array(readback.getMappedRange().slice(0));
        labels.forEach((k, i) => {
          const e = this.totals.get(k) ?? { count: 0, ns: 0 };
          e.count++;
          e.ns += Math.max(0, Number(t[2 * i + 1] - t[2 * i]));
          this.totals.set(k, e);
        });
        readback.destroy();
      }));
    };
  }

  async collect(): Promise<KernelTime[]> {
    await Promise.all(this.pending);
    return [...this.totals].map(([kernel, v]) => ({ kernel, count: v.count, ms: v.ns / 1e6 })).sort((a, b) => b.ms - a.ms);
  }
}
