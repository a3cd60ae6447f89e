// What a group op (group.ts) does with parts: cut a whole-length vector into the group's N parts,
// send a part to some members chunk by chunk (dense f32/f16 values, a sparse part's nonzero pairs, or
// a contribution's block-quantized bytes), take a part in from a member and know when all of it is
// in. Sends go to N−1 peers at once, each paced by its own channel's backpressure. The averaging and
// the validation ops build on this.
import {
  decodeQuantized,
  encodeQuantized,
  FLAG_LAST,
  FRAME_DTYPE_BYTES,
  FRAME_HEADER_BYTES,
  MAX_FRAME_PAYLOAD,
  allocFrame,
  decodeF16,
  encodeF16,
  maxChunkElements,
  partRange,
  QUANT_BLOCK,
  quantizedBytes,
  QuantizeError,
  type Frame,
  type FrameDTypeName,
  type QuantFormat,
} from '@tabfleet/protocol';
import { CollectiveError } from '../errors';
import type { Group } from '../group';
import type { WireDType } from '../ring-types';
import { decodeSparseChunk, encodeSparseChunks, maxSparsePairs } from '../sparse-codec';
import { f32View, u16View } from './op-run';

export type PartFrameKind = 'groupScatter' | 'groupGather' | 'groupValidate';

interface PeerQueue {
  items: (() => Uint8Array)[];
  head: number;
  pumping: boolean;
}

/** Chunks of one part arriving from one peer: how many there are is known up front (dense, quantized) or from FLAG_LAST (sparse). */
export interface Incoming {
  seen: Set<number>;
  total: number | null;
  /** A quantized contribution's bytes as they arrive (decoded once all are in). */
  bytes: Uint8Array | null;
}

/** How parts travel: the same at every member of the op. */
export interface PartWire {
  /** Of dense parts, and of aggregates whatever the contributions' wire. */
  dtype: WireDType;
  sparse: boolean;
  /**
   * Contributions (scatter, validation) go block-quantized in this format, parts cut along its blocks;
   * aggregates go dense at `dtype`. Absent: contributions go as aggregates do.
   */
  quantized?: QuantFormat;
}

/** Contributions: what members send owners and validators (the rest are aggregates). */
const isContribution = (kind: Frame['kind']) => kind === 'groupScatter' || kind === 'groupValidate';

export abstract class GroupPartsRun<T> {
  readonly promise: Promise<T>;
  private settle!: { resolve: (v: T) => void; reject: (e: CollectiveError) => void };
  protected done = false;
  private cancelDeadline: (() => void) | null = null;
  protected readonly n: number;
  protected readonly len: number;
  protected readonly dtype: WireDType;
  protected readonly frameDType: FrameDTypeName;
  protected readonly sparse: boolean;
  protected readonly quantized: QuantFormat | null;
  /** Values per dense frame, or pairs per sparse frame. */
  private readonly chunk: number;
  /** Bytes per frame of a quantized contribution. */
  private readonly quantizedChunk: number;
  private readonly quantizedDType: 'q8' | 'q4';
  /** Parts of this member's contribution already encoded (by part index): sent as they are, not encoded again. */
  protected readonly encodedParts = new Map<number, Uint8Array>();
  private queues = new Map<string, PeerQueue>();
  protected abstract readonly name: string;

  constructor(protected readonly group: Group, readonly seq: number, private readonly deadlineMs: number, length: number, wire: PartWire) {
    this.n = group.size;
    this.len = length;
    this.dtype = wire.dtype;
    this.sparse = wire.sparse;
    this.quantized = wire.quantized ?? null;
    if (this.quantized && this.sparse) throw new CollectiveError('bad_argument', 'a group\'s contributions go sparse or quantized, not both');
    this.frameDType = this.sparse ? (this.dtype === 'f32' ? 'idx_f32' : 'idx_f16') : this.dtype;
    this.chunk = Math.min(group.chunkOverride ?? Infinity, this.sparse ? maxSparsePairs(MAX_FRAME_PAYLOAD, this.valueBytes) : maxChunkElements(this.dtype));
    this.quantizedDType = this.quantized === 'e2m1' ? 'q4' : 'q8';
    this.quantizedChunk = Math.min(group.chunkOverride ?? Infinity, maxChunkElements(this.quantizedDType));
    this.promise = new Promise<T>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // The caller may drop the promise after a failure; never an unhandled rejection.
    this.promise.catch(() => {});
  }

