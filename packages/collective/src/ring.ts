// Collectives over a ring of members, each linked to its left and right neighbour by a Transport.
//
// allreduce (bandwidth-optimal): the vector is cut into N segments; N−1 reduce-scatter steps then
// N−1 allgather steps, each segment cut into ≤ 64 KiB frames that are forwarded as soon as they
// arrive (pipelined), so each member sends 2(N−1)/N·S bytes. Global step g: member r sends segment
// (r−g) mod N while g ≤ N−2 (reduce-scatter), then (r+1−(g−N+1)) mod N (allgather); what arrives
// at step g is processed and goes out as step g+1. The owner of a fully reduced segment finalizes
// it (mean, fp16 rounding) before it goes round, so every member ends with identical bytes.
//
// allgather / sparse allgather / broadcast forward each member's (variable-length) contribution
// around the ring; the last chunk of a segment carries FLAG_LAST.
//
// Failure semantics: an op rejects with a CollectiveError on deadline, lost member, abort or bad
// frame; it never touches the caller's arrays, so nothing partial is applied. A member that fails an
// op sends an abort frame both ways round the ring (each member forwards it once), so members far
// from the failure reject promptly too. Frames of other rounds/ops and duplicates are counted and
// dropped, never added.
import {
  FLAG_LAST, FRAME_DTYPE_BYTES, FRAME_HEADER_BYTES, MAX_FRAME_PAYLOAD, allocFrame, jobHash, maxChunkElements,
  type Frame, type FrameDTypeName, type FrameError, type FrameKindName,
} from '@tabfleet/protocol';
import { CollectiveError, type CollectiveErrorCode } from './errors';
import { addF16, decodeF16, encodeF16, roundToF16 } from './fp16';
import { FrameRouter } from './router';
import { decodeSparseChunk, encodeSparseChunks, maxSparsePairs, sortedPairs } from './sparse-codec';
import type { Transport } from './transport';

export type ReduceOp = 'sum' | 'mean';
export type WireDType = 'f32' | 'f16';

export interface RingOptions {
  transport: Transport;
  /** Member ids in ring order; self's right neighbour is the next one (wrapping). */
  members: readonly string[];
  self: string;
  /** Job id (strings are hashed to the frame's u32 job field). */
  jobId: string | number;
  round: number;
  /** Default deadline of each op, ms, counted from when it starts (after the op before it). Default 60 s. */
  deadlineMs?: number;
  /** Elements per frame (tests use small chunks); default and maximum: as many as fit in 64 KiB. */
  chunkElements?: number;
  /** Bound on frames buffered for ops this member has not started yet (default 256 MiB). */
  maxEarlyBytes?: number;
  /** Bound on one member's contribution to allgather/broadcast/sparse (default 1 GiB). */
  maxSegmentBytes?: number;
}

export interface OpOptions {
  deadlineMs?: number;
}
export interface AllreduceOptions extends OpOptions {
  op?: ReduceOp;
  /** Wire precision (default f32). f16 halves the bytes; the sum is still accumulated in f32. */
  dtype?: WireDType;
}
export interface AllgatherOptions extends OpOptions {
  dtype?: WireDType;
}
export interface SparseAllgatherOptions extends OpOptions {
  /** Length of the dense vector the indices point into. */
  length: number;
  op?: ReduceOp;
  /** Wire precision of the values (indices are always u32). */
  dtype?: WireDType;
}

export interface RingCounters {
  opsStarted: number;
  opsCompleted: number;
  opsFailed: number;
  framesIn: number;
  bytesIn: number;
  framesOut: number;
  bytesOut: number;
  /** Frames of an op already finished or failed here. */
  stale: number;
  /** Frames already received (same op, step and chunk): dropped, not added again. */
  duplicate: number;
  /** Frames from a member that is not the expected neighbour. */
  foreign: number;
  /** Frames buffered because they arrived before this member started their op. */
  early: number;
  /** Early frames dropped over the maxEarlyBytes bound. */
  earlyDropped: number;
  /** Malformed or inconsistent frames (each fails the op it belongs to). */
  bad: number;
  abortsSent: number;
  abortsReceived: number;
}

