// One per transport: decodes incoming frames and hands them to the Ring of their (job, round). Frames
// of a round whose Ring does not exist yet (a neighbour started it first) are parked, within bounds,
// until that Ring registers; frames of rounds already closed are stale and counted.
// It also measures round trips to peers: a ping is answered by a pong straight away, and the smallest
// round trip seen to a peer is kept (larger ones waited behind other frames on the channel, so the smallest
// is the closest to the link's own latency). Moshpit jobs group members by these (the server's
// peer-distances.ts). Times are the transport's clock's (a FakeClock under a test's memory network).
// Model frames (a joiner's model from a member: model-share.ts) go to their listener, not to a ring.
import { FrameError, decodeFrame, encodeFrame, realClock, type Clock, type Frame } from '@tabfleet/protocol';
import type { Transport } from './transport';

export interface RouterCounters {
  /** Frames that failed to decode (counted here and reported to rings that have the sender as a member). */
  malformed: number;
  /** Frames of a (job, round) that was closed here. */
  stale: number;
  /** Frames parked for a ring not yet created. */
  parked: number;
  /** Parked frames dropped because the parking bound or age was exceeded. */
  parkedDropped: number;
}

export interface RouteTarget {
  readonly members: readonly string[];
  onFrame(from: string, frame: Frame, bytes: number): void;
  onMalformed(from: string, err: FrameError): void;
}

interface Parked {
  from: string;
  frame: Frame;
  bytes: number;
  at: number;
}

const MAX_PARKED_BYTES = 256 * 1024 * 1024;
const MAX_PARKED_MS = 60_000;
const MAX_CLOSED_KEYS = 1024;
/** Pings whose pong has not come back are forgotten beyond this many (a peer that never answers). */
const MAX_PINGS_OUT = 64;
const EMPTY = new Uint8Array(0);

export class FrameRouter {
  readonly counters: RouterCounters = { malformed: 0, stale: 0, parked: 0, parkedDropped: 0 };
  private targets = new Map<string, RouteTarget>();
  private parked = new Map<string, Parked[]>();
  private parkedBytes = 0;
  private closed = new Set<string>();
  private unsubscribe: () => void;

  private static routers = new WeakMap<Transport, FrameRouter>();

  /** The router of a transport, created on first use. */
  static of(transport: Transport): FrameRouter {
    let r = FrameRouter.routers.get(transport);
    if (!r) {
      r = new FrameRouter(transport);
      FrameRouter.routers.set(transport, r);
    }
    return r;
  }

  /** The smallest round trip measured to each peer, ms. */
  private readonly rtt = new Map<string, number>();
  /** Pings out: nonce → to whom and when. */
  private readonly pingsOut = new Map<number, { peer: string; at: number }>();
  private nextNonce = 1;

  private readonly clock: Clock;
  private readonly modelListeners = new Set<(from: string, frame: Frame) => void>();

  private constructor(private readonly transport: Transport) {
    this.clock = transport.clock ?? realClock;
    this.unsubscribe = transport.onFrame((from, bytes) => this.route(from, bytes));
  }

  /** Sends a round-trip probe to `peer` (linked); its pong updates `rttMs(peer)`. A failed send is no measurement. */
  ping(peer: string): void {
    const nonce = this.nextNonce++ >>> 0;
    this.pingsOut.set(nonce, { peer, at: this.clock.now() });
    if (this.pingsOut.size > MAX_PINGS_OUT) this.pingsOut.delete(this.pingsOut.keys().next().value!);
    this.transport.send(peer, probe('ping', nonce)).catch(() => this.pingsOut.delete(nonce));
  }

  /** The smallest round trip measured to `peer` (ms), or undefined before a pong came back. */
  rttMs(peer: string): number | undefined {
    return this.rtt.get(peer);
  }

