// An in-process network of transports for deterministic tests: ordered links with optional latency,
// jitter, a bandwidth cap (which fills the sender's bufferedAmount, so backpressure is real),
// and injected faults — reordered or duplicated frames, stalled links, dropped links, killed peers.
// Random choices come from a seeded PRNG, so a failing case replays. Delays run on the network's
// Clock: on a FakeClock a test sets latencies and reads exact times back.
import { mulberry32, realClock, type Clock } from '@tabfleet/protocol';
import { BaseTransport, type BackpressureOptions, type Channel } from './transport';

export interface LinkFaults {
  /** One-way delay added to every frame, ms. */
  latencyMs?: number;
  /** Extra random delay in [0, jitterMs) per frame; never reorders (data channels are ordered). */
  jitterMs?: number;
  /** Serialization rate in bytes/s; frames queue in the sender's bufferedAmount meanwhile. */
  bandwidth?: number;
  /** Probability that a frame is held back and delivered after the next one. */
  reorder?: number;
  /** Probability that a frame is delivered twice. */
  duplicate?: number;
  /** Frames are accepted (bufferedAmount grows) but never leave. */
  stalled?: boolean;
}

export interface MemoryNetworkOptions extends BackpressureOptions {
  seed?: number;
  /** Faults of every link unless setFaults overrides them. */
  faults?: LinkFaults;
  /** How long after a link dies its ends hear about it, ms (default 0: next macrotask). */
  lossDetectMs?: number;
  /** The time links run on, and their transports' deadlines and round trips (default realClock). */
  clock?: Clock;
}

export interface MemoryNetworkCounters {
  delivered: number;
  duplicated: number;
  reordered: number;
  /** Frames lost because their link or peer died while they were in flight. */
  dropped: number;
}

const nextTick: (f: () => void) => void = typeof setImmediate === 'function' ? (f) => setImmediate(f) : (f) => setTimeout(f, 0);

/** `f` after `ms` on `clock`; on the real clock "now" is the next macrotask (Node's setTimeout(0) waits 1 ms). */
function after(clock: Clock, ms: number, f: () => void): void {
  if (ms <= 0 && clock === realClock) nextTick(f);
  else clock.after(ms, f);
}

/** Runs callbacks at (non-decreasing) times, strictly in the order they were pushed. */
class TimedQueue {
  private items: { at: number; run: () => void }[] = [];
  private head = 0;
  private armed = false;

  constructor(private readonly clock: Clock) {}

  push(at: number, run: () => void): void {
    this.items.push({ at, run });
    this.arm();
  }

  private arm(): void {
    if (this.armed || this.head >= this.items.length) return;
    this.armed = true;
    after(this.clock, this.items[this.head].at - this.clock.now(), () => {
      this.armed = false;
      // Real timers fire up to a millisecond early against the performance clock (libuv counts whole
      // ms): what is nearly due goes now. Fake time is exact.
      const now = this.clock.now() + (this.clock === realClock ? 0.5 : 0);
      while (this.head < this.items.length && this.items[this.head].at <= now) this.items[this.head++].run();
      if (this.head === this.items.length) {
        this.items = [];
        this.head = 0;
      }
      this.arm();
    });
  }
}

/** One direction of a link. */
class Wire implements Channel {
  bufferedAmount = 0;
  dead = false;
  private nextFree = 0;
  private lastArrival = 0;
  private held: Uint8Array | null = null;
  private stalledFrames: Uint8Array[] = [];
  private lowThreshold = 0;
  private lowCb: (() => void) | null = null;
  readonly setLowHandler = (threshold: number, cb: () => void): void => {
    this.lowThreshold = threshold;
    this.lowCb = cb;
  };

  constructor(private readonly net: MemoryNetwork, readonly from: string, readonly to: string) {
    this.departing = new TimedQueue(net.clock);
    this.arriving = new TimedQueue(net.clock);
  }