interface Settle<T> {
  resolve: (v: T) => void;
  reject: (e: CollectiveError) => void;
}

/** Frames a member may see early: ops this many ahead of the current one. */
const MAX_OPS_AHEAD = 8;

export class Ring {
  readonly members: readonly string[];
  readonly self: string;
  readonly rank: number;
  readonly size: number;
  readonly left: string;
  readonly right: string;
  readonly job: number;
  readonly round: number;
  readonly counters: RingCounters = {
    opsStarted: 0, opsCompleted: 0, opsFailed: 0, framesIn: 0, bytesIn: 0, framesOut: 0, bytesOut: 0,
    stale: 0, duplicate: 0, foreign: 0, early: 0, earlyDropped: 0, bad: 0, abortsSent: 0, abortsReceived: 0,
  };
  /** @internal */ readonly transport: Transport;
  /** @internal */ readonly chunkOverride: number | undefined;
  /** @internal */ readonly maxSegmentBytes: number;
  private readonly deadlineMs: number;
  private readonly maxEarlyBytes: number;
  private nextSeq = 0;
  private tail: Promise<unknown> = Promise.resolve();
  private active: OpRun<unknown> | null = null;
  /** Seq of the op running or next to run; frames below it are stale. */
  private currentSeq = 0;
  private early = new Map<number, { from: string; frame: Frame; bytes: number }[]>();
  private earlyBytes = 0;
  private remoteAborts = new Map<number, CollectiveError>();
  private abortsForwarded = new Set<number>();
  private broken: CollectiveError | null = null;
  private closed = false;
  private unsubs: (() => void)[] = [];

  constructor(opts: RingOptions) {
    const { members, self } = opts;
    if (new Set(members).size !== members.length) throw new CollectiveError('bad_argument', `duplicate ring members: ${members.join(', ')}`);
    const rank = members.indexOf(self);
    if (rank < 0) throw new CollectiveError('bad_argument', `${self} is not a member of the ring [${members.join(', ')}]`);
    if (members.length > 0xffff) throw new CollectiveError('bad_argument', `at most 65535 members, got ${members.length}`);
    if (opts.chunkElements !== undefined && !(Number.isInteger(opts.chunkElements) && opts.chunkElements >= 1)) {
      throw new CollectiveError('bad_argument', `chunkElements must be a positive integer, got ${opts.chunkElements}`);
    }
    this.transport = opts.transport;
    this.members = [...members];
    this.self = self;
    this.rank = rank;
    this.size = members.length;
    this.left = members[(rank - 1 + this.size) % this.size];
    this.right = members[(rank + 1) % this.size];
    this.job = jobHash(opts.jobId);
    this.round = opts.round;
    this.deadlineMs = opts.deadlineMs ?? 60_000;
    this.chunkOverride = opts.chunkElements;
    this.maxEarlyBytes = opts.maxEarlyBytes ?? 256 * 1024 * 1024;
    this.maxSegmentBytes = opts.maxSegmentBytes ?? 1024 * 1024 * 1024;
    this.unsubs.push(
      FrameRouter.of(this.transport).register(this.job, this.round, {
        members: this.members,
        onFrame: (from, frame, bytes) => this.onFrame(from, frame, bytes),
        onMalformed: (from, err) => this.onMalformed(from, err),
      }),
      this.transport.onPeerLost((peer, reason) => this.onPeerLost(peer, reason)),
    );
  }

  /** Opens the links to both neighbours (ops do this themselves; call it to connect ahead of time). */
  async connect(deadlineMs = this.deadlineMs): Promise<void> {
    if (this.size === 1) return;
    await withDeadline(Promise.all([this.transport.connect(this.left), this.transport.connect(this.right)]), deadlineMs, `connecting ${this.self} to ${this.left} and ${this.right}`);
  }