  private answerProbe(from: string, frame: Frame): void {
    if (frame.kind === 'ping') {
      // Answered from a fresh task, not inside the channel's message callback: a send from within it
      // (Node, @roamhq/wrtc) kept the channel's close event from ever firing when that peer left.
      this.clock.after(0, () => void this.transport.send(from, probe('pong', frame.chunk)).catch(() => {}));
      return;
    }
    const out = this.pingsOut.get(frame.chunk);
    // A pong for a nonce not sent to this peer (or already answered) measures nothing.
    if (!out || out.peer !== from) return;
    this.pingsOut.delete(frame.chunk);
    // Never negative (the server refuses a negative one), whatever clock a test gives.
    const ms = Math.max(0, this.clock.now() - out.at);
    this.rtt.set(from, Math.min(ms, this.rtt.get(from) ?? Infinity));
  }

  /** Every modelRequest, modelData and modelRefuse frame (model-share.ts). Returns an unsubscribe function. */
  onModelFrame(listener: (from: string, frame: Frame) => void): () => void {
    this.modelListeners.add(listener);
    return () => this.modelListeners.delete(listener);
  }

  register(job: number, round: number, target: RouteTarget): () => void {
    const key = `${job}:${round}`;
    if (this.targets.has(key)) throw new Error(`a ring for job ${job} round ${round} is already open on this transport`);
    this.closed.delete(key);
    this.targets.set(key, target);
    const waiting = this.parked.get(key);
    if (waiting) {
      this.parked.delete(key);
      for (const p of waiting) {
        this.parkedBytes -= p.bytes;
        target.onFrame(p.from, p.frame, p.bytes);
      }
    }
    return () => {
      if (this.targets.get(key) !== target) return;
      this.targets.delete(key);
      this.closed.add(key);
      if (this.closed.size > MAX_CLOSED_KEYS) this.closed.delete(this.closed.values().next().value!);
    };
  }

  private route(from: string, bytes: Uint8Array): void {
    let frame: Frame;
    try {
      frame = decodeFrame(bytes);
    } catch (e) {
      if (!(e instanceof FrameError)) throw e;
      this.counters.malformed++;
      for (const t of this.targets.values()) if (t.members.includes(from)) t.onMalformed(from, e);
      return;
    }
    // Raw throughput probes and their acks belong to whoever listens on the transport, not to a ring.
    if (frame.kind === 'raw' || frame.kind === 'ack') return;
    if (frame.kind === 'ping' || frame.kind === 'pong') return this.answerProbe(from, frame);
    if (frame.kind === 'modelRequest' || frame.kind === 'modelData' || frame.kind === 'modelRefuse') {
      for (const l of this.modelListeners) l(from, frame);
      return;
    }
    const key = `${frame.job}:${frame.round}`;
    const target = this.targets.get(key);
    if (target) {
      target.onFrame(from, frame, bytes.byteLength);
      return;
    }
    if (this.closed.has(key)) {
      this.counters.stale++;
      return;
    }
    this.park(key, { from, frame, bytes: bytes.byteLength, at: this.clock.now() });
  }

  private park(key: string, p: Parked): void {
    const now = this.clock.now();
    // Age out, then keep within the byte bound by dropping the oldest rounds first.
    for (const [k, list] of this.parked) {
      if (now - list[list.length - 1].at > MAX_PARKED_MS || (this.parkedBytes + p.bytes > MAX_PARKED_BYTES && k !== key)) {
        for (const q of list) this.parkedBytes -= q.bytes;
        this.counters.parkedDropped += list.length;
        this.parked.delete(k);
      }
    }
    if (this.parkedBytes + p.bytes > MAX_PARKED_BYTES) {
      this.counters.parkedDropped++;
      return;
    }
    let list = this.parked.get(key);
    if (!list) this.parked.set(key, (list = []));
    list.push(p);
    this.parkedBytes += p.bytes;
    this.counters.parked++;
  }

  /** Stops routing (the transport is going away). */
  detach(): void {
    this.unsubscribe();
  }
}

/** A ping or pong: no job or round (it belongs to the link, not to a ring), the nonce in `chunk`. */
function probe(kind: 'ping' | 'pong', nonce: number): Uint8Array {
  return encodeFrame({ kind, dtype: 'u8', flags: 0, job: 0, round: 0, op: 0, step: 0, segment: 0, chunk: nonce }, EMPTY);
}
