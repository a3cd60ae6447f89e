// Visits every member once per interval, a slice of them per tick. One timer for all connections
// (not one each, as Engine.IO keeps), yet no tick on time writes to all of them: at 10,000 connections a
// single loop of pings held the event loop for 320–390 ms every 10 s (the coordinator bench's CPU
// profile), the largest share of the whole-round p99.
import { serverClock, type Clock } from '@tabfleet/protocol';

/** A tick on time visits one slice; ticks are due at least this far apart. */
const MIN_TICK_MS = 100;
const MAX_SLICES = 100;

export class PingWheel<T> {
  private readonly slices: Set<T>[];
  private readonly sliceOf = new Map<T, Set<T>>();
  private next = 0;
  private cancel: (() => void) | null = null;

  constructor(
    intervalMs: number,
    private readonly visit: (member: T) => void,
    private readonly clock: Clock = serverClock,
  ) {
    const count = Math.max(1, Math.min(MAX_SLICES, Math.floor(intervalMs / MIN_TICK_MS)));
    this.slices = Array.from({ length: count }, () => new Set<T>());
    const tickMs = intervalMs / count;
    // When the next slice is due. A late tick (a busy event loop) visits every slice that fell due
    // meanwhile: scheduling each tick a tickMs after the last one ran stretched a turn of the wheel by
    // 100 times the loop's lag, and under load a turn took over 30 s, past the clients' ping timeout
    // (every volunteer of a test process dropped at once, 30 s after it connected). After a stall of a
    // whole interval or more, each member is visited once and the wheel starts again from now.
    let dueAt = this.clock.now() + tickMs;
    const tick = () => {
      const now = this.clock.now();
      const fallenDue = Math.floor((now - dueAt) / tickMs) + 1;
      const visits = Math.max(0, Math.min(count, fallenDue));
      dueAt = fallenDue > count ? now + tickMs : dueAt + visits * tickMs;
      this.cancel = this.clock.after(dueAt - now, tick);
      for (let i = 0; i < visits; i++) {
        const slice = this.slices[this.next];
        this.next = (this.next + 1) % count;
        for (const member of slice) this.visit(member);
      }
    };
    this.cancel = this.clock.after(tickMs, tick);
  }

  get size(): number {
    return this.sliceOf.size;
  }

  /** Into the smallest slice, so slices stay even as members come and go. */
  add(member: T): void {
    if (this.sliceOf.has(member)) return;
    let smallest = this.slices[0];
    for (const s of this.slices) if (s.size < smallest.size) smallest = s;
    smallest.add(member);
    this.sliceOf.set(member, smallest);
  }

  delete(member: T): void {
    this.sliceOf.get(member)?.delete(member);
    this.sliceOf.delete(member);
  }

  stop(): void {
    this.cancel?.();
    this.cancel = null;
  }
}
