// Group averaging by per-part owners (BTARD's butterfly, arXiv 2106.11257): every member of a round
// is linked to every other. Member i cuts its vector into N parts and sends part j to member j, the
// part's owner; the owner screens the N contributions to its part, combines the accepted ones with
// the job's robust rule (protocol's robust.ts) and sends the result to everyone. Each member sends
// 2(N−1)/N·S bytes, as in ring allreduce, in 2 hops instead of 2(N−1). Nobody forwards anybody
// else's data: a member can spoil only its own contribution (screened, then bounded by the rule) or,
// as an owner, its part's aggregate, which the digests every member reports expose (GroupDigests).
//
// This file is the Group: links, op order, frame routing, aborts and lost peers, as the Ring does
// for a ring. The algorithm is ops/group-average.ts.
//
// Failure semantics are the ring's: an op rejects with a CollectiveError on deadline, lost member,
// abort or bad frame and never touches the caller's arrays. A member that fails an op sends an abort
// frame to every other member.
import { FRAME_HEADER_BYTES, LIMITS, allocFrame, jobHash, type Aggregation, type Frame, type FrameError } from '@tabfleet/protocol';
import { CollectiveError, type CollectiveErrorCode } from './errors';
import { GroupAverageRun, type GroupAverage } from './ops/group-average';
import { FrameRouter } from './router';
import type { WireDType } from './ring-types';
import type { Transport } from './transport';

export type { GroupAverage, GroupDigests } from './ops/group-average';

/** Members of one group: all-to-all links cost N−1 data channels per tab. */
export const MAX_GROUP_SIZE = LIMITS.maxGroupSize;
/** Frames a member may see early: ops this many ahead of the current one. */
const MAX_OPS_AHEAD = 8;
const MAX_EARLY_BYTES = 256 * 1024 * 1024;

export interface GroupOptions {
  transport: Transport;
  /** Member ids; a part's owner is the member at its index. Every member passes the same list. */
  members: readonly string[];
  self: string;
  jobId: string | number;
  round: number;
  /** Default deadline of each op, ms, counted from when it starts. Default 60 s. */
  deadlineMs?: number;
  /** Elements per frame (tests use small chunks); default and maximum: as many as fit in 64 KiB. */
  chunkElements?: number;
}

export interface GroupAverageOptions {
  rule: Aggregation;
  /** Wire precision (default f32); contributions and aggregates are rounded to it before they leave. */
  dtype?: WireDType;
  /** For `trimmed-mean`. */
  trimFraction?: number;
  /** Parts go as their nonzero (index, value) pairs (DGC payloads); default: as dense values. */
  sparse?: boolean;
  deadlineMs?: number;
}

export interface GroupCounters {
  opsStarted: number;
  opsCompleted: number;
  opsFailed: number;
  framesIn: number;
  bytesIn: number;
  framesOut: number;
  bytesOut: number;
  stale: number;
  duplicate: number;
  /** Frames from a peer that is not a member. */
  foreign: number;
  early: number;
  earlyDropped: number;
  bad: number;
  abortsSent: number;
  abortsReceived: number;
}

export class Group {
  readonly members: readonly string[];
  readonly self: string;
  readonly rank: number;
  readonly size: number;
  readonly job: number;
  readonly round: number;
  readonly counters: GroupCounters = {
    opsStarted: 0, opsCompleted: 0, opsFailed: 0, framesIn: 0, bytesIn: 0, framesOut: 0, bytesOut: 0,
    stale: 0, duplicate: 0, foreign: 0, early: 0, earlyDropped: 0, bad: 0, abortsSent: 0, abortsReceived: 0,
  };
  /** @internal */ readonly transport: Transport;
  /** @internal */ readonly chunkOverride: number | undefined;
  private readonly deadlineMs: number;
  private nextSeq = 0;
  private tail: Promise<unknown> = Promise.resolve();
  private active: GroupAverageRun | null = null;
  private currentSeq = 0;
  private early = new Map<number, { from: string; frame: Frame; bytes: number }[]>();
  private earlyBytes = 0;
  private remoteAborts = new Map<number, CollectiveError>();
  private abortsSent = new Set<number>();
  private broken: CollectiveError | null = null;
  private closed = false;
  private unsubs: (() => void)[] = [];

