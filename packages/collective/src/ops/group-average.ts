// One group averaging op (see group.ts): scatter each part to its owner, screen and combine the
// contributions to this member's own part, send that aggregate to everyone, collect the others'.
// Sends go to N−1 peers at once, each paced by its own channel's backpressure.
import { FRAME_DTYPE_BYTES, FRAME_HEADER_BYTES, aggregateWith, allocFrame, maxChunkElements, modelDigest, screenContributions, type Frame } from '@tabfleet/protocol';
import { CollectiveError } from '../errors';
import { decodeF16, encodeF16, roundToF16 } from '../fp16';
import type { Group, GroupAverageOptions } from '../group';
import type { WireDType } from '../ring-types';
import { f32View, u16View } from './op-run';

/**
 * What the server cross-checks after a round (modelDigest of the values as they went on the wire):
 * sender i's `sent[j]` must equal owner j's `received[i]`, and every member's `gathered[j]` must
 * equal owner j's `aggregate`. A mismatch names a pair, one of whom lied or broke.
 */
export interface GroupDigests {
  /** Of each part this member sent, by owner index (its own part included). */
  sent: string[];
  /** Of each contribution to this member's part, by sender index. */
  received: string[];
  /** Of the aggregate of this member's part. */
  aggregate: string;
  /** Of each part's aggregate as it arrived, by owner index. */
  gathered: string[];
}

export interface GroupAverage {
  /** The combined vector, identical bytes at every member. */
  mean: Float32Array;
  /** Contributions to this member's part that it refused (their senders are at fault). */
  refused: { member: string; reason: string }[];
  digests: GroupDigests;
}

interface PeerQueue {
  items: (() => Uint8Array)[];
  head: number;
  pumping: boolean;
}

export class GroupAverageRun {
  readonly promise: Promise<GroupAverage>;
  private settle!: { resolve: (v: GroupAverage) => void; reject: (e: CollectiveError) => void };
  private done = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly n: number;
  private readonly len: number;
  private readonly chunk: number;
  private readonly dtype: WireDType;
  /** This member's vector as it goes on the wire (rounded to f16 for an f16 wire). */
  private contribution!: Float32Array;
  /** Contributions to this member's part, by sender. */
  private parts: Float32Array[] = [];
  private partSeen: Uint8Array[] = [];
  private partsMissing = 0;
  private result!: Float32Array;
  private gatherSeen: Uint8Array[] = [];
  private gatherMissing = 0;
  private aggregated = false;
  private refused: GroupAverage['refused'] = [];
  private digests: GroupDigests = { sent: [], received: [], aggregate: '', gathered: [] };
  private queues = new Map<string, PeerQueue>();

  constructor(private readonly group: Group, readonly seq: number, private readonly deadlineMs: number, private readonly data: Float32Array, private readonly opts: GroupAverageOptions & { dtype: WireDType }) {
    this.n = group.size;
    this.len = data.length;
    this.dtype = opts.dtype;
    this.chunk = Math.min(group.chunkOverride ?? Infinity, maxChunkElements(this.dtype));
    this.promise = new Promise<GroupAverage>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.promise.catch(() => {});
  }

  private partStart(j: number): number {
    return Math.floor((j * this.len) / this.n);
  }
  private partLength(j: number): number {
    return this.partStart(j + 1) - this.partStart(j);
  }
  private partChunks(j: number): number {
    return Math.ceil(this.partLength(j) / this.chunk);
  }

  begin(): void {
    this.timer = setTimeout(() => this.fail(new CollectiveError('deadline', `group average ${this.seq} of round ${this.group.round} did not finish within ${this.deadlineMs} ms at ${this.group.self}`)), this.deadlineMs);
    const { rank } = this.group;
    this.contribution = Float32Array.from(this.data);
    if (this.dtype === 'f16') roundToF16(this.contribution, 0, this.len);
    this.result = new Float32Array(this.len);
    for (let j = 0; j < this.n; j++) {
      const part = this.contribution.subarray(this.partStart(j), this.partStart(j + 1));
      this.digests.sent.push(modelDigest(part));
      this.parts.push(j === rank ? part.slice() : new Float32Array(this.partLength(rank)));
      this.partSeen.push(new Uint8Array(j === rank ? 0 : this.partChunks(rank)));
      this.gatherSeen.push(new Uint8Array(j === rank ? 0 : this.partChunks(j)));
      if (j !== rank) {
        this.partsMissing += this.partChunks(rank);
        this.gatherMissing += this.partChunks(j);
      }
    }
    for (const peer of this.group.peers) this.queues.set(peer, { items: [], head: 0, pumping: false });
    this.group.members.forEach((peer, j) => {
      if (j === rank) return;
      for (let c = 0; c < this.partChunks(j); c++) this.enqueue(peer, () => this.frame('groupScatter', j, c, this.contribution));
    });
    if (this.n > 1) {
      this.group.connect(this.deadlineMs).then(
        () => this.group.peers.forEach((p) => void this.pump(p)),
        (e: unknown) => this.fail(e instanceof CollectiveError ? e : new CollectiveError('peer_lost', String(e))),
      );
    }
    this.maybeAggregate();
    this.maybeFinish();
  }

