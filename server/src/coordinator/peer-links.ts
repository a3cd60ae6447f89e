// Who a member may reach and how far it is: WebRTC signaling relayed only between the peers a round
// links (ring neighbours, group members), a joiner's probe peers (join-probes.ts) or the members it may
// load the model from (model-loads.ts), and the round trips members measured to those peers, which
// give a regional Moshpit job the localities it lays its groups out by (peer-distances.ts). And the
// ICE servers members' links gather through, TURN credentials renewed while they are members
// (ice-renewals.ts). And the paths members' links took (direct or relayed: link-paths.ts).
import { PROBE_ROUND_ID, ProtocolError, type Assignment, type VolunteerEventParsed } from '@tabfleet/protocol';
import { homeRingPeers } from './home-rings';
import { IceRenewals } from './ice-renewals';
import { JoinProbes } from './join-probes';
import { LinkPaths } from './link-paths';
import type { MemberBook } from './members';
import { PeerDistances } from './peer-distances';
import type { ActiveRound } from './round';
import { shuffled } from './shuffle';
import type { CoordinatorDeps } from './types';

export interface PeerLinksHost {
  readonly jobId: string;
  readonly deps: CoordinatorDeps;
  readonly members: MemberBook;
  /** The worker table changed (a member reported its links' paths). */
  changedWorkers(): void;
}

export class PeerLinks {
  /** Round trips members measured to each other (regional Moshpit jobs lay their groups out by them). */
  private readonly distances = new PeerDistances();
  private readonly probes: JoinProbes;
  /** Joiners and the members they may load the job's model from (model-loads.ts), signaled as probes. */
  private readonly loadLinks: JoinProbes;
  private readonly ice: IceRenewals;
  /** The path each member's links took (direct or relayed), as the members report them. */
  readonly paths: LinkPaths;

  constructor(private readonly host: PeerLinksHost) {
    this.paths = new LinkPaths(host.members);
    this.probes = new JoinProbes(() => host.deps.clock.now());
    this.loadLinks = new JoinProbes(() => host.deps.clock.now());
    this.ice = new IceRenewals(host.jobId, host.deps, (id) => host.members.has(id));
  }

  /** The joiner's ICE servers (`iceServers` of its assignment, when the server has any); renewals start. */
  issueIce(volunteerId: string, assignment: Assignment): void {
    const iceServers = this.ice.issue(volunteerId);
    if (iceServers) assignment.iceServers = iceServers;
  }

  /** This node lets go of the job: no more renewals from here. */
  release(): void {
    this.ice.stopAll();
  }

  /** Regional jobs: a joiner measures its round trips to a few members (`probePeers` of its assignment). */
  probeJoiner(volunteerId: string, assignment: Assignment): void {
    const probePeers = this.probes.assign(volunteerId, [...this.host.members.ids()], shuffled);
    if (probePeers.length) assignment.probePeers = probePeers;
    for (const peer of probePeers) this.host.deps.toVolunteer(peer, 'peers:probe', { jobId: this.host.jobId, peer: volunteerId });
  }

  /**
   * Up to `count` of `holders` (members holding the model `joiner` is to load), drawn at random, whom
   * the joiner may now link to and ask for it; each is told to expect the link (`peers:probe`).
   */
  loadPeers(joiner: string, holders: readonly string[], count: number): string[] {
    const peers = shuffled(holders.filter((id) => id !== joiner)).slice(0, count);
    if (!peers.length) return [];
    this.loadLinks.permit(joiner, peers);
    for (const peer of peers) this.host.deps.toVolunteer(peer, 'peers:probe', { jobId: this.host.jobId, peer: joiner });
    return peers;
  }

  forget(volunteerId: string): void {
    this.distances.forget(volunteerId);
    this.probes.forget(volunteerId);
    this.loadLinks.forget(volunteerId);
    this.ice.stop(volunteerId);
    this.paths.forget(volunteerId);
  }

