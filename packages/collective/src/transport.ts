// What the ring needs from a network: point-to-point links to named peers that carry frames
// (Uint8Array ≤ 64 KiB) in order, with backpressure, counters, and news of a lost peer.
// Implementations: MemoryTransport (memory.ts, fault injection for tests) and WebRtcTransport
// (webrtc.ts, simple-peer data channels in the browser or over @roamhq/wrtc in Node).
import { realClock, type Clock, type LinkPath } from '@tabfleet/protocol';
import { CollectiveError } from './errors';

/** Per-link counters; times are the transport's clock's milliseconds. */
export interface LinkStats {
  peer: string;
  open: boolean;
  bytesSent: number;
  bytesReceived: number;
  framesSent: number;
  framesReceived: number;
  /** Time sends spent waiting for the channel to drain below its bound. */
  sendBlockedMs: number;
  /** Largest queued byte count seen on the channel right after a send (never above the bound + one frame). */
  maxBufferedAmount: number;
  connectedAt: number | null;
  firstSentAt: number | null;
  lastSentAt: number | null;
  firstReceivedAt: number | null;
  lastReceivedAt: number | null;
}

export interface Transport {
  /** This endpoint's id (a ring member id). */
  readonly self: string;
  /** The time its links run on (deadlines and round trips over it use it too); absent: realClock. */
  readonly clock?: Clock;
  /** Opens (or waits for) the link to `peer`; resolves when frames can flow. Idempotent. */
  connect(peer: string): Promise<void>;
  isConnected(peer: string): boolean;
  /**
   * Queues one frame to `peer`. Resolves once the frame is handed to the channel, which happens only
   * while the channel's queue is under its bound (backpressure): await it before sending more.
   * Frames to one peer arrive in order. Rejects with CollectiveError('peer_lost') if the link is
   * down or goes down first. The frame must not be modified afterwards.
   */
  send(peer: string, frame: Uint8Array): Promise<void>;
  /** Every frame received, from any peer. Returns an unsubscribe function. */
  onFrame(handler: (from: string, frame: Uint8Array) => void): () => void;
  /** A link closed or failed (peer gone, tab closed, ICE failed, closeLink). */
  onPeerLost(handler: (peer: string, reason: string) => void): () => void;
  stats(): LinkStats[];
  /** Transports over ICE (WebRTC): the path each open link took (its selected candidate pair) and its round trip. */
  linkPaths?(): Promise<LinkPath[]>;
  /** Closes one link; the peer sees it as lost. */
  closeLink(peer: string, reason?: string): void;
  /** Closes every link and stops accepting new ones. */
  close(): void;
}

export interface BackpressureOptions {
  /** Sends wait while the channel holds more than this many bytes (default 1 MiB; Chromium errors a channel past ~16 MiB). */
  highWaterMark?: number;
  /** Waiting sends resume when the queue drains to this (default highWaterMark / 4). */
  lowWaterMark?: number;
  /** Poll interval when the channel has no 'bufferedamountlow' event (node wrtc), ms. */
  pollMs?: number;
}

/** The raw channel a BaseTransport link drives. */
export interface Channel {
  readonly bufferedAmount: number;
  write(frame: Uint8Array): void;
  /** Calls back when bufferedAmount falls to or below `threshold`; null when the channel cannot (then it is polled). */
  setLowHandler: ((threshold: number, cb: () => void) => void) | null;
}

interface Pending {
  frame: Uint8Array;
  resolve: () => void;
  reject: (e: Error) => void;
  since: number;
}

export class Link {
  stats: LinkStats;
  channel: Channel | null = null;
  private queue: Pending[] = [];
  private head = 0;
  private waiting = false;
  private cancelPoll: (() => void) | null = null;
  closed: CollectiveError | null = null;
  private readyWaiters: { resolve: () => void; reject: (e: Error) => void }[] = [];

  constructor(readonly peer: string, private readonly bp: Required<BackpressureOptions>, private readonly clock: Clock = realClock) {
    this.stats = {
      peer, open: false, bytesSent: 0, bytesReceived: 0, framesSent: 0, framesReceived: 0, sendBlockedMs: 0, maxBufferedAmount: 0,
      connectedAt: null, firstSentAt: null, lastSentAt: null, firstReceivedAt: null, lastReceivedAt: null,
    };
  }

  attach(channel: Channel): void {
    this.channel = channel;
    this.stats.open = true;
    this.stats.connectedAt = this.clock.now();
    channel.setLowHandler?.(this.bp.lowWaterMark, () => this.drain());
    for (const w of this.readyWaiters.splice(0)) w.resolve();
    this.drain();
  }