  /** A frame of part `j`'s chunk `c`, values from `source` at the part's place. */
  private frame(kind: 'groupScatter' | 'groupGather', j: number, c: number, source: Float32Array): Uint8Array {
    const from = this.partStart(j) + c * this.chunk;
    const count = Math.min(this.chunk, this.partStart(j + 1) - from);
    const header = { kind, dtype: this.dtype, flags: c === this.partChunks(j) - 1 ? 1 : 0, job: this.group.job, round: this.group.round, op: this.seq, step: kind === 'groupScatter' ? 0 : 1, segment: j, chunk: c };
    const frame = allocFrame(header, count * FRAME_DTYPE_BYTES[this.dtype]);
    if (this.dtype === 'f32') new Float32Array(frame.buffer, FRAME_HEADER_BYTES, count).set(source.subarray(from, from + count));
    else encodeF16(source, from, count, new Uint16Array(frame.buffer, FRAME_HEADER_BYTES, count));
    return frame;
  }

  receive(from: string, f: Frame): void {
    if (this.done) {
      this.group.counters.stale++;
      return;
    }
    const sender = this.group.members.indexOf(from);
    const { rank } = this.group;
    // A scatter frame carries a piece of this member's part; a gather frame a piece of the sender's.
    const scatter = f.kind === 'groupScatter';
    if (!scatter && f.kind !== 'groupGather') return this.bad(from, `a ${f.kind} frame in a group average`);
    const part = scatter ? rank : sender;
    if (f.segment !== part) return this.bad(from, `${f.kind} frame for part ${f.segment}, expected ${part}`);
    if (f.dtype !== this.dtype) return this.bad(from, `dtype ${f.dtype}, expected ${this.dtype}`);
    const seen = scatter ? this.partSeen[sender] : this.gatherSeen[sender];
    if (f.chunk >= seen.length) return this.bad(from, `chunk ${f.chunk} of a ${seen.length}-chunk part`);
    const offset = f.chunk * this.chunk;
    const count = Math.min(this.chunk, this.partLength(part) - offset);
    if (f.payload.byteLength !== count * FRAME_DTYPE_BYTES[this.dtype]) return this.bad(from, `${f.payload.byteLength} payload bytes, expected ${count} ${this.dtype} values (do all members pass the same length?)`);
    if (seen[f.chunk]) {
      this.group.counters.duplicate++;
      return;
    }
    seen[f.chunk] = 1;
    const target = scatter ? this.parts[sender] : this.result;
    const at = scatter ? offset : this.partStart(part) + offset;
    if (this.dtype === 'f32') target.set(f32View(f.payload), at);
    else decodeF16(u16View(f.payload), target, at);
    if (scatter) this.partsMissing--;
    else this.gatherMissing--;
    this.maybeAggregate();
    this.maybeFinish();
  }

  /** Once every contribution to this member's part is in: screen, combine, send the aggregate to all. */
  private maybeAggregate(): void {
    if (this.aggregated || this.partsMissing > 0 || this.done) return;
    this.aggregated = true;
    const { rank, members } = this.group;
    this.digests.received = this.parts.map((p) => modelDigest(p));
    const screening = screenContributions(this.parts, this.partLength(rank));
    this.refused = screening.refused.map((r) => ({ member: members[r.index], reason: r.reason }));
    if (screening.accepted.length === 0) {
      this.fail(new CollectiveError('bad_frame', `every contribution to part ${rank} was refused: ${this.refused.map((r) => `${r.member}: ${r.reason}`).join('; ')}`));
      return;
    }
    const aggregate = this.partLength(rank) === 0 ? new Float32Array(0) : aggregateWith(this.opts.rule, screening.accepted.map((i) => this.parts[i]), { trimFraction: this.opts.trimFraction });
    if (this.dtype === 'f16') roundToF16(aggregate, 0, aggregate.length);
    this.result.set(aggregate, this.partStart(rank));
    this.digests.aggregate = modelDigest(aggregate);
    this.parts = []; // the contributions are no longer needed
    for (const peer of this.group.peers) {
      for (let c = 0; c < this.partChunks(rank); c++) this.enqueue(peer, () => this.frame('groupGather', rank, c, this.result));
    }
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
    this.maybeFinish();
  }

  private maybeFinish(): void {
    if (this.done || !this.aggregated || this.gatherMissing > 0) return;
    for (const q of this.queues.values()) if (q.pumping || q.head < q.items.length) return;
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    for (let j = 0; j < this.n; j++) this.digests.gathered.push(modelDigest(this.result.subarray(this.partStart(j), this.partStart(j + 1))));
    this.settle.resolve({ mean: this.result, refused: this.refused, digests: this.digests });
  }

  private bad(from: string, what: string): void {
    this.group.counters.bad++;
    this.fail(new CollectiveError('bad_frame', `${what} (from ${from}, op ${this.seq}, round ${this.group.round})`, from));
  }

  /** Rejects the op (once) and, with `propagate`, tells every member so the whole group gives up. */
  fail(err: CollectiveError, propagate = true): void {
    if (this.done) return;
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    for (const q of this.queues.values()) {
      q.items = [];
      q.head = 0;
    }
    if (propagate) this.group.sendAbort(this.seq, err);
    this.settle.reject(err);
  }
}
