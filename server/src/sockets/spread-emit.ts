// An event to many volunteer connections a slice per tick instead of all at once. The heartbeat
// period announced to every volunteer of a node (heartbeat-period.ts) was one loop over all of them:
// 125 ms of the event loop at 7,500 volunteers and 174 ms at 10,000 (coordinator bench, one node),
// most of the 250 ms a whole round may take at the p99 goal, for every job's members at once.
import type { Clock } from '@tabfleet/protocol';
import type { VolunteerConnection } from './connection';

/** Connections sent to per tick: about 12 ms of the loop each on the bench machine (writes of ~25 µs). */
export const SPREAD_PER_TICK = 500;
/** Between slices; 10,000 volunteers are told within a second. */
export const SPREAD_TICK_MS = 50;

export class SpreadEmit {
  private cancelTick: (() => void) | null = null;

  constructor(private readonly clock: Clock) {}

  /**
   * Sends `event` to the connections there are now, the first slice at once; connections that close
   * meanwhile are passed over. A new event replaces one still being sent (the newer supersedes it).
   */
  start(connections: Iterable<VolunteerConnection>, event: string, payload: unknown): void {
    this.stop();
    const all = [...connections];
    let next = 0;
    const slice = () => {
      this.cancelTick = null;
      const end = Math.min(all.length, next + SPREAD_PER_TICK);
      for (; next < end; next++) if (all[next].conn.readyState === 'open') all[next].emit(event, payload);
      if (next < all.length) this.cancelTick = this.clock.after(SPREAD_TICK_MS, slice);
    };
    slice();
  }

  /** Whether an event is still being sent. */
  get sending(): boolean {
    return this.cancelTick !== null;
  }

  stop(): void {
    this.cancelTick?.();
    this.cancelTick = null;
  }
}
