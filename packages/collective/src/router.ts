// One per transport: decodes incoming frames and hands them to the Ring of their (job, round). Frames
// of a round whose Ring does not exist yet (a neighbour started it first) are parked, within bounds,
// until that Ring registers; frames of rounds already closed are stale and counted.
import { FrameError, decodeFrame, type Frame } from '@tabfleet/protocol';
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

  private constructor(transport: Transport) {
    this.unsubscribe = transport.onFrame((from, bytes) => this.route(from, bytes));
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
    this.park(key, { from, frame, bytes: bytes.byteLength, at: performance.now() });
  }

  private park(key: string, p: Parked): void {
    const now = performance.now();
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
