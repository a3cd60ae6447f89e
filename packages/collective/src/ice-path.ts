// The path a WebRTC link took, read from its RTCPeerConnection's getStats(): the selected ICE
// candidate pair (the transport's selectedCandidatePairId; else, as Firefox reports it, the pair
// marked `selected`; else a nominated pair that succeeded), each end's candidate type, the relayed
// candidate's protocol to its TURN server, and the pair's current round trip. Pure, so it is tested on
// recorded reports of Chromium and of @roamhq/wrtc (which fills the same fields, ice-path.test.ts).
import { CANDIDATE_TYPES, MAX_LINK_RTT_MS, RELAY_PROTOCOLS, type CandidateType, type LinkPath, type RelayProtocol } from '@tabfleet/protocol';

/** One entry of an RTCStatsReport, with the fields read here (all optional: browsers differ). */
export interface StatsEntry {
  id: string;
  type: string;
  selectedCandidatePairId?: string;
  localCandidateId?: string;
  remoteCandidateId?: string;
  state?: string;
  nominated?: boolean;
  selected?: boolean;
  currentRoundTripTime?: number;
  totalRoundTripTime?: number;
  responsesReceived?: number;
  candidateType?: string;
  relayProtocol?: string;
  url?: string;
}

/** An RTCStatsReport: a Map by id in browsers and in wrtc. */
export interface StatsReportLike {
  forEach(cb: (entry: StatsEntry) => void): void;
}

/** Older Chromium names candidate types as in the first stats drafts. */
const LEGACY_TYPES: Record<string, CandidateType> = { serverreflexive: 'srflx', peerreflexive: 'prflx', relayed: 'relay' };

function candidateType(t: string | undefined): CandidateType | null {
  if (t === undefined) return null;
  if ((CANDIDATE_TYPES as readonly string[]).includes(t)) return t as CandidateType;
  return LEGACY_TYPES[t] ?? null;
}

/** The relayed candidate's protocol to TURN: its `relayProtocol`, else read from its TURN server's URL. */
function relayProtocolOf(c: StatsEntry): RelayProtocol | undefined {
  if (c.relayProtocol && (RELAY_PROTOCOLS as readonly string[]).includes(c.relayProtocol)) return c.relayProtocol as RelayProtocol;
  if (!c.url) return undefined;
  if (/^turns:/i.test(c.url)) return 'tls';
  return /[?&]transport=tcp\b/i.test(c.url) ? 'tcp' : 'udp';
}

function selectedPair(byId: Map<string, StatsEntry>): StatsEntry | undefined {
  const entries = [...byId.values()];
  for (const t of entries) {
    if (t.type !== 'transport' || !t.selectedCandidatePairId) continue;
    const pair = byId.get(t.selectedCandidatePairId);
    if (pair) return pair;
  }
  const pairs = entries.filter((e) => e.type === 'candidate-pair');
  return pairs.find((p) => p.selected === true) ?? pairs.find((p) => p.nominated === true && p.state === 'succeeded');
}

/** The round trip of the pair (ms): its current one, else its mean so far; null before any response. */
function rttMsOf(pair: StatsEntry): number | null {
  let seconds: number | undefined;
  if (typeof pair.currentRoundTripTime === 'number') seconds = pair.currentRoundTripTime;
  else if (typeof pair.totalRoundTripTime === 'number' && pair.responsesReceived) seconds = pair.totalRoundTripTime / pair.responsesReceived;
  if (seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return null;
  return Math.min(MAX_LINK_RTT_MS, Math.round(seconds * 1000 * 10) / 10);
}

/** The path of the link to `peer` in this report; null when no pair is selected yet or its candidates are missing. */
export function linkPathOf(peer: string, report: StatsReportLike): LinkPath | null {
  const byId = new Map<string, StatsEntry>();
  report.forEach((e) => byId.set(e.id, e));
  const pair = selectedPair(byId);
  if (!pair?.localCandidateId || !pair.remoteCandidateId) return null;
  const localCandidate = byId.get(pair.localCandidateId);
  const local = candidateType(localCandidate?.candidateType);
  const remote = candidateType(byId.get(pair.remoteCandidateId)?.candidateType);
  if (!localCandidate || !local || !remote) return null;
  const relayProtocol = local === 'relay' ? relayProtocolOf(localCandidate) : undefined;
  return { peer, local, remote, ...(relayProtocol ? { relayProtocol } : {}), rttMs: rttMsOf(pair) };
}
