// One group averaging op (see group.ts): scatter each part to its owner, screen and combine the
// contributions to this member's own part, send that aggregate to everyone, collect the others'.
// Sends go to N−1 peers at once, each paced by its own channel's backpressure.
//
// Dense parts go as f32 or f16 values. Sparse ones (DGC payloads) go as the part's nonzero (index,
// value) pairs, indices relative to the part (collective's sparse codec): the owner reads an index a
// member did not send as that member's zero, combines the dense part, and sends back its nonzeros.
import {
  FLAG_LAST,
  FRAME_DTYPE_BYTES,
  FRAME_HEADER_BYTES,
  MAX_FRAME_PAYLOAD,
  aggregateWith,
  allocFrame,
  maxChunkElements,
  modelDigest,
  screenContributions,
  type Frame,
  type FrameDTypeName,
} from '@tabfleet/protocol';
import { CollectiveError } from '../errors';
import { decodeF16, encodeF16, roundToF16 } from '../fp16';
import type { Group, GroupAverageOptions } from '../group';
import type { WireDType } from '../ring-types';
import { decodeSparseChunk, encodeSparseChunks, maxSparsePairs } from '../sparse-codec';
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

/** Chunks of one part arriving from one peer: how many there are is known up front (dense) or from FLAG_LAST (sparse). */
interface Incoming {
  seen: Set<number>;
  total: number | null;
}

export class GroupAverageRun {
  readonly promise: Promise<GroupAverage>;
  private settle!: { resolve: (v: GroupAverage) => void; reject: (e: CollectiveError) => void };
  private done = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly n: number;
  private readonly len: number;
  private readonly dtype: WireDType;
  private readonly frameDType: FrameDTypeName;
  private readonly sparse: boolean;
  /** Values per dense frame, or pairs per sparse frame. */
  private readonly chunk: number;
  /** This member's vector as it goes on the wire (rounded to f16 for an f16 wire). */
  private contribution!: Float32Array;
  /** Contributions to this member's part, by sender. */
  private parts: Float32Array[] = [];
  private scatterIn: Incoming[] = [];
  private result!: Float32Array;
  private gatherIn: Incoming[] = [];
  private aggregated = false;
  private refused: GroupAverage['refused'] = [];
  private digests: GroupDigests = { sent: [], received: [], aggregate: '', gathered: [] };
  private queues = new Map<string, PeerQueue>();

  constructor(private readonly group: Group, readonly seq: number, private readonly deadlineMs: number, private readonly data: Float32Array, private readonly opts: GroupAverageOptions & { dtype: WireDType; sparse: boolean }) {
    this.n = group.size;
    this.len = data.length;
    this.dtype = opts.dtype;
    this.sparse = opts.sparse;
    this.frameDType = this.sparse ? (this.dtype === 'f32' ? 'idx_f32' : 'idx_f16') : this.dtype;
    this.chunk = Math.min(group.chunkOverride ?? Infinity, this.sparse ? maxSparsePairs(MAX_FRAME_PAYLOAD, this.valueBytes) : maxChunkElements(this.dtype));
    this.promise = new Promise<GroupAverage>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.promise.catch(() => {});
  }

  private get valueBytes(): 2 | 4 {
    return this.dtype === 'f32' ? 4 : 2;
  }
  private partStart(j: number): number {
    return Math.floor((j * this.len) / this.n);
  }
  private partLength(j: number): number {
    return this.partStart(j + 1) - this.partStart(j);
  }
  private part(values: Float32Array, j: number): Float32Array {
    return values.subarray(this.partStart(j), this.partStart(j + 1));
  }
  private denseChunks(j: number): number {
    return Math.ceil(this.partLength(j) / this.chunk);
  }
  private incoming(j: number): Incoming {
    return { seen: new Set(), total: this.sparse ? null : this.denseChunks(j) };
  }

