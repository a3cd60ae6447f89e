// The network path of a member's WebRTC links: the ICE candidate pair each link selected (RFC 8445's
// host, server-reflexive, peer-reflexive, relayed) and its round trip, as the member read them from
// getStats() (collective's ice-path.ts). Members report them with `links:paths`; the server keeps
// each member's latest report, and the worker table, the job summary and /metrics show them.
import { z } from 'zod';
import { idSchema } from './jobs';

export const CANDIDATE_TYPES = ['host', 'srflx', 'prflx', 'relay'] as const;
export type CandidateType = (typeof CANDIDATE_TYPES)[number];
/** How a relayed candidate reaches its TURN server. */
export const RELAY_PROTOCOLS = ['udp', 'tcp', 'tls'] as const;
export type RelayProtocol = (typeof RELAY_PROTOCOLS)[number];

/** Links one member reports at once: its ring neighbours or its group (a group has at most maxGroupSize). */
export const MAX_LINK_PATHS = 64;
/** A round trip above this is no measurement of a link (ms). */
export const MAX_LINK_RTT_MS = 60_000;

export const linkPathSchema = z.strictObject({
  /** The member at the other end. */
  peer: idSchema,
  /** The selected pair's candidate on this member's side, and on the peer's as this member saw it. */
  local: z.enum(CANDIDATE_TYPES),
  remote: z.enum(CANDIDATE_TYPES),
  /** This member's relayed candidate's way to its TURN server (only when `local` is relay). */
  relayProtocol: z.enum(RELAY_PROTOCOLS).optional(),
  /** The pair's current round trip (STUN consent checks), null before one was measured. */
  rttMs: z.number().finite().min(0).max(MAX_LINK_RTT_MS).nullable(),
}).refine((l) => l.relayProtocol === undefined || l.local === 'relay', { message: 'relayProtocol is for a relayed local candidate' });
export type LinkPath = z.output<typeof linkPathSchema>;

export const linkPathsSchema = z.array(linkPathSchema).max(MAX_LINK_PATHS)
  .refine((ls) => new Set(ls.map((l) => l.peer)).size === ls.length, { message: 'one path per peer' });

/**
 * What a link goes over, the farthest rung of the ladder either end took: relayed through TURN when
 * either end's candidate is relayed, else reflexive (a NAT's mapping: srflx from STUN, prflx learned
 * from a connectivity check) when either is, else host (same network).
 */
export const PATH_KINDS = ['host', 'srflx', 'prflx', 'relay'] as const;
export type PathKind = (typeof PATH_KINDS)[number];

const RANK: Record<CandidateType, number> = { host: 0, prflx: 1, srflx: 2, relay: 3 };

export function pathKindOf(...candidates: CandidateType[]): PathKind {
  return candidates.reduce<CandidateType>((a, b) => (RANK[b] > RANK[a] ? b : a), 'host');
}

/** The job's links among its members, each counted once: how many, direct or relayed, and by kind. */
export interface LinkSummary {
  total: number;
  direct: number;
  relayed: number;
  /** relayed ÷ total; null with no links. */
  relayedShare: number | null;
  byKind: Record<PathKind, number>;
  /** Relayed links by how their relaying end reaches TURN (an end that did not say is not counted). */
  relayProtocols: Record<RelayProtocol, number>;
}

/**
 * A member's links in words: "direct (host)", "relayed (TURN over tcp)", or a mix. `reverse` gives the
 * peer's report of the same link, when it has one: each end knows its own candidate best.
 */
export function describeLinks(links: readonly LinkPath[], reverse: (peer: string) => LinkPath | undefined = () => undefined): string {
  if (!links.length) return '—';
  const kinds = links.map((l) => {
    const r = reverse(l.peer);
    return { kind: pathKindOf(l.local, l.remote, ...(r ? [r.local, r.remote] : [])), proto: l.relayProtocol ?? r?.relayProtocol };
  });
  const relayed = kinds.filter((k) => k.kind === 'relay');
  const direct = kinds.filter((k) => k.kind !== 'relay');
  const protos = [...new Set(relayed.map((k) => k.proto).filter((p) => p !== undefined))];
  const relayedText = `relayed (TURN${protos.length ? ` over ${protos.join(', ')}` : ''})`;
  const directText = `direct (${[...new Set(direct.map((k) => k.kind))].join(', ')})`;
  if (!relayed.length) return directText;
  if (!direct.length) return relayedText;
  return `${direct.length} ${directText}, ${relayed.length} ${relayedText}`;
}

/**
 * The links among members, each counted once though both ends report it: its kind is the farthest
 * rung either report names (each end knows its own candidate best: a relayed end shows as relay or
 * prflx to its peer), its relay protocols those the relaying ends said. Links to non-members are left out.
 */
export function summarizeLinks(reports: Iterable<{ volunteerId: string; links: readonly LinkPath[] }>, isMember: (id: string) => boolean): LinkSummary {
  const pairs = new Map<string, { candidates: CandidateType[]; protocols: Set<RelayProtocol> }>();
  for (const r of reports) {
    if (!isMember(r.volunteerId)) continue;
    for (const l of r.links) {
      if (l.peer === r.volunteerId || !isMember(l.peer)) continue;
      const key = r.volunteerId < l.peer ? `${r.volunteerId}\n${l.peer}` : `${l.peer}\n${r.volunteerId}`;
      const pair = pairs.get(key) ?? { candidates: [], protocols: new Set() };
      pairs.set(key, pair);
      pair.candidates.push(l.local, l.remote);
      if (l.relayProtocol) pair.protocols.add(l.relayProtocol);
    }
  }
  const byKind: Record<PathKind, number> = { host: 0, srflx: 0, prflx: 0, relay: 0 };
  const relayProtocols: Record<RelayProtocol, number> = { udp: 0, tcp: 0, tls: 0 };
  for (const p of pairs.values()) {
    byKind[pathKindOf(...p.candidates)]++;
    for (const proto of p.protocols) relayProtocols[proto]++;
  }
  const total = pairs.size;
  return { total, direct: total - byKind.relay, relayed: byKind.relay, relayedShare: total ? byKind.relay / total : null, byKind, relayProtocols };
}
