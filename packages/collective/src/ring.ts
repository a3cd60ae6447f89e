// Collectives over a ring of members, each linked to its left and right neighbour by a Transport.
// This file is the Ring: it orders ops, routes frames to the op they belong to, and handles aborts
// and lost peers. Each op's algorithm is an OpRun in ops/ (allreduce.ts, gather.ts).
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
import { FRAME_HEADER_BYTES, allocFrame, jobHash, type Frame, type FrameError } from '@tabfleet/protocol';
import { CollectiveError, type CollectiveErrorCode } from './errors';
import { roundToF16 } from './fp16';
import { AllreduceRun } from './ops/allreduce';
import { DenseGatherRun, SparseGatherRun } from './ops/gather';
import type { OpRun } from './ops/op-run';
import { FrameRouter } from './router';
import type { AllgatherOptions, AllreduceOptions, OpOptions, RingCounters, RingOptions, SparseAllgatherOptions } from './ring-types';
import { sortedPairs } from './sparse-codec';
import type { Transport } from './transport';

export * from './ring-types';

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
