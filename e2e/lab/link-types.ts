// Which candidate pair each of a tab's live peer links has selected (host, srflx, prflx, relay), read
// from the page's own RTCPeerConnections with getStats(). A small wrapper installed before the page's
// scripts keeps them; the lead can swap this file for the runtime's own report of the selected pair.
import type { Page } from 'playwright-core';

export interface SelectedPair {
  local: string;
  remote: string;
  localAddress: string;
  remoteAddress: string;
}

/** An init script: the page's RTCPeerConnections are kept where selectedPairs can read them. */
export function keepPeerConnections(): void {
  // No named function inside (not even `const f = () => …`): the script is sent as its source text, and tsx
  // would wrap a named one in a helper (__name) the page lacks.
  const Native = RTCPeerConnection;
  const kept: RTCPeerConnection[] = [];
  (window as unknown as { __labPeerConnections: RTCPeerConnection[] }).__labPeerConnections = kept;
  (window as { RTCPeerConnection: unknown }).RTCPeerConnection = function (config?: RTCConfiguration) {
    const pc = new Native(config);
    kept.push(pc);
    return pc;
  };
  window.RTCPeerConnection.prototype = Native.prototype;
}

/**
 * The pair each connected link uses now (keepPeerConnections must be the page's init script). ICE may
 * first select a pair that answered early and move to a better one once its checks succeed, so this
 * reads the links as they are when asked, not as they were when they opened.
 */
export function selectedPairs(page: Page): Promise<SelectedPair[]> {
  return page.evaluate(async () => {
    const pcs = (window as unknown as { __labPeerConnections: RTCPeerConnection[] }).__labPeerConnections;
    const out: SelectedPair[] = [];
    for (const pc of pcs) {
      if (pc.connectionState !== 'connected') continue;
      const stats = await pc.getStats();
      const all = [...stats.values()] as Array<Record<string, string> & { nominated?: boolean }>;
      const transport = all.find((s) => s.type === 'transport' && s.selectedCandidatePairId);
      const pair = transport ? stats.get(transport.selectedCandidatePairId) : all.find((s) => s.type === 'candidate-pair' && s.nominated && s.state === 'succeeded');
      if (!pair) continue;
      const local = stats.get(pair.localCandidateId);
      const remote = stats.get(pair.remoteCandidateId);
      out.push({ local: local?.candidateType, remote: remote?.candidateType, localAddress: `${local?.address}:${local?.port}`, remoteAddress: `${remote?.address}:${remote?.port}` });
    }
    return out;
  });
}

/** A link goes through a TURN relay when either end of its selected pair is a relay candidate. */
export const isRelayed = (p: SelectedPair) => p.local === 'relay' || p.remote === 'relay';