  constructor(opts: GroupOptions) {
    const { members, self } = opts;
    if (new Set(members).size !== members.length) throw new CollectiveError('bad_argument', `duplicate group members: ${members.join(', ')}`);
    if (members.length > MAX_GROUP_SIZE) throw new CollectiveError('bad_argument', `a group has at most ${MAX_GROUP_SIZE} members, got ${members.length}`);
    const rank = members.indexOf(self);
    if (rank < 0) throw new CollectiveError('bad_argument', `${self} is not a member of the group [${members.join(', ')}]`);
    if (opts.chunkElements !== undefined && !(Number.isInteger(opts.chunkElements) && opts.chunkElements >= 1)) {
      throw new CollectiveError('bad_argument', `chunkElements must be a positive integer, got ${opts.chunkElements}`);
    }
    this.transport = opts.transport;
    this.members = [...members];
    this.self = self;
    this.rank = rank;
    this.size = members.length;
    this.job = jobHash(opts.jobId);
    this.round = opts.round;
    this.deadlineMs = opts.deadlineMs ?? 60_000;
    this.chunkOverride = opts.chunkElements;
    this.unsubs.push(
      FrameRouter.of(this.transport).register(this.job, this.round, {
        members: this.members,
        onFrame: (from, frame, bytes) => this.onFrame(from, frame, bytes),
        onMalformed: (from, err) => this.onMalformed(from, err),
      }),
      this.transport.onPeerLost((peer, reason) => this.onPeerLost(peer, reason)),
    );
  }

  /** The other members. */
  get peers(): string[] {
    return this.members.filter((m) => m !== this.self);
  }

  /** Opens the links to every other member (ops do this themselves; call it to connect ahead of time). */
  async connect(deadlineMs = this.deadlineMs): Promise<void> {
    if (this.size === 1) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        Promise.all(this.peers.map((p) => this.transport.connect(p))),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new CollectiveError('deadline', `connecting ${this.self} to its group took longer than ${deadlineMs} ms`)), deadlineMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Every member's `data` combined part by part with `opts.rule`; all members pass the same length
   * and get the same bytes. Also says which contributions to this member's part it refused, and the
   * digests the server cross-checks.
   */
  average(data: Float32Array, opts: GroupAverageOptions): Promise<GroupAverage> {
    const dtype = opts.dtype ?? 'f32';
    if (dtype !== 'f32' && dtype !== 'f16') throw new CollectiveError('bad_argument', `wire dtype must be f32 or f16, got ${String(dtype)}`);
    const seq = this.nextSeq++;
    const deadline = opts.deadlineMs ?? this.deadlineMs;
    const run = async (): Promise<GroupAverage> => {
      this.currentSeq = seq;
      this.counters.opsStarted++;
      if (this.broken) throw this.broken;
      const remote = this.remoteAborts.get(seq);
      if (remote) throw remote;
      const op = new GroupAverageRun(this, seq, deadline, data, { ...opts, dtype, sparse: opts.sparse ?? false });
      this.active = op;
      try {
        op.begin();
        for (const e of this.takeEarly(seq)) op.receive(e.from, e.frame);
        return await op.promise;
      } finally {
        this.active = null;
        this.currentSeq = seq + 1;
        this.remoteAborts.delete(seq);
        for (const s of [...this.early.keys()]) if (s <= seq) this.counters.stale += this.takeEarly(s).length;
      }
    };
    const p = this.tail.then(run, run);
    this.tail = p.then(
      () => this.counters.opsCompleted++,
      () => this.counters.opsFailed++,
    );
    return p;
  }

  /** Rejects the op in flight and every later one with 'aborted' (the server's round:abort), and tells the others. */
  abort(reason = 'aborted'): void {
    if (this.broken) return;
    this.broken = new CollectiveError('aborted', reason);
    if (this.active) this.active.fail(this.broken);
    else this.sendAbort(this.currentSeq, this.broken);
  }

