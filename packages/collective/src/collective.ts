// What a Ring and a Group share: the members of one round on one transport, ops run one at a time
// in the order they were asked for, frames routed to the op they belong to (early ones buffered
// within bounds, stale and duplicate ones counted and dropped), aborts and lost peers. Subclasses
// say whom an abort goes to and whether a received abort is passed on.
import { FRAME_HEADER_BYTES, allocFrame, jobHash, realClock, type Clock, type Frame, type FrameError } from '@tabfleet/protocol';
import { CollectiveError, type CollectiveErrorCode } from './errors';
import type { RingCounters } from './ring-types';
import { FrameRouter } from './router';
import type { Transport } from './transport';

/** Frames a member may see early: ops this many ahead of the current one. */
const MAX_OPS_AHEAD = 8;

export interface CollectiveOptions {
  transport: Transport;
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
  /** What deadlines are counted on (default: the transport's clock, else realClock). */
  clock?: Clock;
}

/** An op in flight, as the collective drives it. */
export interface OpInFlight<T> {
  readonly seq: number;
  readonly promise: Promise<T>;
  begin(): void;
  receive(from: string, frame: Frame): void;
  fail(err: CollectiveError, propagate?: boolean): void;
}

export abstract class Collective {
  readonly members: readonly string[];
  readonly self: string;
  readonly rank: number;
  readonly size: number;
  readonly job: number;
  readonly round: number;
  readonly counters: RingCounters = {
    opsStarted: 0, opsCompleted: 0, opsFailed: 0, framesIn: 0, bytesIn: 0, framesOut: 0, bytesOut: 0,
    stale: 0, duplicate: 0, foreign: 0, early: 0, earlyDropped: 0, bad: 0, abortsSent: 0, abortsReceived: 0,
  };
  /** @internal */ readonly transport: Transport;
  /** @internal */ readonly chunkOverride: number | undefined;
  /** @internal */ readonly clock: Clock;
  protected readonly deadlineMs: number;
  private readonly maxEarlyBytes: number;
  private nextSeq = 0;
  private tail: Promise<unknown> = Promise.resolve();
  protected active: OpInFlight<unknown> | null = null;
  /** Seq of the op running or next to run; frames below it are stale. */
  private currentSeq = 0;
  private early = new Map<number, { from: string; frame: Frame; bytes: number }[]>();
  private earlyBytes = 0;
  private remoteAborts = new Map<number, CollectiveError>();
  private abortsSent = new Set<number>();
  private broken: CollectiveError | null = null;
  /** A connect in progress: rejected by abort() or close() (a round aborted while a peer never answers). */
  private connectWaiters = new Set<(e: CollectiveError) => void>();
  private closed = false;
  private unsubs: (() => void)[] = [];

  constructor(opts: CollectiveOptions, private readonly kind: 'ring' | 'group') {
    const { members, self } = opts;
    if (new Set(members).size !== members.length) throw new CollectiveError('bad_argument', `duplicate ${kind} members: ${members.join(', ')}`);
    const rank = members.indexOf(self);
    if (rank < 0) throw new CollectiveError('bad_argument', `${self} is not a member of the ${kind} [${members.join(', ')}]`);
    if (opts.chunkElements !== undefined && !(Number.isInteger(opts.chunkElements) && opts.chunkElements >= 1)) {
      throw new CollectiveError('bad_argument', `chunkElements must be a positive integer, got ${opts.chunkElements}`);
    }
    this.transport = opts.transport;
    this.clock = opts.clock ?? opts.transport.clock ?? realClock;
    this.members = [...members];
    this.self = self;
    this.rank = rank;
    this.size = members.length;
    this.job = jobHash(opts.jobId);
    this.round = opts.round;
    this.deadlineMs = opts.deadlineMs ?? 60_000;
    this.chunkOverride = opts.chunkElements;
    this.maxEarlyBytes = opts.maxEarlyBytes ?? 256 * 1024 * 1024;
  }

  /**
   * Starts taking frames; a subclass calls it last in its constructor, since frames parked for this
   * round are handed over at once and routing them needs `linked`.
   */
  protected listen(): void {
    this.unsubs.push(
      FrameRouter.of(this.transport).register(this.job, this.round, {
        members: this.members,
        onFrame: (from, frame, bytes) => this.onFrame(from, frame, bytes),
        onMalformed: (from, err) => this.onMalformed(from, err),
      }),
      this.transport.onPeerLost((peer, reason) => this.onPeerLost(peer, reason)),
    );
  }

  /** The members this one exchanges frames with (ring neighbours, or every other group member). */
  abstract get linked(): string[];
  /** Whether an abort received from `from` is passed on (a ring relays; in a group everyone hears it first-hand). */
  protected abstract relaysAborts(): boolean;

  /**
   * Opens the links this member needs ahead of its ops (they open them themselves otherwise), and
   * measures each: a ping whose pong comes back while the op runs (`linkRttMs`).
   */
  async connect(deadlineMs = this.deadlineMs): Promise<void> {
    await this.openLinks(deadlineMs);
    const router = FrameRouter.of(this.transport);
    for (const p of this.linked) router.ping(p);
  }

  /** @internal Opens the links this member needs (what an op does before it sends). */
  async openLinks(deadlineMs = this.deadlineMs): Promise<void> {
    const peers = this.linked;
    if (peers.length === 0) return;
    if (this.broken) throw this.broken;
    let cancel = () => {};
    let aborted: ((e: CollectiveError) => void) | undefined;
    try {
      await Promise.race([
        Promise.all(peers.map((p) => this.transport.connect(p))),
        new Promise<never>((_, reject) => {
          cancel = this.clock.after(deadlineMs, () => reject(new CollectiveError('deadline', `connecting ${this.self} to ${peers.join(', ')} took longer than ${deadlineMs} ms`)));
          this.connectWaiters.add((aborted = reject));
        }),
      ]);
    } finally {
      cancel();
      if (aborted) this.connectWaiters.delete(aborted);
    }
  }