  /** Sum (or mean) of every member's `data`, returned as a new array; `data` is never modified. All members pass the same length. */
  allreduce(data: Float32Array, opts: AllreduceOptions = {}): Promise<Float32Array> {
    const dtype = opts.dtype ?? 'f32';
    const op = opts.op ?? 'sum';
    checkDType(dtype);
    if (op !== 'sum' && op !== 'mean') throw new CollectiveError('bad_argument', `op must be sum or mean, got ${String(op)}`);
    return this.schedule(opts, (seq, deadline) => new AllreduceRun(this, seq, deadline, data, op, dtype));
  }

  /** Every member's `data` (lengths may differ), indexed like `members`. */
  allgather(data: Float32Array, opts: AllgatherOptions = {}): Promise<Float32Array[]> {
    const dtype = opts.dtype ?? 'f32';
    checkDType(dtype);
    return this.schedule(opts, (seq, deadline) => new DenseGatherRun(this, seq, deadline, 'allgather', dtype, data, null));
  }

  /** `root`'s data at every member (e.g. a late joiner fetching the model): root passes it, the others pass null. */
  broadcast(root: string, data: Float32Array | null, opts: AllgatherOptions = {}): Promise<Float32Array> {
    const dtype = opts.dtype ?? 'f32';
    checkDType(dtype);
    if (!this.members.includes(root)) throw new CollectiveError('bad_argument', `broadcast root ${root} is not a member`);
    if ((root === this.self) !== (data !== null)) throw new CollectiveError('bad_argument', 'the root passes the data, every other member passes null');
    return this.schedule(opts, (seq, deadline) => new DenseGatherRun(this, seq, deadline, 'broadcast', dtype, data, root)).then((r) => r[0]);
  }

  /**
   * Sum (or mean) of every member's sparse vector (indices into a dense vector of `length`, values),
   * as a dense Float32Array. The (index, value) lists go round the ring (N−1 steps) and every member
   * adds them up locally in ring order, so all members get identical bytes.
   */
  sparseAllgather(indices: Uint32Array, values: Float32Array, opts: SparseAllgatherOptions): Promise<Float32Array> {
    const dtype = opts.dtype ?? 'f32';
    checkDType(dtype);
    if (indices.length !== values.length) throw new CollectiveError('bad_argument', `${indices.length} indices but ${values.length} values`);
    if (!Number.isInteger(opts.length) || opts.length < 0) throw new CollectiveError('bad_argument', `length must be a non-negative integer, got ${opts.length}`);
    let own: { indices: Uint32Array; values: Float32Array };
    try {
      own = sortedPairs(indices, values);
    } catch (e) {
      throw new CollectiveError('bad_argument', (e as Error).message);
    }
    const largest = own.indices.at(-1);
    if (largest !== undefined && largest >= opts.length) throw new CollectiveError('bad_argument', `index ${largest} is outside [0, ${opts.length})`);
    // Every member adds the values as they went on the wire, its own included.
    if (dtype === 'f16') roundToF16(own.values, 0, own.values.length);
    const op = opts.op ?? 'sum';
    return this.schedule(opts, (seq, deadline) => new SparseGatherRun(this, seq, deadline, dtype, own.indices, own.values, opts.length, op));
  }

  /** Rejects the op in flight and every later one with 'aborted' (the server's round:abort), and tells the neighbours. */
  abort(reason = 'aborted'): void {
    if (this.broken) return;
    this.broken = new CollectiveError('aborted', reason);
    if (this.active) this.active.fail(this.broken);
    else this.sendAbort(this.currentSeq, this.broken, null);
  }

  /** Stops routing frames to this ring (links stay open for the next ring). In-flight ops reject with 'aborted'. */
  close(): void {
    if (this.closed) return;
    if (!this.broken) this.broken = new CollectiveError('aborted', 'ring closed');
    this.active?.fail(this.broken, false);
    this.closed = true;
    for (const u of this.unsubs) u();
    this.early.clear();
  }