  private get valueBytes(): 2 | 4 {
    return this.dtype === 'f32' ? 4 : 2;
  }
  protected partStart(j: number): number {
    return partRange(this.len, this.n, j, this.quantized ? QUANT_BLOCK : 1).start;
  }
  protected partLength(j: number): number {
    return this.partStart(j + 1) - this.partStart(j);
  }
  protected part(values: Float32Array, j: number): Float32Array {
    return values.subarray(this.partStart(j), this.partStart(j + 1));
  }
  private denseChunks(j: number): number {
    return Math.ceil(this.partLength(j) / this.chunk);
  }
  private quantizedChunks(j: number): number {
    return Math.ceil(quantizedBytes(this.partLength(j), this.quantized!) / this.quantizedChunk);
  }
  /** Tracking for part `j` coming from one peer in frames of `kind` (`none`: nothing comes, e.g. from oneself). */
  protected incoming(j: number, kind: PartFrameKind, none = false): Incoming {
    if (none) return { seen: new Set(), total: 0, bytes: null };
    if (this.quantized && isContribution(kind)) return { seen: new Set(), total: this.quantizedChunks(j), bytes: new Uint8Array(quantizedBytes(this.partLength(j), this.quantized)) };
    return { seen: new Set(), total: this.sparse ? null : this.denseChunks(j), bytes: null };
  }
  protected static complete(x: Incoming): boolean {
    return x.total !== null && x.seen.size === x.total;
  }

  begin(): void {
    const late = `group ${this.name} ${this.seq} of round ${this.group.round} did not finish within ${this.deadlineMs} ms at ${this.group.self}`;
    this.cancelDeadline = this.group.clock.after(this.deadlineMs, () => this.fail(new CollectiveError('deadline', late)));
    for (const peer of this.group.peers) this.queues.set(peer, { items: [], head: 0, pumping: false });
    this.start();
    if (this.n > 1) {
      this.group.openLinks(this.deadlineMs).then(
        () => this.group.peers.forEach((p) => void this.pump(p)),
        (e: unknown) => this.fail(e instanceof CollectiveError ? e : new CollectiveError('peer_lost', String(e))),
      );
    }
    this.progress();
  }

  /** Queue the first sends. */
  protected abstract start(): void;
  /** Handle one frame of this op from the member at index `sender` (already matched on job, round and op). */
  protected abstract onFrame(from: string, sender: number, f: Frame): void;
  /** Act on what has arrived (aggregate, finish). */
  protected abstract progress(): void;

  receive(from: string, f: Frame): void {
    if (this.done) {
      this.group.counters.stale++;
      return;
    }
    this.onFrame(from, this.group.members.indexOf(from), f);
    this.progress();
  }