  /** The smallest round trip measured to each linked member so far (ms; members not measured yet are absent). */
  linkRttMs(): Record<string, number> {
    const router = FrameRouter.of(this.transport);
    const out: Record<string, number> = {};
    for (const p of this.linked) {
      const ms = router.rttMs(p);
      if (ms !== undefined) out[p] = Math.round(ms * 10) / 10;
    }
    return out;
  }

  /**
   * Rejects the op in flight and every later one with 'aborted' (the server's round:abort), or with
   * `cause` (a failure elsewhere that ends this collective too: the others hear its code), and tells the others.
   */
  abort(reason = 'aborted', cause?: CollectiveError): void {
    if (this.broken) return;
    this.broken = cause ?? new CollectiveError('aborted', reason);
    for (const w of this.connectWaiters) w(this.broken);
    if (this.active) this.active.fail(this.broken);
    else this.sendAbort(this.currentSeq, this.broken, null);
  }

  /** Stops routing frames here (links stay open for the next round). In-flight ops reject with 'aborted'. */
  close(): void {
    if (this.closed) return;
    if (!this.broken) this.broken = new CollectiveError('aborted', `${this.kind} closed`);
    for (const w of this.connectWaiters) w(this.broken);
    this.active?.fail(this.broken, false);
    this.closed = true;
    for (const u of this.unsubs) u();
    this.early.clear();
  }

  /** Runs `make`'s op after every op asked for before it. */
  protected schedule<T>(deadlineMs: number | undefined, make: (seq: number, deadlineMs: number) => OpInFlight<T>): Promise<T> {
    const seq = this.nextSeq++;
    const deadline = deadlineMs ?? this.deadlineMs;
    const run = async (): Promise<T> => {
      this.currentSeq = seq;
      this.counters.opsStarted++;
      if (this.broken) throw this.broken;
      const remote = this.remoteAborts.get(seq);
      if (remote) throw remote;
      const op = make(seq, deadline);
      this.active = op as OpInFlight<unknown>;
      try {
        op.begin();
        for (const e of this.takeEarly(seq)) op.receive(e.from, e.frame);
        return await op.promise;
      } finally {
        this.active = null;
        this.currentSeq = seq + 1;
        this.remoteAborts.delete(seq);
        // Early frames of ops that can no longer run are stale.
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

  private takeEarly(seq: number): { from: string; frame: Frame; bytes: number }[] {
    const list = this.early.get(seq) ?? [];
    this.early.delete(seq);
    for (const e of list) this.earlyBytes -= e.bytes;
    return list;
  }

  private onFrame(from: string, frame: Frame, bytes: number): void {
    this.counters.framesIn++;
    this.counters.bytesIn += bytes;
    if (!this.linked.includes(from)) {
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
    if (this.linked.includes(from)) this.active?.fail(new CollectiveError('bad_frame', `malformed frame from ${from}: ${err.message}`, from));
  }

  private onAbortFrame(from: string, frame: Frame): void {
    this.counters.abortsReceived++;
    let code: CollectiveErrorCode = 'aborted';
    let message = `aborted by a ${this.kind} member`;
    let member: string | undefined;
    try {
      const j = JSON.parse(new TextDecoder().decode(frame.payload)) as { code?: string; message?: string; member?: string };
      if (j.code === 'peer_lost' || j.code === 'deadline' || j.code === 'aborted' || j.code === 'bad_frame') code = j.code;
      if (typeof j.message === 'string') message = j.message.slice(0, 500);
      if (typeof j.member === 'string') member = j.member.slice(0, 200);
    } catch {
      // An unreadable reason is still an abort.
    }
    const err = new CollectiveError(code, `${message} (abort from ${from})`, member);
    const seq = frame.op;
    // A lost member or a round abort ends the collective for good; a deadline or bad frame ends one op.
    if ((code === 'peer_lost' || code === 'aborted') && !this.broken) this.broken = err;
    if (this.active && this.active.seq === seq) {
      this.active.fail(err, false);
    } else if (seq >= (this.active ? this.active.seq + 1 : this.currentSeq) && seq < this.nextSeq + MAX_OPS_AHEAD) {
      this.remoteAborts.set(seq, err);
    } else {
      this.counters.stale++;
    }
    if (this.relaysAborts()) this.sendAbort(seq, err, from);
  }

  /** @internal Tells the linked members (but `except`) that op `seq` failed, once per op. */
  sendAbort(seq: number, err: CollectiveError, except: string | null): void {
    if (this.abortsSent.has(seq) || this.closed) return;
    this.abortsSent.add(seq);
    const payload = new TextEncoder().encode(JSON.stringify({ code: err.code, message: err.message, member: err.member }).slice(0, 4000));
    const frame = allocFrame({ kind: 'abort', dtype: 'u8', flags: 0, job: this.job, round: this.round, op: seq, step: 0, segment: 0, chunk: 0 }, payload.byteLength);
    frame.set(payload, FRAME_HEADER_BYTES);
    for (const peer of new Set(this.linked)) {
      if (peer === except || !this.transport.isConnected(peer)) continue;
      this.counters.abortsSent++;
      this.transport.send(peer, frame).catch(() => {});
    }
  }

  private onPeerLost(peer: string, reason: string): void {
    if (this.closed || !this.members.includes(peer) || this.broken) return;
    this.broken = new CollectiveError('peer_lost', `${this.kind} member ${peer} lost: ${reason}`, peer);
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
