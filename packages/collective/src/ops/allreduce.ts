// Bandwidth-optimal ring allreduce (see ring.ts): N−1 pipelined reduce-scatter steps, then N−1
// allgather steps; the owner of a reduced segment finalizes it so every member ends with the same bytes.
import { FRAME_DTYPE_BYTES, FRAME_HEADER_BYTES, addF16, allocFrame, decodeF16, encodeF16, maxChunkElements, roundToF16, type Frame } from '@tabfleet/protocol';
import type { Ring } from '../ring';
import type { ReduceOp, WireDType } from '../ring-types';
import { OpRun, f32View, u16View } from './op-run';
export class AllreduceRun extends OpRun<Float32Array> {
  protected readonly kind = 'allreduce' as const;
  private readonly n: number;
  private readonly len: number;
  private readonly chunk: number;
  private acc!: Float32Array;
  /** seen[step][chunk]: the frame already arrived. */
  private seen: Uint8Array[] = [];
  private remaining = 0;

  constructor(ring: Ring, seq: number, deadline: number, private readonly data: Float32Array, private readonly op: ReduceOp, private readonly dtype: WireDType) {
    super(ring, seq, deadline);
    this.n = ring.size;
    this.len = data.length;
    this.chunk = Math.min(ring.chunkOverride ?? Infinity, maxChunkElements(dtype));
  }

  private segStart(i: number): number {
    return Math.floor((i * this.len) / this.n);
  }
  private segChunks(i: number): number {
    return Math.ceil((this.segStart(i + 1) - this.segStart(i)) / this.chunk);
  }
  private sendSeg(g: number): number {
    const { n } = this;
    const r = this.ring.rank;
    return g <= n - 2 ? (((r - g) % n) + n) % n : (((r + 1 - (g - n + 1)) % n) + n) % n;
  }
  private recvSeg(g: number): number {
    return this.sendSeg(g + 1);
  }

  protected start(): void {
    this.acc = Float32Array.from(this.data);
    if (this.n === 1 || this.len === 0) {
      if (this.op === 'mean') for (let i = 0; i < this.acc.length; i++) this.acc[i] /= this.n;
      return;
    }
    const steps = 2 * this.n - 2;
    for (let g = 0; g < steps; g++) {
      const c = this.segChunks(this.recvSeg(g));
      this.seen.push(new Uint8Array(c));
      this.remaining += c;
    }
    const s0 = this.sendSeg(0);
    for (let c = 0; c < this.segChunks(s0); c++) this.enqueueChunk(0, c);
  }

  private enqueueChunk(g: number, c: number): void {
    this.enqueue(() => {
      const seg = this.sendSeg(g);
      const from = this.segStart(seg) + c * this.chunk;
      const count = Math.min(this.chunk, this.segStart(seg + 1) - from);
      const last = c === this.segChunks(seg) - 1;
      const frame = allocFrame(this.header(g, seg, c, this.dtype, last), count * FRAME_DTYPE_BYTES[this.dtype]);
      if (this.dtype === 'f32') new Float32Array(frame.buffer, FRAME_HEADER_BYTES, count).set(this.acc.subarray(from, from + count));
      else encodeF16(this.acc, from, count, new Uint16Array(frame.buffer, FRAME_HEADER_BYTES, count));
      return frame;
    });
  }

  protected onData(from: string, f: Frame): void {
    const { n } = this;
    const g = f.step;
    if (g > 2 * n - 3) return this.bad(from, `step ${g} beyond ${2 * n - 3}`);
    const seg = this.recvSeg(g);
    if (f.segment !== seg) return this.bad(from, `segment ${f.segment} at step ${g}, expected ${seg}`);
    if (f.dtype !== this.dtype) return this.bad(from, `dtype ${f.dtype}, expected ${this.dtype}`);
    const seen = this.seen[g];
    if (f.chunk >= seen.length) return this.bad(from, `chunk ${f.chunk} of a ${seen.length}-chunk segment`);
    const at = this.segStart(seg) + f.chunk * this.chunk;
    const count = Math.min(this.chunk, this.segStart(seg + 1) - at);
    if (f.payload.byteLength !== count * FRAME_DTYPE_BYTES[this.dtype]) return this.bad(from,
      `${f.payload.byteLength} payload bytes, expected ${count} ${this.dtype} values (do all members pass the same length?)`);
    if (seen[f.chunk]) return this.duplicate();
    seen[f.chunk] = 1;
    this.remaining--;
    const acc = this.acc;
    if (g <= n - 2) {
      if (this.dtype === 'f32') {
        const v = f32View(f.payload);
        for (let i = 0; i < count; i++) acc[at + i] += v[i];
      } else {
        addF16(u16View(f.payload), acc, at);
      }
      if (g === n - 2) {
        // This member owns the fully reduced chunk: finalize it once, then it goes round unchanged.
        if (this.op === 'mean') for (let i = at; i < at + count; i++) acc[i] /= n;
        if (this.dtype === 'f16') roundToF16(acc, at, count);
      }
    } else if (this.dtype === 'f32') {
      acc.set(f32View(f.payload), at);
    } else {
      decodeF16(u16View(f.payload), acc, at);
    }
    if (g < 2 * n - 3) this.enqueueChunk(g + 1, f.chunk);
  }

  protected received(): boolean {
    return this.acc !== undefined && this.remaining === 0;
  }

  protected result(): Float32Array {
    return this.acc;
  }
}