  write(frame: Uint8Array): void {
    if (this.dead) throw new Error(`link ${this.from}→${this.to} is closed`);
    this.net.tapFrame(this.from, this.to, frame);
    const copy = frame.slice();
    this.bufferedAmount += copy.byteLength;
    if (this.net.faultsOf(this.from, this.to).stalled) {
      this.stalledFrames.push(copy);
      return;
    }
    this.schedule(copy);
  }

  /** Releases frames held by a stall (the link un-stalls). */
  resume(): void {
    for (const f of this.stalledFrames.splice(0)) this.schedule(f);
  }

  private readonly departing: TimedQueue;
  private readonly arriving: TimedQueue;

  private schedule(frame: Uint8Array): void {
    const f = this.net.faultsOf(this.from, this.to);
    const now = this.net.clock.now();
    const departAt = f.bandwidth ? Math.max(now, this.nextFree) + (frame.byteLength / f.bandwidth) * 1000 : now;
    this.nextFree = departAt;
    this.departing.push(departAt, () => {
      if (this.dead) return;
      this.bufferedAmount -= frame.byteLength;
      if (this.lowCb && this.bufferedAmount <= this.lowThreshold) this.lowCb();
      const jitter = f.jitterMs ? this.net.random() * f.jitterMs : 0;
      const arrival = Math.max(this.lastArrival, departAt + (f.latencyMs ?? 0) + jitter);
      this.lastArrival = arrival;
      this.arriving.push(arrival, () => this.arrive(frame, f));
    });
  }

  private arrive(frame: Uint8Array, f: LinkFaults): void {
    if (this.dead) {
      this.net.counters.dropped++;
      return;
    }
    if (this.held) {
      const held = this.held;
      this.held = null;
      this.hand(frame, f);
      this.hand(held, f);
      return;
    }
    if (f.reorder && this.net.random() < f.reorder) {
      this.held = frame;
      this.net.counters.reordered++;
      // A held frame with nothing behind it still arrives, a little late.
      this.net.clock.after(5, () => {
        if (this.held === frame) {
          this.held = null;
          this.hand(frame, f);
        }
      });
      return;
    }
    this.hand(frame, f);
  }

  private hand(frame: Uint8Array, f: LinkFaults): void {
    if (this.dead) {
      this.net.counters.dropped++;
      return;
    }
    this.net.counters.delivered++;
    this.net.endpointOf(this.to)?.receive(this.from, frame);
    if (f.duplicate && this.net.random() < f.duplicate) {
      this.net.counters.duplicated++;
      this.net.endpointOf(this.to)?.receive(this.from, frame.slice());
    }
  }
}

export class MemoryTransport extends BaseTransport {
  dead = false;

  constructor(private readonly net: MemoryNetwork, self: string, bp: BackpressureOptions) {
    super(self, bp, net.clock);
  }

  connect(peer: string): Promise<void> {
    if (this.dead || this.closedAll) return Promise.reject(new Error(`${this.self} is closed`));
    if (this.isConnected(peer)) return Promise.resolve();
    this.net.open(this.self, peer);
    return this.link(peer).ready();
  }

  /** @internal the network attaches the outgoing wire of a new link. */
  attachWire(peer: string, wire: Wire): void {
    this.link(peer).attach(wire);
  }

  /** @internal */
  receive(from: string, frame: Uint8Array): void {
    if (!this.dead) this.deliver(from, frame);
  }

  /** @internal the network reports the link to `peer` down. */
  linkDown(peer: string, reason: string): void {
    this.lost(peer, reason);
  }

  protected closeChannel(peer: string): void {
    this.net.close(this.self, peer, `${this.self} closed the link`);
  }
}

/** A set of MemoryTransports that can reach each other, plus the knobs that break them. */
export class MemoryNetwork {
  readonly counters: MemoryNetworkCounters = { delivered: 0, duplicated: 0, reordered: 0, dropped: 0 };
  readonly random: () => number;
  readonly clock: Clock;
  private endpoints = new Map<string, MemoryTransport>();
  private wires = new Map<string, Wire>();
  private faults = new Map<string, LinkFaults>();
  private taps = new Set<(from: string, to: string, frame: Uint8Array) => void>();

