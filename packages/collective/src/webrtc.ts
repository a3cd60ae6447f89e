// Transport over WebRTC data channels through simple-peer. Runtime-neutral: the browser entry
// (webrtc-browser.ts) passes simple-peer's browser bundle, the Node entry (webrtc-node.ts) passes
// simple-peer with @roamhq/wrtc. Signaling goes through a pluggable Signaler.
//
// One ordered, reliable data channel per pair of members. The member whose id sorts first is the
// initiator (sends the offer); the other answers. Signals are wrapped as { v, cid, sig }: `cid`
// names one connection attempt, so signals of an older attempt are ignored, and a new offer from a
// peer replaces a dead connection with it.
//
// Backpressure: frames wait while the channel's bufferedAmount is above the high-water mark; the
// channel's 'bufferedamountlow' event (browsers) or polling (node wrtc, which lacks it) resumes them.
//
// A link whose ICE goes `disconnected` or `failed` is restarted (ice-restart.ts) before it is lost: the
// initiator sends a new offer with iceRestart, the answerer asks for one with { restartIce: true }.
import type { Clock, LinkPath } from '@tabfleet/protocol';
import { CollectiveError } from './errors';
import { linkPathOf, type StatsReportLike } from './ice-path';
import { IceWatch } from './ice-restart';
import type { Signaler } from './signaling';
import { BaseTransport, type BackpressureOptions, type Channel } from './transport';

/** The part of RTCDataChannel we touch (simple-peer's `_channel`). */
interface DataChannelLike {
  bufferedAmount: number;
  bufferedAmountLowThreshold?: number;
  addEventListener?(type: 'bufferedamountlow', cb: () => void): void;
}

/** The part of a simple-peer instance we use. */
export interface SimplePeerLike {
  on(event: 'signal', cb: (data: unknown) => void): unknown;
  on(event: 'connect' | 'close', cb: () => void): unknown;
  on(event: 'data', cb: (data: Uint8Array) => void): unknown;
  on(event: 'error', cb: (err: Error) => void): unknown;
  signal(data: never): void;
  send(data: Uint8Array): void;
  destroy(err?: Error): void;
  readonly destroyed?: boolean;
  _channel?: DataChannelLike | null;
  /** The RTCPeerConnection (simple-peer's `_pc`), read for its stats and restarted (restartIce) when ICE goes down. */
  _pc?: { getStats(): Promise<StatsReportLike>; iceConnectionState?: string; connectionState?: string; restartIce?(): void } | null;
  /** simple-peer's internals an ICE restart uses (absent in test doubles: then links are not restarted). */
  _onIceStateChange?(): void;
  _onConnectionStateChange?(): void;
  offerOptions?: RTCOfferOptions;
  negotiate?(): void;
}

export interface PeerFactoryOptions {
  initiator: boolean;
  config?: RTCConfiguration;
  channelConfig?: RTCDataChannelInit;
  trickle?: boolean;
}
export type SimplePeerFactory = (opts: PeerFactoryOptions) => SimplePeerLike;

export interface WebRtcTransportOptions extends BackpressureOptions {
  self: string;
  signaler: Signaler;
  createPeer: SimplePeerFactory;
  /**
   * ICE servers etc. Default: none (host candidates, which is all loopback and LANs need). A function is
   * read as each link opens, so links opened after TURN credentials were renewed use the new ones.
   */
  rtcConfig?: RTCConfiguration | (() => RTCConfiguration);
  /** A link not open within this long is given up (default 30 s). */
  connectTimeoutMs?: number;
  /** A link whose ICE went down and has not come back within this long, restarts and all, is lost (default 15 s). */
  iceRestartBoundMs?: number;
  /** How often an ICE restart is tried again while the link is down (default 3 s). */
  iceRestartRetryMs?: number;
  /** Whether to answer a connection offered by `peer` that this side has not asked for (default: yes). */
  accept?: (peer: string) => boolean;
  /** Connect timeouts, and deadlines and round trips over this transport (default realClock). */
  clock?: Clock;
}

interface Envelope {
  v: 1;
  cid: string;
  sig: unknown;
}

function isEnvelope(x: unknown): x is Envelope {
  const e = x as Envelope;
  return !!e && typeof e === 'object' && e.v === 1 && typeof e.cid === 'string' && e.cid.length > 0 && e.cid.length < 100 && !!e.sig && typeof e.sig === 'object';
}