  /** Relays a signal to a peer `from` is linked to: in `round` (null: no round runs), or as a probe. */
  signal(from: string, e: VolunteerEventParsed<'signal'>, round: () => ActiveRound): object {
    if (e.roundId === PROBE_ROUND_ID) {
      if (!this.probes.linked(from, e.to) && !this.loadLinks.linked(from, e.to)) {
        throw new ProtocolError('not_neighbour', `${e.to} and ${from} are not a joiner and a member it was told to measure or load from`);
      }
      this.host.deps.toVolunteer(e.to, 'signal', { jobId: this.host.jobId, roundId: PROBE_ROUND_ID, from, data: e.data });
      return {};
    }
    const r = round();
    // A ring member talks to its two neighbours; a group member to every other member.
    const ring = r.groups ? r.groups.groups[r.groups.groupOf(from)!] : r.members;
    const peers = r.mode === 'ring' ? linkedIn(r, ring, from) : r.mode === 'group' ? r.members.filter((id) => id !== from) : [];
    if (!peers.includes(e.to)) {
      throw new ProtocolError('not_neighbour', `${e.to} is not a ${r.mode === 'group' ? 'group member' : 'ring neighbour'} of ${from} in round ${r.roundId}`);
    }
    this.host.deps.toVolunteer(e.to, 'signal', { jobId: this.host.jobId, roundId: e.roundId, from, data: e.data });
    return {};
  }

  /** A joiner's round trips to its probe peers (join-probes.ts): kept to those, once. */
  probeReport(volunteerId: string, e: VolunteerEventParsed<'peers:rtt'>): object {
    const kept = this.probes.take(volunteerId, e.rttMs);
    if (!kept) throw new ProtocolError('conflict', 'no probe is open: peers:rtt answers the probePeers of an assignment, once');
    this.distances.record(volunteerId, kept);
    return { kept: Object.keys(kept).length };
  }

  /** A member's `links:paths`: replaces its last report (link-paths.ts). */
  reportPaths(volunteerId: string, e: VolunteerEventParsed<'links:paths'>): object {
    const ack = this.paths.report(volunteerId, e.links);
    this.host.changedWorkers();
    return ack;
  }

  /** Round trips a member reported with its result: kept only to the peers it was linked to in `r` (its ring neighbours). */
  roundTrips(r: ActiveRound, volunteerId: string, rttMs: Record<string, number>): void {
    const g = r.groups?.groupOf(volunteerId);
    const ring = r.groups && g !== undefined ? r.groups.groups[g] : r.members;
    const neighbours = linkedIn(r, ring, volunteerId);
    this.distances.record(volunteerId, Object.fromEntries(Object.entries(rttMs).filter(([peer]) => peer !== volunteerId && neighbours.includes(peer))));
  }

  /**
   * Regional Moshpit jobs: a member's locality is the near cluster its measured round trips put it in
   * (peer-distances.ts; clusters of at least half a group, since each locality starts a run of a
   * group's grid cells and smaller ones would leave most of theirs empty), else its region hint.
   */
  localityOf(members: string[], minCluster: number): (id: string) => string | undefined {
    const near = this.distances.localities(members, minCluster);
    return (id) => {
      const cluster = near.get(id);
      if (cluster !== undefined) return `near:${cluster}`;
      const hint = this.host.members.get(id)?.capabilities.region;
      return hint === undefined ? undefined : `region:${hint}`;
    };
  }
}

/** Whom a ring member links to: its ring neighbours, or in a round by homes its HomeRing peers. */
function linkedIn(r: ActiveRound, ring: readonly string[], id: string): string[] {
  return r.homes ? homeRingPeers(r.homes, id) : ringNeighbours(ring, id);
}

/** The members a member may signal: its left and right neighbours in the ring. */
export function ringNeighbours(ring: readonly string[], id: string): string[] {
  const i = ring.indexOf(id);
  if (i < 0 || ring.length < 2) return [];
  return [...new Set([ring[(i + ring.length - 1) % ring.length], ring[(i + 1) % ring.length]])];
}
