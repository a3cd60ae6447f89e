// WebRTC signaling as a simulated volunteer of the coordinator benchmark does it: the same messages,
// through the server, as packages/collective/src/webrtc.ts sends for a real tab (simple-peer with
// trickle ICE), without a peer connection behind them. A link to a ring neighbour is opened once and
// kept across rounds, like a real tab's: the member whose id sorts first sends the offer and one host
// candidate, the other answers with its answer and candidate, and each side holds the link as open
// once it has the other side's description and candidate. Envelopes are { v, cid, sig } as there.

/** A data-channel-only session description of about the size Chromium writes (≈ 600 bytes). */
function sdp(kind: 'offer' | 'answer', cid: string): string {
  return [
    'v=0', `o=- ${cid} 2 IN IP4 127.0.0.1`, 's=-', 't=0 0', 'a=group:BUNDLE 0', 'a=extmap-allow-mixed', 'a=msid-semantic: WMS',
    'm=application 9 UDP/DTLS/SCTP webrtc-datachannel', 'c=IN IP4 0.0.0.0', `a=ice-ufrag:${cid.slice(0, 4)}`, `a=ice-pwd:${cid.padEnd(24, '0')}`,
    'a=ice-options:trickle',
    'a=fingerprint:sha-256 6B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08',
    `a=setup:${kind === 'offer' ? 'actpass' : 'active'}`, 'a=mid:0', 'a=sctp-port:5000', 'a=max-message-size:262144', '',
  ].join('\r\n');
}

function candidate(cid: string): unknown {
  return { candidate: { candidate: `candidate:${cid.slice(0, 9)} 1 udp 2113937151 ${cid}.local 54321 typ host generation 0 network-cost 999`, sdpMLineIndex: 0, sdpMid: '0' } };
}

/** Whom a member may signal: its left and right ring neighbours (as the server's ringNeighbours in job-coordinator.ts). */
export function ringNeighbours(ring: readonly string[], id: string): string[] {
  const i = ring.indexOf(id);
  if (i < 0 || ring.length < 2) return [];
  return [...new Set([ring[(i + ring.length - 1) % ring.length], ring[(i + 1) % ring.length]])];
}

interface Envelope {
  v: 1;
  cid: string;
  sig: { type?: 'offer' | 'answer'; sdp?: string; candidate?: unknown };
}

interface Link {
  cid: string;
  /** Signals of this link's attempt received from the neighbour (description and candidate). */
  received: number;
}

export class NeighbourLinks {
  private readonly links = new Map<string, Link>();
  private waiting: { peers: string[]; done: () => void } | null = null;
  private attempts = 0;

  /** `send` emits `signal` { to, data } in the member's current round. */
  constructor(private readonly self: () => string, private readonly send: (to: string, data: Envelope) => void) {}

  /** Opens links to the neighbours not linked yet; `done` runs once every neighbour's link is open. */
  connect(neighbours: string[], done: () => void): void {
    for (const peer of neighbours) {
      if (this.links.has(peer) || this.self() > peer) continue; // the other side offers
      const cid = `${this.self()}-${++this.attempts}`;
      this.links.set(peer, { cid, received: 0 });
      this.send(peer, { v: 1, cid, sig: { type: 'offer', sdp: sdp('offer', cid) } });
      this.send(peer, { v: 1, cid, sig: candidate(cid) as Envelope['sig'] });
    }
    this.waiting = { peers: neighbours, done };
    this.check();
  }

  /** A `signal` relayed by the server; malformed envelopes are ignored, as the real transport does. */
  onSignal(from: string, data: unknown): void {
    const e = data as Envelope;
    if (!e || e.v !== 1 || typeof e.cid !== 'string' || !e.sig) return;
    let link = this.links.get(from);
    if (e.sig.type === 'offer') {
      // A new attempt from the initiator replaces whatever this side had.
      link = { cid: e.cid, received: 0 };
      this.links.set(from, link);
      this.send(from, { v: 1, cid: e.cid, sig: { type: 'answer', sdp: sdp('answer', e.cid) } });
      this.send(from, { v: 1, cid: e.cid, sig: candidate(e.cid) as Envelope['sig'] });
    }
    if (!link || link.cid !== e.cid) return; // an older attempt's signal
    link.received++;
    this.check();
  }

  isOpen(peer: string): boolean {
    return (this.links.get(peer)?.received ?? 0) >= 2;
  }

  /** After a disconnect the server sees a new volunteer: no link survives. */
  reset(): void {
    this.links.clear();
    this.waiting = null;
  }

  private check(): void {
    const w = this.waiting;
    if (!w || !w.peers.every((p) => this.isOpen(p))) return;
    this.waiting = null;
    w.done();
  }
}