  constructor(private readonly opts: MemoryNetworkOptions = {}) {
    this.random = mulberry32(opts.seed ?? 1);
    this.clock = opts.clock ?? realClock;
  }

  endpoint(id: string): MemoryTransport {
    if (this.endpoints.has(id)) throw new Error(`endpoint ${id} exists`);
    const t = new MemoryTransport(this, id, this.opts);
    this.endpoints.set(id, t);
    return t;
  }

  /** @internal */
  endpointOf(id: string): MemoryTransport | undefined {
    const e = this.endpoints.get(id);
    return e && !e.dead ? e : undefined;
  }

  /** @internal */
  faultsOf(from: string, to: string): LinkFaults {
    return this.faults.get(`${from}\u0000${to}`) ?? this.opts.faults ?? {};
  }

  /** Sets the faults of the link from → to (one direction), or both directions with `both`. */
  setFaults(from: string, to: string, faults: LinkFaults, both = true): void {
    this.faults.set(`${from}\u0000${to}`, faults);
    if (both) this.faults.set(`${to}\u0000${from}`, faults);
    if (!faults.stalled) {
      this.wires.get(`${from}\u0000${to}`)?.resume();
      if (both) this.wires.get(`${to}\u0000${from}`)?.resume();
    }
  }

  /** Frames stop moving between a and b (both ways); the link stays up. */
  stall(a: string, b: string): void {
    this.setFaults(a, b, { ...this.faultsOf(a, b), stalled: true });
  }

  /** Sees every frame as it is written (before faults); tests use it to strike mid-operation. */
  tap(fn: (from: string, to: string, frame: Uint8Array) => void): () => void {
    this.taps.add(fn);
    return () => this.taps.delete(fn);
  }

  /** @internal */
  tapFrame(from: string, to: string, frame: Uint8Array): void {
    for (const t of this.taps) t(from, to, frame);
  }

  /** @internal opens a → b and b → a. */
  open(a: string, b: string): void {
    const ea = this.endpointOf(a);
    const eb = this.endpointOf(b);
    if (!ea || !eb || a === b) {
      // Nobody answers: the link stays pending until the connect times out on the caller's side.
      return;
    }
    const ab = `${a}\u0000${b}`;
    const w = this.wires.get(ab);
    if (w && !w.dead) return;
    const wab = new Wire(this, a, b);
    const wba = new Wire(this, b, a);
    this.wires.set(ab, wab);
    this.wires.set(`${b}\u0000${a}`, wba);
    ea.attachWire(b, wab);
    eb.attachWire(a, wba);
  }

  /** @internal closes both directions; each end hears of it after lossDetectMs. */
  close(a: string, b: string, reason: string): void {
    for (const [x, y] of [[a, b], [b, a]]) {
      const w = this.wires.get(`${x}\u0000${y}`);
      if (w) w.dead = true;
      const e = this.endpoints.get(x);
      // Not when the link was opened again meanwhile: the news is of the old wire, the new one is up.
      if (e) after(this.clock, this.opts.lossDetectMs ?? 0, () => this.wires.get(`${x}\u0000${y}`) === w && e.linkDown(y, reason));
    }
  }

  /** Cuts the link between a and b; both stay alive. */
  dropLink(a: string, b: string): void {
    this.close(a, b, `link ${a}↔${b} dropped`);
  }

  /** The peer dies: its links close, its frames in flight are lost, its neighbours notice after lossDetectMs. */
  kill(id: string): void {
    const e = this.endpoints.get(id);
    if (!e || e.dead) return;
    for (const key of this.wires.keys()) {
      const [x, y] = key.split('\u0000');
      if (x === id) this.close(x, y, `${id} was killed`);
    }
    e.dead = true;
    // Its own pending work fails too, as a tab's would when it is torn down.
    for (const s of e.stats()) e.linkDown(s.peer, 'this peer was killed');
  }
}