  private schedule<T>(opts: OpOptions, make: (seq: number, deadlineMs: number) => OpRun<T>): Promise<T> {
    const seq = this.nextSeq++;
    const deadline = opts.deadlineMs ?? this.deadlineMs;
    const run = async (): Promise<T> => {
      this.currentSeq = seq;
      this.counters.opsStarted++;
      if (this.broken) throw this.broken;
      const remote = this.remoteAborts.get(seq);
      if (remote) throw remote;
      const op = make(seq, deadline);
      this.active = op as OpRun<unknown>;
      try {
        op.begin();
        for (const e of this.takeEarly(seq)) op.receive(e.from, e.frame);
        return await op.promise;
      } finally {
        this.active = null;
        this.currentSeq = seq + 1;
        this.remoteAborts.delete(seq);
        // Early frames of ops that can no longer run are stale.
        for (const s of [...this.early.keys()]) if (s <= seq) this.dropEarly(s);
      }
    };
    const p = this.tail.then(run, run);
    this.tail = p.then(
      () => this.counters.opsCompleted++,
      () => this.counters.opsFailed++,
    );
    return p;
  }

  private takeEarly(seq: number): { from: string; frame: Frame; bytes: number }[] {
    const list = this.early.get(seq) ?? [];
    this.early.delete(seq);
    for (const e of list) this.earlyBytes -= e.bytes;
    return list;
  }

  private dropEarly(seq: number): void {
    const list = this.takeEarly(seq);
    this.counters.stale += list.length;
  }

  private onFrame(from: string, frame: Frame, bytes: number): void {
    this.counters.framesIn++;
    this.counters.bytesIn += bytes;
    if (frame.kind === 'abort') {
      this.onAbortFrame(from, frame);
      return;
    }
    const active = this.active;
    if (active && frame.op === active.seq) {
      active.receive(from, frame);
      return;
    }
    const floor = active ? active.seq + 1 : this.currentSeq;
    if (frame.op < floor || this.closed) {
      this.counters.stale++;
      return;
    }
    if (frame.op >= floor + MAX_OPS_AHEAD || this.earlyBytes + bytes > this.maxEarlyBytes || this.broken) {
      this.counters.earlyDropped++;
      return;
    }
    let list = this.early.get(frame.op);
    if (!list) this.early.set(frame.op, (list = []));
    list.push({ from, frame, bytes });
    this.earlyBytes += bytes;
    this.counters.early++;
  }

  private onMalformed(from: string, err: FrameError): void {
    this.counters.bad++;
    if (from === this.left || from === this.right) this.active?.fail(new CollectiveError('bad_frame', `malformed frame from ${from}: ${err.message}`, from));
  }

  private onAbortFrame(from: string, frame: Frame): void {
    this.counters.abortsReceived++;
    let code: CollectiveErrorCode = 'aborted';
    let message = 'aborted by a ring member';
    let member: string | undefined;
    try {
      const j = JSON.parse(new TextDecoder().decode(frame.payload)) as { code?: string; message?: string; member?: string };
      if (j.code === 'peer_lost' || j.code === 'deadline' || j.code === 'aborted' || j.code === 'bad_frame') code = j.code;
      if (typeof j.message === 'string') message = j.message.slice(0, 500);
      if (typeof j.member === 'string') member = j.member.slice(0, 200);
    } catch {
      // An unreadable reason is still an abort.
    }
    const err = new CollectiveError(code, `${message} (abort relayed by ${from})`, member);
    const seq = frame.op;
    // A lost member or a round abort ends the ring for good; a deadline or bad frame ends one op.
    if ((code === 'peer_lost' || code === 'aborted') && !this.broken) this.broken = err;
    if (this.active && this.active.seq === seq) {
      this.active.fail(err, false);
    } else if (seq >= (this.active ? this.active.seq + 1 : this.currentSeq) && seq < this.nextSeq + MAX_OPS_AHEAD) {
      this.remoteAborts.set(seq, err);
    } else {
      this.counters.stale++;
    }
    this.sendAbort(seq, err, from);
  }

