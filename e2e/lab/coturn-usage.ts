// What coturn's log (--verbose) says about one volunteer's relays: its allocations (sessions whose
// ALLOCATE under the volunteer's REST-API username succeeded), how many of them closed, and the bytes
// relayed between their relay addresses and peers ('peer usage' lines, logged as traffic passes and
// when a session closes; each line counts what passed since the last).
export interface RelayUsage {
  allocations: number;
  closed: number;
  /** Bytes relayed to and from peers, both directions, over all its allocations. */
  peerBytes: number;
}

export function relayUsage(log: string, volunteerId: string): RelayUsage {
  const user = `\\d+:${volunteerId.replace(/[^\w-]/g, '')}`;
  const sessions = (pattern: string) => new Set([...log.matchAll(new RegExp(`session (\\d+): ${pattern}`, 'g'))].map((m) => m[1]));
  const allocated = sessions(`realm <[^>]*> user <${user}>: incoming packet ALLOCATE processed, success`);
  const closed = [...sessions(`closed \\(2nd stage\\), user <${user}>`)].filter((s) => allocated.has(s));
  let peerBytes = 0;
  for (const m of log.matchAll(new RegExp(`peer usage: realm=<[^>]*>, username=<${user}>, rp=\\d+, rb=(\\d+), sp=\\d+, sb=(\\d+)`, 'g'))) {
    peerBytes += Number(m[1]) + Number(m[2]);
  }
  return { allocations: allocated.size, closed: closed.length, peerBytes };
}