  /** Queues part `j` of `source` (a whole-length vector) for each of `peers`, chunk by chunk (a sparse part is encoded once for all). */
  protected sendPart(peers: string[], kind: PartFrameKind, j: number, source: Float32Array, step = 0): void {
    const header = (c: number, last: boolean) => ({ kind, dtype: this.frameDType, flags: last ? FLAG_LAST : 0, job: this.group.job, round: this.group.round, op: this.seq, step,
      segment: j, chunk: c });
    if (this.quantized && isContribution(kind)) {
      // The same values give the same bytes (a decoded contribution re-encodes to itself).
      const bytes = this.encodedParts.get(j) ?? encodeQuantized(this.part(source, j), this.quantized);
      const chunks = this.quantizedChunks(j);
      for (const peer of peers) for (let c = 0; c < chunks; c++) {
        this.enqueue(peer, () => {
          const piece = bytes.subarray(c * this.quantizedChunk, (c + 1) * this.quantizedChunk);
          const frame = allocFrame({ ...header(c, c === chunks - 1), dtype: this.quantizedDType }, piece.byteLength);
          frame.set(piece, FRAME_HEADER_BYTES);
          return frame;
        });
      }
      return;
    }
    if (this.sparse) {
      const payloads = this.sparseChunks(this.part(source, j));
      for (const peer of peers) {
        payloads.forEach((p, c) => this.enqueue(peer, () => {
          const frame = allocFrame(header(c, c === payloads.length - 1), p.byteLength);
          frame.set(p, FRAME_HEADER_BYTES);
          return frame;
        }));
      }
      return;
    }
    const chunks = this.denseChunks(j);
    for (const peer of peers) for (let c = 0; c < chunks; c++) {
      this.enqueue(peer, () => {
        const from = this.partStart(j) + c * this.chunk;
        const count = Math.min(this.chunk, this.partStart(j + 1) - from);
        const frame = allocFrame(header(c, c === chunks - 1), count * FRAME_DTYPE_BYTES[this.dtype]);
        if (this.dtype === 'f32') new Float32Array(frame.buffer, FRAME_HEADER_BYTES, count).set(source.subarray(from, from + count));
        else encodeF16(source, from, count, new Uint16Array(frame.buffer, FRAME_HEADER_BYTES, count));
        return frame;
      });
    }
  }

  /** The nonzero entries of a part as sparse chunks (indices relative to the part). */
  private sparseChunks(part: Float32Array): Uint8Array[] {
    let nonzero = 0;
    for (let i = 0; i < part.length; i++) if (part[i] !== 0) nonzero++;
    const indices = new Uint32Array(nonzero);
    const values = new Float32Array(nonzero);
    for (let i = 0, k = 0; i < part.length; i++) {
      if (part[i] === 0) continue;
      indices[k] = i;
      values[k++] = part[i];
    }
    return encodeSparseChunks(indices, values, this.valueBytes, this.chunk);
  }

  /**
   * Writes a chunk of part `j` from `from` into `target` (the part's values) and marks it seen.
   * False when the frame was a duplicate or bad (the op has then failed).
   */
  protected acceptChunk(from: string, f: Frame, j: number, incoming: Incoming, target: Float32Array): boolean {
    if (incoming.bytes) return this.acceptQuantized(from, f, j, incoming, target);
    if (f.dtype !== this.frameDType) return this.bad(from, `dtype ${f.dtype}, expected ${this.frameDType}`);
    const last = (f.flags & FLAG_LAST) !== 0;
    // A sparse part has at most one chunk per value (one when empty).
    const bound = incoming.total ?? Math.max(1, this.partLength(j));
    if (f.chunk >= bound) return this.bad(from, `chunk ${f.chunk} of a part of at most ${bound} chunks`);
    if (incoming.seen.has(f.chunk)) {
      this.group.counters.duplicate++;
      return false;
    }
    if (this.sparse && last && (incoming.total !== null || [...incoming.seen].some((c) => c > f.chunk))) return this.bad(from, `a second or early last chunk (${f.chunk})`);
    try {
      if (this.sparse) this.writeSparse(f.payload, target);
      else this.writeDense(f, target, j);
    } catch (e) {
      return this.bad(from, (e as Error).message);
    }
    incoming.seen.add(f.chunk);
    if (this.sparse && last) incoming.total = f.chunk + 1;
    return true;
  }

