// The heartbeat period this node asks of its volunteers (protocol's heartbeat.ts): told to each in
// `welcome`, and to all of the node's volunteers (`heartbeat`) when their number moves it. Announced
// a while after the change and once for a burst of them, not on every connection: a broadcast to ten
// thousand sockets costs the event loop a moment of its own.
import { heartbeatPeriodMs, HEARTBEATS_PER_SEC, type Clock } from '@tabfleet/protocol';

/** A changed period goes out this long after the change that moved it (ms), with any that follow. */
export const HEARTBEAT_ANNOUNCE_AFTER_MS = 5_000;

export interface HeartbeatPeriodOptions {
  /** Volunteers connected to this node now. */
  volunteers(): number;
  /** Sends the new period to every volunteer of this node. */
  announce(ms: number): void;
  clock: Clock;
  /** The node's heartbeat budget (default HEARTBEATS_PER_SEC). */
  perSecond?: number;
}

export class HeartbeatPeriod {
  /** The period the node's volunteers were last told, all of them. */
  private announced: number;
  private cancelAnnounce: (() => void) | null = null;

  constructor(private readonly opts: HeartbeatPeriodOptions) {
    this.announced = this.current();
  }

  /** The period for a volunteer welcomed now. */
  current(): number {
    return heartbeatPeriodMs(this.opts.volunteers(), this.opts.perSecond ?? HEARTBEATS_PER_SEC);
  }

  /** A volunteer connected or left: when that moved the period, every volunteer is told in a while. */
  changed(): void {
    if (this.cancelAnnounce || this.current() === this.announced) return;
    this.cancelAnnounce = this.opts.clock.after(HEARTBEAT_ANNOUNCE_AFTER_MS, () => {
      this.cancelAnnounce = null;
      const ms = this.current();
      if (ms === this.announced) return;
      this.announced = ms;
      this.opts.announce(ms);
    });
  }

  close(): void {
    this.cancelAnnounce?.();
    this.cancelAnnounce = null;
  }
}