interface Conn {
  cid: string;
  peer: SimplePeerLike;
  cancelTimer: () => void;
  open: boolean;
  ice: IceWatch;
}

/** The answering side's request for an ICE restart (the offering side restarts). */
interface RestartRequest {
  restartIce: true;
}

function randomId(): string {
  const b = new Uint8Array(9);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

export class WebRtcTransport extends BaseTransport {
  private conns = new Map<string, Conn>();
  private readonly unsubscribeSignals: () => void;

  constructor(private readonly opts: WebRtcTransportOptions) {
    super(opts.self, opts, opts.clock);
    this.unsubscribeSignals = opts.signaler.onSignal((from, data) => this.onSignal(from, data));
  }

  /** True when this side sends the offer to `peer`. */
  initiates(peer: string): boolean {
    return this.self < peer;
  }

  connect(peer: string): Promise<void> {
    if (this.closedAll) return Promise.reject(new CollectiveError('peer_lost', `transport of ${this.self} is closed`, peer));
    if (peer === this.self) return Promise.reject(new CollectiveError('bad_argument', 'cannot connect to self'));
    const link = this.link(peer);
    if (!this.conns.has(peer) && this.initiates(peer)) this.open(peer, randomId(), true);
    // The answering side waits for the initiator's offer (which creates the connection in onSignal).
    if (!this.conns.has(peer)) this.armTimeout(peer);
    return link.ready();
  }

  private pendingTimers = new Map<string, () => void>();

  /** Gives up on a link that nobody opens within connectTimeoutMs. */
  private armTimeout(peer: string): void {
    if (this.pendingTimers.has(peer)) return;
    this.pendingTimers.set(peer, this.clock.after(this.opts.connectTimeoutMs ?? 30_000, () => {
      this.pendingTimers.delete(peer);
      if (!this.isConnected(peer)) {
        this.lost(peer, `no connection within ${this.opts.connectTimeoutMs ?? 30_000} ms`);
        this.dropConn(peer);
      }
    }));
  }

  private open(peer: string, cid: string, initiator: boolean): Conn {
    const rtc = this.opts.rtcConfig;
    const config = (typeof rtc === 'function' ? rtc() : rtc) ?? { iceServers: [] };
    const p = this.opts.createPeer({ initiator, config, channelConfig: { ordered: true } });
    const timeoutMs = this.opts.connectTimeoutMs ?? 30_000;
    const conn: Conn = {
      cid,
      peer: p,
      open: false,
      cancelTimer: this.clock.after(timeoutMs, () => {
        if (!conn.open) this.fail(peer, conn, `WebRTC connection not open within ${timeoutMs} ms`);
      }),
      ice: new IceWatch({
        clock: this.clock,
        boundMs: this.opts.iceRestartBoundMs ?? 15_000,
        retryMs: this.opts.iceRestartRetryMs ?? 3_000,
        restart: () => (initiator ? restartIce(p) : this.opts.signaler.send(peer, { v: 1, cid, sig: { restartIce: true } satisfies RestartRequest })),
        giveUp: (reason) => this.fail(peer, conn, reason),
      }),
    };
    this.conns.set(peer, conn);
    this.watchIce(peer, conn);
    const link = this.link(peer);
    p.on('signal', (sig) => this.opts.signaler.send(peer, { v: 1, cid, sig } satisfies Envelope));
    p.on('connect', () => {
      if (this.conns.get(peer) !== conn) return;
      conn.open = true;
      conn.cancelTimer();
      this.pendingTimers.get(peer)?.();
      this.pendingTimers.delete(peer);
      link.attach(this.channelOf(p));
    });
    p.on('data', (d) => {
      if (this.conns.get(peer) === conn) this.deliver(peer, d);
    });
    p.on('error', (e) => this.fail(peer, conn, e.message));
    p.on('close', () => this.fail(peer, conn, 'data channel closed'));
    return conn;
  }

  /** Restarts ICE on an open link that went down, instead of letting simple-peer destroy it on 'failed'. */
  private watchIce(peer: string, conn: Conn): void {
    const p = conn.peer;
    const onIce = p._onIceStateChange?.bind(p);
    const onConnection = p._onConnectionStateChange?.bind(p);
    if (!onIce || !onConnection || !p._pc || !p.negotiate) return;
    const openAndCurrent = () => conn.open && this.conns.get(peer) === conn;
    // simple-peer destroys the peer on 'failed' (ICE's or the connection's); an open link's restart has
    // until the bound. Its handlers read the state again, and a native getter (wrtc) can have moved on
    // to 'failed' since the read here: so an open link never reaches them, except to close. Once open
    // they have nothing else to do (the link is connected; a restart's 'connected' only ends the watch).
    p._onIceStateChange = () => {
      const state = p._pc?.iceConnectionState ?? 'closed';
      if (openAndCurrent()) {
        conn.ice.state(state);
        if (state !== 'closed') return;
      }
      onIce();
    };
    p._onConnectionStateChange = () => {
      if (!openAndCurrent()) return onConnection();
      if (p._pc?.connectionState === 'failed') conn.ice.state('failed');
    };
  }

  /** ICE restarts tried on the link to `peer` (its current connection), and how often it came back. */
  iceRestarts(peer: string): { restarts: number; recoveries: number; down: boolean } {
    const ice = this.conns.get(peer)?.ice;
    return { restarts: ice?.restarts ?? 0, recoveries: ice?.recoveries ?? 0, down: ice?.down ?? false };
  }

  private channelOf(p: SimplePeerLike): Channel {
    const ch = p._channel;
    if (!ch) throw new Error('simple-peer connected without a data channel');
    const hasLowEvent = typeof ch.bufferedAmountLowThreshold === 'number' && typeof ch.addEventListener === 'function';
    return {
      get bufferedAmount() {
        return p._channel?.bufferedAmount ?? 0;
      },
      write: (frame) => p.send(frame),
      setLowHandler: hasLowEvent
        ? (threshold, cb) => {
          ch.bufferedAmountLowThreshold = threshold;
          ch.addEventListener!('bufferedamountlow', cb);
        }
        : null,
    };
  }

  private fail(peer: string, conn: Conn, reason: string): void {
    if (this.conns.get(peer) !== conn) return;
    this.dropConn(peer);
    this.lost(peer, reason);
  }

  private dropConn(peer: string): void {
    const c = this.conns.get(peer);
    if (!c) return;
    this.conns.delete(peer);
    c.cancelTimer();
    c.ice.stop();
    try {
      c.peer.destroy();
    } catch {
      // already gone
    }
  }

  private onSignal(from: string, data: unknown): void {
    if (this.closedAll || !isEnvelope(data) || from === this.self) return;
    let conn = this.conns.get(from);
    if ((data.sig as Partial<RestartRequest>).restartIce === true) {
      if (conn && conn.cid === data.cid && conn.open && this.initiates(from)) conn.ice.requested();
      return;
    }
    if (!conn || conn.cid !== data.cid) {
      // Only the initiator's offer starts a connection; anything else of an unknown attempt is stale.
      const offer = (data.sig as { type?: string }).type === 'offer';
      if (this.initiates(from) || !offer) return;
      if (!conn && !this.links.has(from) && this.opts.accept && !this.opts.accept(from)) return;
      if (conn) {
        // The initiator started over (it lost the old connection): replace ours.
        this.dropConn(from);
        if (this.isConnected(from)) this.lost(from, 'peer reconnected');
      }
      conn = this.open(from, data.cid, false);
    }
    try {
      conn.peer.signal(data.sig as never);
    } catch (e) {
      this.fail(from, conn, `bad signal: ${(e as Error).message}`);
    }
  }

  /**
   * The selected candidate pair of every open link (ice-path.ts), read from its RTCPeerConnection's
   * stats. A link whose stats cannot be read or name no pair yet is left out.
   */
  async linkPaths(): Promise<LinkPath[]> {
    const open = [...this.conns].filter(([, c]) => c.open && c.peer._pc);
    const paths = await Promise.all(open.map(async ([peer, c]) => {
      try {
        return linkPathOf(peer, await c.peer._pc!.getStats());
      } catch {
        return null; // closed meanwhile
      }
    }));
    return paths.filter((p): p is LinkPath => p !== null);
  }

  protected closeChannel(peer: string): void {
    this.pendingTimers.get(peer)?.();
    this.pendingTimers.delete(peer);
    this.dropConn(peer);
  }

  override close(): void {
    super.close();
    this.unsubscribeSignals();
    for (const peer of [...this.conns.keys()]) this.dropConn(peer);
  }
}

/** The offering side's ICE restart: fresh ICE credentials in a new offer, through simple-peer's renegotiation. */
function restartIce(p: SimplePeerLike): void {
  if (p.destroyed) return;
  p._pc?.restartIce?.();
  p.offerOptions = { ...p.offerOptions, iceRestart: true };
  p.negotiate!();
}
