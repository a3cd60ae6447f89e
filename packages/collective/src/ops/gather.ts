// Gathers around the ring: each member's (variable-length) contribution is forwarded N−1 hops;
// dense allgather and broadcast return the parts, sparse allgather sums the members' lists locally.
import { FLAG_LAST, FRAME_DTYPE_BYTES, FRAME_HEADER_BYTES, MAX_FRAME_PAYLOAD, allocFrame, decodeF16, encodeF16, maxChunkElements, type Frame, type FrameDTypeName,
  type FrameKindName } from '@tabfleet/protocol';
import { CollectiveError } from '../errors';
import type { Ring } from '../ring';
import type { ReduceOp, WireDType } from '../ring-types';
import { decodeSparseChunk, encodeSparseChunks, maxSparsePairs } from '../sparse-codec';
import { OpRun, f32View, u16View } from './op-run';
export abstract class GatherRun<T> extends OpRun<T> {
  /** Segment expected at each step this member receives. */
  protected expect = new Map<number, number>();
  /** Per segment: chunks so far, index of the last chunk once known, count and bytes received. */
  protected segs = new Map<number, { chunks: Uint8Array[]; last: number; got: number; bytes: number }>();
  protected abstract readonly dtype: FrameDTypeName;
  /** Step of the last hop: frames received at this step are not forwarded. */
  protected abstract readonly lastStep: number;

  /** Splits `bytes` into frame payloads of whole elements and queues them as step 0 of `segment`. */
  protected sendOwn(segment: number, payloads: Uint8Array[]): void {
    payloads.forEach((p, c) => this.enqueue(() => {
      const f = allocFrame(this.header(0, segment, c, this.dtype, c === payloads.length - 1), p.byteLength);
      f.set(p, FRAME_HEADER_BYTES);
      return f;
    }));
  }

  protected onData(from: string, f: Frame): void {
    const seg = this.expect.get(f.step);
    if (seg === undefined) return this.bad(from, `unexpected step ${f.step}`);
    if (f.segment !== seg) return this.bad(from, `segment ${f.segment} at step ${f.step}, expected ${seg}`);
    if (f.dtype !== this.dtype) return this.bad(from, `dtype ${f.dtype}, expected ${this.dtype}`);
    let s = this.segs.get(seg);
    if (!s) this.segs.set(seg, (s = { chunks: [], last: -1, got: 0, bytes: 0 }));
    const maxChunks = Math.ceil(this.ring.maxSegmentBytes / MAX_FRAME_PAYLOAD);
    if (f.chunk >= maxChunks || (s.last >= 0 && f.chunk > s.last)) return this.bad(from, `chunk ${f.chunk} out of range`);
    if (s.chunks[f.chunk]) return this.duplicate();
    if (f.flags & FLAG_LAST) {
      if (s.last >= 0 || s.chunks.length > f.chunk + 1) return this.bad(from, `a second last chunk (${f.chunk}) in segment ${seg}`);
      s.last = f.chunk;
    }
    s.chunks[f.chunk] = f.payload;
    s.got++;
    s.bytes += f.payload.byteLength;
    if (s.bytes > this.ring.maxSegmentBytes) return this.bad(from, `segment ${seg} exceeds ${this.ring.maxSegmentBytes} bytes`);
    if (f.step < this.lastStep) {
      const { step, chunk, flags, payload } = f;
      this.enqueue(() => {
        const out = allocFrame(this.header(step + 1, seg, chunk, this.dtype, (flags & FLAG_LAST) !== 0), payload.byteLength);
        out.set(payload, FRAME_HEADER_BYTES);
        return out;
      });
    }
  }

  protected received(): boolean {
    for (const seg of this.expect.values()) {
      const s = this.segs.get(seg);
      if (!s || s.last < 0 || s.got !== s.last + 1) return false;
    }
    return true;
  }

  /** The payloads of a complete segment, in chunk order. */
  protected payloads(seg: number): Uint8Array[] {
    return this.segs.get(seg)!.chunks;
  }
}

/** Cuts a byte view into payloads of at most `per` elements of `elemBytes` (one empty payload for no data). */

export function split(bytes: Uint8Array, elemBytes: number, perChunk: number): Uint8Array[] {
  const step = perChunk * elemBytes;
  const out: Uint8Array[] = [];
  for (let at = 0; at < bytes.byteLength; at += step) out.push(bytes.subarray(at, Math.min(at + step, bytes.byteLength)));
  if (out.length === 0) out.push(new Uint8Array(0));
  return out;
}