  /** A chunk of a quantized contribution: its bytes in place; once all are in, decoded (strictly) into `target`. */
  private acceptQuantized(from: string, f: Frame, j: number, incoming: Incoming, target: Float32Array): boolean {
    const bytes = incoming.bytes!;
    if (f.dtype !== this.quantizedDType) return this.bad(from, `dtype ${f.dtype}, expected ${this.quantizedDType}`);
    if (f.chunk >= incoming.total!) return this.bad(from, `chunk ${f.chunk} of a part of ${incoming.total} chunks`);
    if (incoming.seen.has(f.chunk)) {
      this.group.counters.duplicate++;
      return false;
    }
    const at = f.chunk * this.quantizedChunk;
    const expected = Math.min(this.quantizedChunk, bytes.byteLength - at);
    if (f.payload.byteLength !== expected) return this.bad(from, `${f.payload.byteLength} payload bytes, expected ${expected} of part ${j}'s ${this.quantized} encoding`);
    bytes.set(f.payload, at);
    incoming.seen.add(f.chunk);
    if (incoming.seen.size < incoming.total!) return true;
    try {
      decodeQuantized(bytes, this.partLength(j), this.quantized!, QUANT_BLOCK, target);
    } catch (e) {
      if (!(e instanceof QuantizeError)) throw e;
      return this.bad(from, `part ${j}: ${e.message}`);
    }
    return true;
  }

  private writeDense(f: Frame, target: Float32Array, j: number): void {
    const offset = f.chunk * this.chunk;
    const count = Math.min(this.chunk, this.partLength(j) - offset);
    if (f.payload.byteLength !== count * FRAME_DTYPE_BYTES[this.dtype]) throw new Error(`${f.payload.byteLength} payload bytes, expected ${count} ${this.dtype} ` +
      `values (do all members pass the same length?)`);
    if (this.dtype === 'f32') target.set(f32View(f.payload), offset);
    else decodeF16(u16View(f.payload), target, offset);
  }

  private writeSparse(payload: Uint8Array, target: Float32Array): void {
    const { indices, values } = decodeSparseChunk(payload, this.valueBytes, target.length);
    for (let i = 0; i < indices.length; i++) target[indices[i]] = values[i];
  }

  private enqueue(peer: string, make: () => Uint8Array): void {
    const q = this.queues.get(peer)!;
    q.items.push(make);
    if (!q.pumping) void this.pump(peer);
  }

  private async pump(peer: string): Promise<void> {
    const q = this.queues.get(peer)!;
    if (q.pumping || this.done || !this.group.transport.isConnected(peer)) return;
    q.pumping = true;
    try {
      while (!this.done && q.head < q.items.length) {
        const make = q.items[q.head];
        q.items[q.head++] = null!;
        const bytes = make();
        await this.group.transport.send(peer, bytes);
        this.group.sent(bytes.byteLength);
      }
      q.items = [];
      q.head = 0;
    } catch (e) {
      this.fail(e instanceof CollectiveError ? e : new CollectiveError('peer_lost', `send to ${peer} failed: ${String(e)}`, peer));
    } finally {
      q.pumping = false;
    }
    this.progress();
  }

  /** Whether everything queued has gone out. */
  protected sendsDrained(): boolean {
    for (const q of this.queues.values()) if (q.pumping || q.head < q.items.length) return false;
    return true;
  }

  /** Resolves the op (once). */
  protected finish(value: T): void {
    if (this.done) return;
    this.done = true;
    this.cancelDeadline?.();
    this.settle.resolve(value);
  }

  /** Fails the op on a frame from `from`; returns false for `acceptChunk`'s convenience. */
  protected bad(from: string, what: string): false {
    this.group.counters.bad++;
    this.fail(new CollectiveError('bad_frame', `${what} (from ${from}, op ${this.seq}, round ${this.group.round})`, from));
    return false;
  }

  /** Rejects the op (once) and, with `propagate`, tells every member so the whole group gives up. */
  fail(err: CollectiveError, propagate = true): void {
    if (this.done) return;
    this.done = true;
    this.cancelDeadline?.();
    for (const q of this.queues.values()) {
      q.items = [];
      q.head = 0;
    }
    if (propagate) this.group.sendAbort(this.seq, err, null);
    this.settle.reject(err);
  }
}