  /** Sends an abort for `seq` to the neighbours other than `except`, once per seq. */
  /** @internal */ sendAbort(seq: number, err: CollectiveError, except: string | null): void {
    if (this.abortsForwarded.has(seq) || this.closed) return;
    this.abortsForwarded.add(seq);
    const payload = new TextEncoder().encode(JSON.stringify({ code: err.code, message: err.message, member: err.member }).slice(0, 4000));
    const frame = allocFrame({ kind: 'abort', dtype: 'u8', flags: 0, job: this.job, round: this.round, op: seq, step: 0, segment: 0, chunk: 0 }, payload.byteLength);
    frame.set(payload, FRAME_HEADER_BYTES);
    for (const peer of new Set([this.left, this.right])) {
      if (peer === except || peer === this.self || !this.transport.isConnected(peer)) continue;
      this.counters.abortsSent++;
      this.transport.send(peer, frame).catch(() => {});
    }
  }

  private onPeerLost(peer: string, reason: string): void {
    if (this.closed || !this.members.includes(peer) || this.broken) return;
    this.broken = new CollectiveError('peer_lost', `ring member ${peer} lost: ${reason}`, peer);
    if (this.active) this.active.fail(this.broken);
    else this.sendAbort(this.currentSeq, this.broken, null);
  }

  /** @internal */ sent(bytes: number): void {
    this.counters.framesOut++;
    this.counters.bytesOut += bytes;
  }

  /** @internal */ isBroken(): CollectiveError | null {
    return this.broken;
  }
}

function checkDType(d: string): void {
  if (d !== 'f32' && d !== 'f16') throw new CollectiveError('bad_argument', `wire dtype must be f32 or f16, got ${d}`);
}

