// Hierarchical ring rounds by locality: members the server sees at one address (one NAT or LAN: a
// home) sum over their LAN first and one of them speaks for the home in the ring among homes
// (collective's HomeRing), so a home's uplink carries one member's ring traffic, not one per tab.
import type { JobSpec } from '@tabfleet/protocol';

/**
 * Whether a ring round of this job may go by homes: trusted rings of dense payloads (DGC's sparse
 * allgather stays flat) in `homeRings` jobs, on a server that tells addresses apart (with
 * --network-prefix off every volunteer is taken for this machine's, and addresses say nothing).
 */
export function homeRingsApply(spec: JobSpec, addressesMeanHomes: boolean): boolean {
  return addressesMeanHomes && spec.homeRings && spec.trust === 'trusted' && spec.compression === 'none';
}

/**
 * The members (in ring order) grouped by address, each home in the order of its first member and
 * led by it; a member without a known address is a home of one. Null when no two share a home: the
 * round is then a flat ring.
 */
export function homesOf(members: readonly { volunteerId: string; address?: string }[]): string[][] | null {
  const byAddress = new Map<string, string[]>();
  const homes: string[][] = [];
  for (const { volunteerId: id, address } of members) {
    let home = address === undefined ? undefined : byAddress.get(address);
    if (!home) {
      home = [];
      homes.push(home);
      if (address !== undefined) byAddress.set(address, home);
    }
    home.push(id);
  }
  return homes.some((h) => h.length > 1) ? homes : null;
}

/**
 * Whom a member of a ring round by homes links to (and may signal): its neighbours in its home's ring
 * and, as its home's leader, the neighbouring leaders in the ring among homes (collective's HomeRing).
 */
export function homeRingPeers(homes: readonly (readonly string[])[], id: string): string[] {
  const home = homes.find((h) => h.includes(id));
  if (!home) return [];
  const leaders = home[0] === id ? homes.map((h) => h[0]) : [];
  return [...new Set([...neighbours(home, id), ...neighbours(leaders, id)])];
}

function neighbours(ring: readonly string[], id: string): string[] {
  const i = ring.indexOf(id);
  if (i < 0 || ring.length < 2) return [];
  return [ring[(i + ring.length - 1) % ring.length], ring[(i + 1) % ring.length]];
}
