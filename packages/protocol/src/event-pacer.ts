// A client's half of the server's per-socket token bucket (LIMITS.eventsPerSecond and eventBurst,
// server/src/sockets/guard.ts). The server refuses an event over that budget, and a refused
// `round:ready` leaves its member out of every sync after: three simulated volunteers syncing 40
// times a second (ready, result and metrics each sync) ran out of budget, and their job of three never
// ended. Events over this pacer's budget wait their turn, in the order they were sent. It spends less
// than the server allows (80% of the rate, half the burst), so events that arrive bunched (a busy
// event loop, a slow link) still fit the server's bucket: up to a second of such jitter.
import type { Clock } from './clock';
import { LIMITS } from './limits';

export const PACED_EVENTS_PER_SECOND = LIMITS.eventsPerSecond * 0.8;
export const PACED_EVENT_BURST = LIMITS.eventBurst / 2;

export class EventPacer {
  private tokens: number;
  private last: number;
  private readonly waiting: (() => void)[] = [];
  private cancelTimer: (() => void) | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly ratePerSec = PACED_EVENTS_PER_SECOND,
    private readonly burst = PACED_EVENT_BURST,
  ) {
    this.tokens = burst;
    this.last = clock.now();
  }

  /** Events waiting for their turn. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Runs `send` at once when the budget allows and nothing waits before it, else in its turn. */
  send(send: () => void): void {
    if (this.waiting.length === 0 && this.take()) return send();
    this.waiting.push(send);
    this.schedule();
  }

  /** `send` in its turn (an ack's timeout then runs from when the event went out); settles as it does. */
  sendWithAck<T>(send: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) =>
      this.send(() => {
        try {
          send().then(resolve, reject);
        } catch (e) {
          reject(e);
        }
      }),
    );
  }

  private take(): boolean {
    const t = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.ratePerSec);
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** One timer at a time, for when the next token is due. */
  private schedule(): void {
    if (this.cancelTimer) return;
    const ms = Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.ratePerSec));
    this.cancelTimer = this.clock.after(ms, () => {
      this.cancelTimer = null;
      while (this.waiting.length > 0 && this.take()) this.waiting.shift()!();
      if (this.waiting.length > 0) this.schedule();
    });
  }
}
