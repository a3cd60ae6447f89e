// Round trips between a job's members, as they measured them on the links of their rounds
// (round:result's rttMs; the collective pings each link as it connects), and the localities they
// imply. Moshpit jobs with regionalGroups lay their grid out by locality (protocol's moshpitGroups,
// localityOf), so the grid's low axes average among members with short round trips and only its high
// axes across. Groups change every sync, so each member meets new peers and the map fills in.
//
// Near or far is read off the measurements, not a fixed number: round trips inside a region and
// across regions differ by a factor (40 ms against 300 ms), while what counts as short differs by
// network. So the measured round trips are sorted and cut at their widest gap in ratio, among cuts
// that leave at least NEAR_SPLIT_SHARE of them on each side; a gap under NEAR_GAP_RATIO is no cut
// (all links alike: one locality). Members joined by near links (union–find) form a locality once
// there are at least a group's worth of them; a member in none yet keeps its region hint.

/** Peers whose round trip a member keeps (the newest measured): bounds the map at N × this. */
export const RTT_PEERS_KEPT = 16;
/** A cut between near and far leaves at least this share of the measured links on each side. */
export const NEAR_SPLIT_SHARE = 0.1;
/** The far side's shortest round trip is at least this many times the near side's longest. */
export const NEAR_GAP_RATIO = 1.5;

export class PeerDistances {
  /** Per member, its peers' round trips (ms), the newest last. */
  private readonly rtt = new Map<string, Map<string, number>>();
  private cached: { members: readonly string[]; minCluster: number; localities: Map<string, string> } | null = null;

  /** `from` measured these round trips; peers it cannot have been linked to are ignored by the caller. */
  record(from: string, rtts: Record<string, number>): void {
    for (const [peer, ms] of Object.entries(rtts)) {
      if (peer === from || !Number.isFinite(ms) || ms < 0) continue;
      this.keep(from, peer, ms);
      this.keep(peer, from, ms);
    }
    this.cached = null;
  }

  private keep(a: string, b: string, ms: number): void {
    let peers = this.rtt.get(a);
    if (!peers) this.rtt.set(a, (peers = new Map()));
    // Either end's measurement of the link: the smaller (the other waited behind frames).
    const was = peers.get(b);
    peers.delete(b);
    peers.set(b, Math.min(ms, was ?? Infinity));
    if (peers.size > RTT_PEERS_KEPT) peers.delete(peers.keys().next().value!);
  }

  /** A member left the job: its measurements go (a later volunteer is a new id). */
  forget(member: string): void {
    const peers = this.rtt.get(member);
    if (!peers) return;
    for (const p of peers.keys()) this.rtt.get(p)?.delete(member);
    this.rtt.delete(member);
    this.cached = null;
  }

  /** The round trip measured between `a` and `b` (ms), if either end measured it and kept it. */
  rttMs(a: string, b: string): number | undefined {
    return this.rtt.get(a)?.get(b) ?? this.rtt.get(b)?.get(a);
  }

  /** The round trip below which a link is near (ms), or null when the links measured show no gap. */
  nearThresholdMs(): number | null {
    const all: number[] = [];
    for (const [a, peers] of this.rtt) for (const [b, ms] of peers) if (a < b || !this.rtt.get(b)?.has(a)) all.push(ms);
    all.sort((x, y) => x - y);
    const minSide = Math.max(1, Math.ceil(NEAR_SPLIT_SHARE * all.length));
    let best: { ratio: number; at: number } | null = null;
    for (let i = minSide; i <= all.length - minSide; i++) {
      const ratio = all[i] / Math.max(all[i - 1], 0.1);
      if (!best || ratio > best.ratio) best = { ratio, at: i };
    }
    if (!best || best.ratio < NEAR_GAP_RATIO) return null;
    return Math.sqrt(Math.max(all[best.at - 1], 0.1) * all[best.at]);
  }

  /**
   * Each member's locality among `members`: the members it is joined to by near links, named by the
   * smallest id among them, for localities of at least `minCluster` members (smaller ones would each
   * take a run of grid cells of their own). Members in none are absent.
   */
  localities(members: readonly string[], minCluster: number): Map<string, string> {
    const c = this.cached;
    if (c && c.minCluster === minCluster && c.members.length === members.length && c.members.every((m, i) => m === members[i])) return c.localities;
    const out = new Map<string, string>();
    const near = this.nearThresholdMs();
    if (near !== null) {
      const inJob = new Set(members);
      const parent = new Map<string, string>(members.map((m) => [m, m]));
      const find = (x: string): string => {
        let r = x;
        while (parent.get(r) !== r) r = parent.get(r)!;
        for (let y = x; y !== r; ) {
          const next = parent.get(y)!;
          parent.set(y, r);
          y = next;
        }
        return r;
      };
      for (const a of members) {
        for (const [b, ms] of this.rtt.get(a) ?? []) {
          if (ms >= near || !inJob.has(b)) continue;
          const [ra, rb] = [find(a), find(b)];
          // The smaller root stays root: a locality is named by its smallest member id.
          if (ra < rb) parent.set(rb, ra);
          else if (rb < ra) parent.set(ra, rb);
        }
      }
      const size = new Map<string, number>();
      for (const m of members) size.set(find(m), (size.get(find(m)) ?? 0) + 1);
      for (const m of members) if (size.get(find(m))! >= minCluster) out.set(m, find(m));
    }
    this.cached = { members: [...members], minCluster, localities: out };
    return out;
  }
}