  ready(): Promise<void> {
    if (this.closed) return Promise.reject(this.closed);
    if (this.channel) return Promise.resolve();
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  received(bytes: number): void {
    const now = this.clock.now();
    this.stats.bytesReceived += bytes;
    this.stats.framesReceived++;
    this.stats.firstReceivedAt ??= now;
    this.stats.lastReceivedAt = now;
  }

  send(frame: Uint8Array): Promise<void> {
    if (this.closed) return Promise.reject(this.closed);
    const ch = this.channel;
    if (ch && this.head === this.queue.length && this.fits(ch, frame)) {
      try {
        this.write(ch, frame);
      } catch (e) {
        this.close(new CollectiveError('peer_lost', `send to ${this.peer} failed: ${(e as Error).message}`, this.peer));
        return Promise.reject(this.closed);
      }
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ frame, resolve, reject, since: this.clock.now() });
      this.drain();
    });
  }

  private fits(ch: Channel, frame: Uint8Array): boolean {
    const b = ch.bufferedAmount;
    return b === 0 || b + frame.byteLength <= this.bp.highWaterMark;
  }

  private write(ch: Channel, frame: Uint8Array): void {
    ch.write(frame);
    const now = this.clock.now();
    const s = this.stats;
    s.bytesSent += frame.byteLength;
    s.framesSent++;
    s.firstSentAt ??= now;
    s.lastSentAt = now;
    const b = ch.bufferedAmount;
    if (b > s.maxBufferedAmount) s.maxBufferedAmount = b;
  }

  /** Writes queued frames while they fit; otherwise waits for the low-water event or polls. */
  drain(): void {
    const ch = this.channel;
    if (!ch || this.closed) return;
    while (this.head < this.queue.length && this.fits(ch, this.queue[this.head].frame)) {
      const p = this.queue[this.head++];
      try {
        this.write(ch, p.frame);
      } catch (e) {
        this.close(new CollectiveError('peer_lost', `send to ${this.peer} failed: ${(e as Error).message}`, this.peer));
        return;
      }
      this.stats.sendBlockedMs += this.clock.now() - p.since;
      p.resolve();
    }
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
      return;
    }
    if (ch.setLowHandler) return; // the channel calls drain() when it empties
    this.cancelPoll ??= this.clock.after(this.bp.pollMs, () => {
      this.cancelPoll = null;
      this.drain();
    });
  }

  close(err: CollectiveError): void {
    if (this.closed) return;
    this.closed = err;
    this.stats.open = false;
    this.cancelPoll?.();
    for (let i = this.head; i < this.queue.length; i++) this.queue[i].reject(err);
    this.queue = [];
    this.head = 0;
    for (const w of this.readyWaiters.splice(0)) w.reject(err);
  }
}

export function backpressureDefaults(o: BackpressureOptions = {}): Required<BackpressureOptions> {
  const highWaterMark = o.highWaterMark ?? 1024 * 1024;
  return { highWaterMark, lowWaterMark: o.lowWaterMark ?? Math.floor(highWaterMark / 4), pollMs: o.pollMs ?? 2 };
}

/** Handler lists, links by peer and the counters every transport shares. */
export abstract class BaseTransport implements Transport {
  protected links = new Map<string, Link>();
  private frameHandlers = new Set<(from: string, frame: Uint8Array) => void>();
  private lostHandlers = new Set<(peer: string, reason: string) => void>();
  protected readonly bp: Required<BackpressureOptions>;
  protected closedAll = false;

  constructor(readonly self: string, bp: BackpressureOptions = {}, readonly clock: Clock = realClock) {
    this.bp = backpressureDefaults(bp);
  }

  abstract connect(peer: string): Promise<void>;
  protected abstract closeChannel(peer: string): void;

  protected link(peer: string): Link {
    let l = this.links.get(peer);
    if (!l || l.closed) {
      l = new Link(peer, this.bp, this.clock);
      this.links.set(peer, l);
    }
    return l;
  }

  isConnected(peer: string): boolean {
    const l = this.links.get(peer);
    return !!l && !l.closed && !!l.channel;
  }

  send(peer: string, frame: Uint8Array): Promise<void> {
    const l = this.links.get(peer);
    if (!l) return Promise.reject(new CollectiveError('peer_lost', `${this.self} has no link to ${peer}`, peer));
    return l.send(frame);
  }

  onFrame(handler: (from: string, frame: Uint8Array) => void): () => void {
    this.frameHandlers.add(handler);
    return () => this.frameHandlers.delete(handler);
  }

  onPeerLost(handler: (peer: string, reason: string) => void): () => void {
    this.lostHandlers.add(handler);
    return () => this.lostHandlers.delete(handler);
  }

  /** Implementations call this for every frame that arrives. */
  protected deliver(from: string, frame: Uint8Array): void {
    const l = this.links.get(from);
    if (!l || l.closed) return; // frames after close are not delivered
    l.received(frame.byteLength);
    for (const h of this.frameHandlers) h(from, frame);
  }

  /** Implementations call this when a link goes down; handlers hear about it once. */
  protected lost(peer: string, reason: string): void {
    const l = this.links.get(peer);
    if (!l || l.closed) return;
    l.close(new CollectiveError('peer_lost', `link ${this.self}↔${peer} lost: ${reason}`, peer));
    for (const h of this.lostHandlers) h(peer, reason);
  }

  stats(): LinkStats[] {
    return [...this.links.values()].map((l) => ({ ...l.stats }));
  }

  closeLink(peer: string, reason = 'closed locally'): void {
    this.lost(peer, reason);
    this.closeChannel(peer);
  }

  close(): void {
    this.closedAll = true;
    for (const peer of [...this.links.keys()]) this.closeLink(peer, 'transport closed');
  }
}
