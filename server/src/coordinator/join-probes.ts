// A joiner of a regional Moshpit job measures a few members before its first sync: the server names
// them in its assignment (`probePeers`), relays the WebRTC signaling between the two ends outside any
// round (`signal` with PROBE_ROUND_ID), and takes the joiner's `peers:rtt` report for those members
// only. Without it, a joiner's first groups are laid out blind (it has no measured links yet), and
// its locality is learnt only from the ring neighbours of its first few syncs.

/**
 * Members a joiner measures. Eight members of two sites joining together in a random order, each
 * measuring half this many latest joiners and half at random: with 4, a site's own links left it in
 * two pieces in 5% of orders (a Python count over 100,000 orders); with 6, in none.
 */
export const PROBE_PEERS = 6;
/** The probe's links may be signaled for this long after the assignment (ms); the report is taken once, within it. */
export const PROBE_WINDOW_MS = 60_000;

export class JoinProbes {
  /** Joiner → the members it was told to measure, and until when. */
  private readonly open = new Map<string, { peers: Set<string>; until: number }>();

  constructor(private readonly now: () => number) {}

  /**
   * Names up to PROBE_PEERS of `members` (in join order) for `joiner` to measure: the latest joiners,
   * who may not be placed yet (so members joining together measure each other and form their
   * locality), and the rest drawn by `shuffle` from everyone else (ties to the placed members).
   */
  assign(joiner: string, members: readonly string[], shuffle: (ids: string[]) => string[]): string[] {
    const others = members.filter((id) => id !== joiner);
    const latest = others.slice(-Math.ceil(PROBE_PEERS / 2));
    const peers = [...latest, ...shuffle(others.slice(0, others.length - latest.length)).slice(0, PROBE_PEERS - latest.length)];
    if (peers.length) this.open.set(joiner, { peers: new Set(peers), until: this.now() + PROBE_WINDOW_MS });
    return peers;
  }

  /** Lets `joiner` link to `peers` too (for PROBE_WINDOW_MS from now), beside any it was told to measure. */
  permit(joiner: string, peers: readonly string[]): void {
    const p = this.live(joiner) ?? { peers: new Set<string>(), until: 0 };
    for (const peer of peers) p.peers.add(peer);
    p.until = Math.max(p.until, this.now() + PROBE_WINDOW_MS);
    this.open.set(joiner, p);
  }

  /** Whether `a` and `b` may signal a probe link: one is a joiner whose open probe names the other. */
  linked(a: string, b: string): boolean {
    return this.names(a, b) || this.names(b, a);
  }

  /** The joiner's report, kept to the members it was named (null: no open probe); the probe closes. */
  take(joiner: string, rtts: Record<string, number>): Record<string, number> | null {
    const p = this.live(joiner);
    if (!p) return null;
    this.open.delete(joiner);
    return Object.fromEntries(Object.entries(rtts).filter(([peer]) => p.peers.has(peer)));
  }

  /** A member left: its own probe closes, and nobody probes it any more. */
  forget(id: string): void {
    this.open.delete(id);
    for (const p of this.open.values()) p.peers.delete(id);
  }

  private names(joiner: string, peer: string): boolean {
    return this.live(joiner)?.peers.has(peer) ?? false;
  }

  private live(joiner: string) {
    const p = this.open.get(joiner);
    if (p && p.until < this.now()) this.open.delete(joiner);
    return p && p.until >= this.now() ? p : undefined;
  }
}
