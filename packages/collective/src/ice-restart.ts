// ICE restart for a link whose ICE state went `disconnected` (or `failed`): a network hiccup, a NAT
// mapping lost, a Wi-Fi switch. The link is not declared lost at once: the side that sent the offer
// restarts ICE (new credentials, fresh candidates, RFC 8445 §9) through the usual signaling, and the
// other side asks it to; attempts repeat every `retryMs` until ICE is connected again, and the link
// is given up only if it is still down `boundMs` after it went down. Runtime-neutral: the transport
// passes what a restart does on its side.
import type { Clock } from '@tabfleet/protocol';

export interface IceWatchOptions {
  clock: Clock;
  /** How long a link may stay down, restarts and all, before it is given up. */
  boundMs: number;
  /** How often a restart is tried again while the link is still down. */
  retryMs: number;
  /** One restart attempt: a new offer with iceRestart (offering side) or a request for one (answering side). */
  restart(): void;
  /** The link stayed down past the bound. */
  giveUp(reason: string): void;
}

export class IceWatch {
  /** Restart attempts so far, over the link's life. */
  restarts = 0;
  /** Times the link came back after going down. */
  recoveries = 0;
  private downState: string | null = null;
  /** Restart attempts since the link last went down. */
  private attemptsThisTime = 0;
  private lastAttemptAt = -Infinity;
  private cancelBound: (() => void) | null = null;
  private cancelRetry: (() => void) | null = null;

  constructor(private readonly opts: IceWatchOptions) {}

  get down(): boolean {
    return this.downState !== null;
  }

  /** The link's ICE connection state changed. */
  state(s: string): void {
    if (s === 'connected' || s === 'completed') return this.up();
    if (s !== 'disconnected' && s !== 'failed') return; // 'checking' while a restart runs: keep waiting
    const first = this.downState === null;
    this.downState = s;
    if (!first) return;
    this.attemptsThisTime = 0;
    this.cancelBound = this.opts.clock.after(this.opts.boundMs, () => {
      this.stop();
      this.opts.giveUp(`ICE ${this.downState ?? 'down'} for ${this.opts.boundMs} ms; ${this.attemptsThisTime} ICE restart(s) did not bring it back`);
    });
    this.attempt();
  }

  /** The other side asked for a restart (its ICE went down first). */
  requested(): void {
    if (this.opts.clock.now() - this.lastAttemptAt >= this.opts.retryMs) this.attempt();
  }

  stop(): void {
    this.cancelBound?.();
    this.cancelRetry?.();
    this.cancelBound = this.cancelRetry = null;
  }

  private up(): void {
    if (this.downState === null) return;
    this.downState = null;
    this.recoveries++;
    this.stop();
  }

  private attempt(): void {
    this.cancelRetry?.();
    this.restarts++;
    this.attemptsThisTime++;
    this.lastAttemptAt = this.opts.clock.now();
    this.opts.restart();
    this.cancelRetry = this.opts.clock.after(this.opts.retryMs, () => {
      this.cancelRetry = null;
      if (this.down) this.attempt();
    });
  }
}