  /** Stops routing frames to this group (links stay open for the next round). In-flight ops reject with 'aborted'. */
  close(): void {
    if (this.closed) return;
    if (!this.broken) this.broken = new CollectiveError('aborted', 'group closed');
    this.active?.fail(this.broken, false);
    this.closed = true;
    for (const u of this.unsubs) u();
    this.early.clear();
  }

  private takeEarly(seq: number): { from: string; frame: Frame; bytes: number }[] {
    const list = this.early.get(seq) ?? [];
    this.early.delete(seq);
    for (const e of list) this.earlyBytes -= e.bytes;
    return list;
  }

  private onFrame(from: string, frame: Frame, bytes: number): void {
    this.counters.framesIn++;
    this.counters.bytesIn += bytes;
    if (!this.members.includes(from) || from === this.self) {
      this.counters.foreign++;
      return;
    }
    if (frame.kind === 'abort') return this.onAbortFrame(from, frame);
    const active = this.active;
    if (active && frame.op === active.seq) return active.receive(from, frame);
    const floor = active ? active.seq + 1 : this.currentSeq;
    if (frame.op < floor || this.closed) {
      this.counters.stale++;
      return;
    }
    if (frame.op >= floor + MAX_OPS_AHEAD || this.earlyBytes + bytes > MAX_EARLY_BYTES || this.broken) {
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
    this.active?.fail(new CollectiveError('bad_frame', `malformed frame from ${from}: ${err.message}`, from));
  }

  private onAbortFrame(from: string, frame: Frame): void {
    this.counters.abortsReceived++;
    let code: CollectiveErrorCode = 'aborted';
    let message = 'aborted by a group member';
    let member: string | undefined;
    try {
      const j = JSON.parse(new TextDecoder().decode(frame.payload)) as { code?: string; message?: string; member?: string };
      if (j.code === 'peer_lost' || j.code === 'deadline' || j.code === 'aborted' || j.code === 'bad_frame') code = j.code;
      if (typeof j.message === 'string') message = j.message.slice(0, 500);
      if (typeof j.member === 'string') member = j.member.slice(0, 200);
    } catch {
      // An unreadable reason is still an abort.
    }
    // Every member hears every abort first-hand (no relaying), so nothing is forwarded.
    const err = new CollectiveError(code, `${message} (abort from ${from})`, member);
    if ((code === 'peer_lost' || code === 'aborted') && !this.broken) this.broken = err;
    if (this.active && this.active.seq === frame.op) this.active.fail(err, false);
    else if (frame.op >= (this.active ? this.active.seq + 1 : this.currentSeq) && frame.op < this.nextSeq + MAX_OPS_AHEAD) this.remoteAborts.set(frame.op, err);
    else this.counters.stale++;
  }

  /** @internal Tells every connected member that op `seq` failed here (once per op). */
  sendAbort(seq: number, err: CollectiveError): void {
    if (this.abortsSent.has(seq) || this.closed) return;
    this.abortsSent.add(seq);
    const payload = new TextEncoder().encode(JSON.stringify({ code: err.code, message: err.message, member: err.member }).slice(0, 4000));
    const frame = allocFrame({ kind: 'abort', dtype: 'u8', flags: 0, job: this.job, round: this.round, op: seq, step: 0, segment: 0, chunk: 0 }, payload.byteLength);
    frame.set(payload, FRAME_HEADER_BYTES);
    for (const peer of this.peers) {
      if (!this.transport.isConnected(peer)) continue;
      this.counters.abortsSent++;
      this.transport.send(peer, frame).catch(() => {});
    }
  }

  private onPeerLost(peer: string, reason: string): void {
    if (this.closed || !this.members.includes(peer) || this.broken) return;
    this.broken = new CollectiveError('peer_lost', `group member ${peer} lost: ${reason}`, peer);
    if (this.active) this.active.fail(this.broken);
    else this.sendAbort(this.currentSeq, this.broken);
  }

  /** @internal */ sent(bytes: number): void {
    this.counters.framesOut++;
    this.counters.bytesOut += bytes;
  }
}
