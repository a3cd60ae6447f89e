// What other packages' tests need from protocol: a manual clock.
import type { Clock } from './clock';

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
  live: boolean;
}

const before = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

// One macrotask turn: every microtask (promise continuation) queued before it has run. setImmediate
// where there is one (Node): setTimeout(0) costs a real millisecond per turn there.
const immediate = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate;
const turn = (): Promise<void> => new Promise((r) => (immediate ? immediate(r) : setTimeout(r, 0)));

/**
 * Fake time. Nothing moves until a test says so: `advance(ms)` runs the timers that fall due, in order
 * of due time (then of scheduling), timers scheduled by them included, with promises flushed after
 * each; `run(p)` jumps from timer to timer until `p` settles; `spend(ms)` is time passing while this
 * thread is busy (timers due meanwhile fire at the next advance or run, late, as real ones would).
 */
export class FakeClock implements Clock {
  private t: number;
  private heap: Timer[] = [];
  private seq = 0;

  constructor(start = 1_000_000) {
    this.t = start;
  }

  readonly now = (): number => this.t;

  readonly after = (ms: number, fn: () => void): (() => void) => {
    const timer: Timer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, live: true };
    this.push(timer);
    return () => void (timer.live = false);
  };

  /** Timers scheduled and not yet run or cancelled. */
  get pending(): number {
    return this.heap.filter((x) => x.live).length;
  }

  /** Moves time on by `ms` with nothing run (a busy thread); due timers wait for the next advance or run. */
  spend(ms: number): void {
    this.t += Math.max(0, ms);
  }

  /** Moves time on by `ms`, running each timer that falls due at its time, promises flushed after each. */
  async advance(ms: number): Promise<void> {
    const end = this.t + Math.max(0, ms);
    await turn();
    for (let next = this.next(); next && next.at <= end; next = this.next()) await this.fire(next);
    this.t = Math.max(this.t, end);
  }

  /**
   * Runs timers, jumping to each next one, until `p` settles (within `withinMs` of fake time); rejects
   * when `p` is still pending with no timer left to run, since then nothing would ever settle it.
   */
  async run<T>(p: Promise<T>, withinMs = 24 * 3_600_000): Promise<T> {
    let settled = false;
    p.then(() => (settled = true), () => (settled = true));
    const end = this.t + withinMs;
    await turn();
    while (!settled) {
      const next = this.next();
      if (!next) {
        // A few turns for work outside this clock (a stream, a worker) before calling it stuck.
        for (let i = 0; i < 20 && !settled && !this.next(); i++) await turn();
        if (settled || this.next()) continue;
        throw new Error(`FakeClock.run: still pending at ${this.t} with no timer left`);
      }
      if (next.at > end) throw new Error(`FakeClock.run: still pending after ${withinMs} ms of fake time`);
      await this.fire(next);
    }
    return p;
  }

  private async fire(timer: Timer): Promise<void> {
    this.pop();
    this.t = Math.max(this.t, timer.at);
    timer.live = false;
    timer.fn();
    await turn();
  }

  /** The earliest live timer (cancelled ones are dropped on the way). */
  private next(): Timer | undefined {
    while (this.heap.length && !this.heap[0].live) this.pop();
    return this.heap[0];
  }

  private push(x: Timer): void {
    const h = this.heap;
    let i = h.push(x) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i], h[parent])) break;
      [h[i], h[parent]] = [h[parent], h[i]];
      i = parent;
    }
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (!h.length) return;
    h[0] = last;
    for (let i = 0; ;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < h.length && before(h[l], h[m])) m = l;
      if (r < h.length && before(h[r], h[m])) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m], h[i]];
      i = m;
    }
  }
}