async function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new CollectiveError('deadline', `${what} took longer than ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A Float32Array over a payload, copying only when it is not 4-byte aligned. */
function f32View(p: Uint8Array): Float32Array {
  return p.byteOffset % 4 === 0 ? new Float32Array(p.buffer, p.byteOffset, p.byteLength / 4) : new Float32Array(p.slice().buffer);
}
function u16View(p: Uint8Array): Uint16Array {
  return p.byteOffset % 2 === 0 ? new Uint16Array(p.buffer, p.byteOffset, p.byteLength / 2) : new Uint16Array(p.slice().buffer);
}

/** One collective op in flight: its send queue towards the right neighbour, its deadline, its promise. */
abstract class OpRun<T> {
  readonly promise: Promise<T>;
  private settle!: Settle<T>;
  done = false;
  private queue: (() => Uint8Array)[] = [];
  private head = 0;
  private pumping = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  protected abstract readonly kind: FrameKindName;

  constructor(protected readonly ring: Ring, readonly seq: number, private readonly deadlineMs: number) {
    this.promise = new Promise<T>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // The caller may drop the promise after a failure; never an unhandled rejection.
    this.promise.catch(() => {});
  }

  begin(): void {
    this.timer = setTimeout(() => this.fail(new CollectiveError('deadline', `${this.kind} op ${this.seq} of round ${this.ring.round} did not finish within ${this.deadlineMs} ms at ${this.ring.self}`)), this.deadlineMs);
    if (this.ring.size > 1) {
      this.ring.connect(this.deadlineMs).then(
        () => this.pump(),
        (e: unknown) => this.fail(e instanceof CollectiveError ? e : new CollectiveError('peer_lost', String(e))),
      );
    }
    try {
      this.start();
    } catch (e) {
      this.fail(e instanceof CollectiveError ? e : new CollectiveError('bad_argument', String(e)));
    }
    this.maybeFinish();
  }

  /** Queue the first sends; finish at once when nothing needs to move. */
  protected abstract start(): void;
  /** Handle one frame of this op from `from` (already matched on job, round and op). */
  protected abstract onData(from: string, frame: Frame): void;
  /** True once everything this member must receive has arrived. */
  protected abstract received(): boolean;
  protected abstract result(): T;

  receive(from: string, frame: Frame): void {
    if (this.done) {
      this.ring.counters.stale++;
      return;
    }
    if (from !== this.ring.left) {
      this.ring.counters.foreign++;
      return;
    }
    if (frame.kind !== this.kind) return this.bad(from, `a ${frame.kind} frame in a ${this.kind} op`);
    try {
      this.onData(from, frame);
    } catch (e) {
      if (e instanceof CollectiveError) this.fail(e);
      else throw e;
    }
    this.maybeFinish();
  }

  protected bad(from: string, what: string): void {
    this.ring.counters.bad++;
    this.fail(new CollectiveError('bad_frame', `${what} (from ${from}, op ${this.seq}, round ${this.ring.round})`, from));
  }

  protected duplicate(): void {
    this.ring.counters.duplicate++;
  }

  /** Queue a frame for the right neighbour; `make` runs when the channel has room. */
  protected enqueue(make: () => Uint8Array): void {
    this.queue.push(make);
    if (!this.pumping) void this.pump();
  }

  protected header(step: number, segment: number, chunk: number, dtype: FrameDTypeName, last: boolean) {
    return { kind: this.kind, dtype, flags: last ? FLAG_LAST : 0, job: this.ring.job, round: this.ring.round, op: this.seq, step, segment, chunk };
  }

  private async pump(): Promise<void> {
    if (this.pumping || this.done || !this.ring.transport.isConnected(this.ring.right)) return;
    this.pumping = true;
    try {
      while (!this.done && this.head < this.queue.length) {
        const make = this.queue[this.head];
        this.queue[this.head++] = null!;
        const bytes = make();
        await this.ring.transport.send(this.ring.right, bytes);
        this.ring.sent(bytes.byteLength);
      }
      this.queue = [];
      this.head = 0;
    } catch (e) {
      this.fail(e instanceof CollectiveError ? e : new CollectiveError('peer_lost', `send to ${this.ring.right} failed: ${String(e)}`, this.ring.right));
    } finally {
      this.pumping = false;
    }
    this.maybeFinish();
  }

  private maybeFinish(): void {
    if (this.done || this.pumping || this.head < this.queue.length || !this.received()) return;
    let value: T;
    try {
      value = this.result();
    } catch (e) {
      this.fail(e instanceof CollectiveError ? e : new CollectiveError('bad_frame', String(e)));
      return;
    }
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.settle.resolve(value);
  }

  /** Rejects the op (once) and, with `propagate`, tells the neighbours so the whole ring gives up. */
  fail(err: CollectiveError, propagate = true): void {
    if (this.done) return;
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.queue = [];
    this.head = 0;
    if (propagate) this.ring.sendAbort(this.seq, err, null);
    this.settle.reject(err);
  }
}

class AllreduceRun extends OpRun<Float32Array> {
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
    if (f.payload.byteLength !== count * FRAME_DTYPE_BYTES[this.dtype]) return this.bad(from, `${f.payload.byteLength} payload bytes, expected ${count} ${this.dtype} values (do all members pass the same length?)`);
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

/** Shared by allgather, broadcast and sparse allgather: whole contributions forwarded round the ring. */
abstract class GatherRun<T> extends OpRun<T> {
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
function split(bytes: Uint8Array, elemBytes: number, perChunk: number): Uint8Array[] {
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
class DenseGatherRun extends GatherRun<Float32Array[]> {
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

class SparseGatherRun extends GatherRun<Float32Array> {
  protected readonly kind = 'sparseAllgather' as const;
  protected readonly dtype: 'idx_f32' | 'idx_f16';
  protected readonly lastStep: number;
  /** This member's pairs sorted by index, values already as they go on the wire. */
  constructor(ring: Ring, seq: number, deadline: number, private readonly valueType: WireDType, private readonly ownIdx: Uint32Array, private readonly ownVal: Float32Array, private readonly length: number, private readonly op: ReduceOp) {
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

