// Signaling: how two tabs exchange the SDP offers/answers and ICE candidates that open a WebRTC link.
// In production the coordinator relays `signal` events between current ring neighbours
// ({ to, data } in, { from, data } out); tests use LocalSignalingHub. Browser-safe (no Node globals).

export interface Signaler {
  /** Sends opaque signaling data to peer `to` (the relay adds who it is from). */
  send(to: string, data: unknown): void;
  /** Signaling data addressed to this member. Returns an unsubscribe function. */
  onSignal(handler: (from: string, data: unknown) => void): () => void;
}

/**
 * An in-process relay: every member gets a Signaler; messages are delivered asynchronously and in
 * order, optionally through a JSON round trip (as a real relay would) and only between allowed pairs.
 */
export class LocalSignalingHub {
  private handlers = new Map<string, Set<(from: string, data: unknown) => void>>();
  readonly counters = { relayed: 0, refused: 0 };

  constructor(private readonly opts: { allow?: (from: string, to: string) => boolean; json?: boolean } = {}) {}

  signaler(id: string): Signaler {
    return {
      send: (to, data) => {
        if (this.opts.allow && !this.opts.allow(id, to)) {
          this.counters.refused++;
          return;
        }
        const payload = this.opts.json === false ? data : JSON.parse(JSON.stringify(data));
        this.counters.relayed++;
        setTimeout(() => {
          for (const h of this.handlers.get(to) ?? []) h(id, payload);
        }, 0);
      },
      onSignal: (handler) => {
        let set = this.handlers.get(id);
        if (!set) this.handlers.set(id, (set = new Set()));
        set.add(handler);
        return () => set.delete(handler);
      },
    };
  }
}