  begin(): void {
    this.timer = setTimeout(() => this.fail(new CollectiveError('deadline', `group average ${this.seq} of round ${this.group.round} did not finish within ${this.deadlineMs} ms at ${this.group.self}`)), this.deadlineMs);
    const { rank } = this.group;
    this.contribution = Float32Array.from(this.data);
    if (this.dtype === 'f16') roundToF16(this.contribution, 0, this.len);
    this.result = new Float32Array(this.len);
    for (let j = 0; j < this.n; j++) {
      this.digests.sent.push(modelDigest(this.part(this.contribution, j)));
      this.parts.push(j === rank ? this.part(this.contribution, j).slice() : new Float32Array(this.partLength(rank)));
      this.scatterIn.push(j === rank ? { seen: new Set(), total: 0 } : this.incoming(rank));
      this.gatherIn.push(j === rank ? { seen: new Set(), total: 0 } : this.incoming(j));
    }
    for (const peer of this.group.peers) this.queues.set(peer, { items: [], head: 0, pumping: false });
    this.group.members.forEach((peer, j) => {
      if (j !== rank) this.sendPart([peer], 'groupScatter', j, this.contribution);
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

  /** Queues part `j` of `source` (a whole-length vector) for each of `peers`, chunk by chunk (a sparse part is encoded once for all). */
  private sendPart(peers: string[], kind: 'groupScatter' | 'groupGather', j: number, source: Float32Array): void {
    const header = (c: number, last: boolean) => ({ kind, dtype: this.frameDType, flags: last ? FLAG_LAST : 0, job: this.group.job, round: this.group.round, op: this.seq, step: kind === 'groupScatter' ? 0 : 1, segment: j, chunk: c });
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
    if (f.dtype !== this.frameDType) return this.bad(from, `dtype ${f.dtype}, expected ${this.frameDType}`);
    const incoming = scatter ? this.scatterIn[sender] : this.gatherIn[sender];
    const last = (f.flags & FLAG_LAST) !== 0;
    // A sparse part has at most one chunk per value (one when empty).
    const bound = incoming.total ?? Math.max(1, this.partLength(part));
    if (f.chunk >= bound) return this.bad(from, `chunk ${f.chunk} of a part of at most ${bound} chunks`);
    if (incoming.seen.has(f.chunk)) {
      this.group.counters.duplicate++;
      return;
    }
    if (this.sparse && last && (incoming.total !== null || [...incoming.seen].some((c) => c > f.chunk))) return this.bad(from, `a second or early last chunk (${f.chunk})`);
    const target = scatter ? this.parts[sender] : this.part(this.result, part);
    try {
      if (this.sparse) this.writeSparse(f.payload, target);
      else this.writeDense(f, target, part);
    } catch (e) {
      return this.bad(from, (e as Error).message);
    }
    incoming.seen.add(f.chunk);
    if (this.sparse && last) incoming.total = f.chunk + 1;
    this.maybeAggregate();
    this.maybeFinish();
  }

  private writeDense(f: Frame, target: Float32Array, part: number): void {
    const offset = f.chunk * this.chunk;
    const count = Math.min(this.chunk, this.partLength(part) - offset);
    if (f.payload.byteLength !== count * FRAME_DTYPE_BYTES[this.dtype]) throw new Error(`${f.payload.byteLength} payload bytes, expected ${count} ${this.dtype} values (do all members pass the same length?)`);
    if (this.dtype === 'f32') target.set(f32View(f.payload), offset);
    else decodeF16(u16View(f.payload), target, offset);
  }

  private writeSparse(payload: Uint8Array, target: Float32Array): void {
    const { indices, values } = decodeSparseChunk(payload, this.valueBytes, target.length);
    for (let i = 0; i < indices.length; i++) target[indices[i]] = values[i];
  }

  private static complete(x: Incoming): boolean {
    return x.total !== null && x.seen.size === x.total;
  }

  /** Once every contribution to this member's part is in: screen, combine, send the aggregate to all. */
  private maybeAggregate(): void {
    if (this.aggregated || this.done || !this.scatterIn.every(GroupAverageRun.complete)) return;
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
    this.sendPart(this.group.peers, 'groupGather', rank, this.result);
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
    if (this.done || !this.aggregated || !this.gatherIn.every(GroupAverageRun.complete)) return;
    for (const q of this.queues.values()) if (q.pumping || q.head < q.items.length) return;
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    for (let j = 0; j < this.n; j++) this.digests.gathered.push(modelDigest(this.part(this.result, j)));
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
    if (propagate) this.group.sendAbort(this.seq, err, null);
    this.settle.reject(err);
  }
}