function bytesOf(a: Float32Array | Uint16Array | Uint32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** Dense values on the wire: f32 bytes, or f16 (own copy rounded the same way). */
function wireValues(data: Float32Array, dtype: WireDType): { wire: Uint8Array; local: Float32Array } {
  if (dtype === 'f32') return { wire: bytesOf(Float32Array.from(data)), local: Float32Array.from(data) };
  const h = new Uint16Array(data.length);
  encodeF16(data, 0, data.length, h);
  const local = new Float32Array(data.length);
  decodeF16(h, local);
  return { wire: bytesOf(h), local };
}

function denseFrom(payloads: Uint8Array[], dtype: WireDType): Float32Array {
  const per = FRAME_DTYPE_BYTES[dtype];
  const total = payloads.reduce((a, p) => a + p.byteLength, 0) / per;
  const out = new Float32Array(total);
  let at = 0;
  for (const p of payloads) {
    if (dtype === 'f32') out.set(f32View(p), at);
    else decodeF16(u16View(p), out, at);
    at += p.byteLength / per;
  }
  return out;
}

/** allgather (every member's vector at every member) and broadcast (root's vector along the ring). */

export class DenseGatherRun extends GatherRun<Float32Array[]> {
  protected readonly kind: FrameKindName;
  protected readonly dtype: WireDType;
  protected readonly lastStep: number;
  private local: Float32Array | null = null;

  constructor(ring: Ring, seq: number, deadline: number, kind: 'allgather' | 'broadcast', dtype: WireDType, private readonly data: Float32Array | null, private readonly root: string | null) {
    super(ring, seq, deadline);
    this.kind = kind;
    this.dtype = dtype;
    this.lastStep = ring.size - 2;
  }

  protected start(): void {
    const { size: n, rank: r } = this.ring;
    const per = Math.min(this.ring.chunkOverride ?? Infinity, maxChunkElements(this.dtype));
    if (this.kind === 'allgather') {
      for (let g = 0; g <= n - 2; g++) this.expect.set(g, (((r - g - 1) % n) + n) % n);
      const { wire, local } = wireValues(this.data!, this.dtype);
      this.local = local;
      if (n > 1) this.sendOwn(r, split(wire, FRAME_DTYPE_BYTES[this.dtype], per));
    } else {
      const k = this.ring.members.indexOf(this.root!);
      const d = (((r - k) % n) + n) % n; // hops from the root
      if (d === 0) {
        const { wire, local } = wireValues(this.data!, this.dtype);
        this.local = local;
        if (n > 1) this.sendOwn(k, split(wire, FRAME_DTYPE_BYTES[this.dtype], per));
      } else {
        this.expect.set(d - 1, k);
      }
    }
  }

  protected result(): Float32Array[] {
    if (this.kind === 'broadcast') return [this.local ?? denseFrom(this.payloads(this.ring.members.indexOf(this.root!)), this.dtype)];
    return this.ring.members.map((_, i) => (i === this.ring.rank ? this.local! : denseFrom(this.payloads(i), this.dtype)));
  }
}


export class SparseGatherRun extends GatherRun<Float32Array> {
  protected readonly kind = 'sparseAllgather' as const;
  protected readonly dtype: 'idx_f32' | 'idx_f16';
  protected readonly lastStep: number;
  /** This member's pairs sorted by index, values already as they go on the wire. */
  constructor(ring: Ring, seq: number, deadline: number, private readonly valueType: WireDType, private readonly ownIdx: Uint32Array, private readonly ownVal: Float32Array,
    private readonly length: number, private readonly op: ReduceOp) {
    super(ring, seq, deadline);
    this.dtype = valueType === 'f32' ? 'idx_f32' : 'idx_f16';
    this.lastStep = ring.size - 2;
  }

  protected start(): void {
    const { size: n, rank: r } = this.ring;
    for (let g = 0; g <= n - 2; g++) this.expect.set(g, (((r - g - 1) % n) + n) % n);
    const vb = this.valueType === 'f32' ? 4 : 2;
    if (n === 1) return;
    const per = Math.min(this.ring.chunkOverride ?? Infinity, maxSparsePairs(MAX_FRAME_PAYLOAD, vb));
    this.sendOwn(r, encodeSparseChunks(this.ownIdx, this.ownVal, vb, per));
  }

  protected result(): Float32Array {
    const out = new Float32Array(this.length);
    const vb = this.valueType === 'f32' ? 4 : 2;
    // Sum in ring order, whatever the arrival order, so every member adds the same floats in the same order.
    for (let m = 0; m < this.ring.size; m++) {
      if (m === this.ring.rank) {
        for (let i = 0; i < this.ownIdx.length; i++) out[this.ownIdx[i]] += this.ownVal[i];
        continue;
      }
      for (const p of this.payloads(m)) {
        let pairs: { indices: Uint32Array; values: Float32Array };
        try {
          pairs = decodeSparseChunk(p, vb, this.length);
        } catch (e) {
          throw new CollectiveError('bad_frame', `from ${this.ring.members[m]}: ${(e as Error).message}`, this.ring.members[m]);
        }
        for (let i = 0; i < pairs.indices.length; i++) out[pairs.indices[i]] += pairs.values[i];
      }
    }
    if (this.op === 'mean') for (let i = 0; i < out.length; i++) out[i] /= this.ring.size;
    return out;
  }
}

