// Who may decide something in an untrusted job (DESIGN "Identities and standing"). A client id costs
// nothing, so nothing rests on counting identities: a new identity has no standing until checks
// confirmed its work (protocol's PROBATION_VERIFIED confirmations, the end of probation), and quorums
// count networks, not sockets — one network prefix (/24 for IPv4, /48 for IPv6 by default) is never
// two seats of a quorum, and never a majority of a job's members.
//
// Off (`NetworkRules` false) where every volunteer is one machine's (npm start, local benchmarks, tests
// that test something else): then every address is its own network and nothing needs standing.
import { onProbation } from '@tabfleet/protocol';
import { isIP } from 'node:net';

/** Prefix lengths that make one network, or false: one machine's volunteers, no network rules. */
export type NetworkRules = { v4: number; v6: number } | false;

export const DEFAULT_NETWORK_RULES: Exclude<NetworkRules, false> = { v4: 24, v6: 48 };

/**
 * The network an address belongs to: its first `v4` (IPv4, IPv4-mapped IPv6 too) or `v6` bits, as
 * `a.b.c.0/24` or `2001:db8:1::/48`. Without rules, or for something that is not an IP address, the
 * address itself.
 */
export function networkOf(address: string | undefined, rules: NetworkRules): string {
  if (!address) return 'unknown';
  if (!rules) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  const v4 = mapped ? mapped[1] : isIP(address) === 4 ? address : null;
  if (v4) {
    const n = v4.split('.').reduce((acc, x) => acc * 256 + Number(x), 0);
    const bits = Math.max(0, Math.min(32, rules.v4));
    const masked = bits === 0 ? 0 : Math.floor(n / 2 ** (32 - bits)) * 2 ** (32 - bits);
    return `${[24, 16, 8, 0].map((s) => Math.floor(masked / 2 ** s) % 256).join('.')}/${bits}`;
  }
  if (isIP(address) !== 6) return address;
  const groups = expandV6(address);
  const bits = Math.max(0, Math.min(128, rules.v6));
  const kept = groups.map((g, i) => {
    const from = i * 16;
    if (from >= bits) return 0;
    if (from + 16 <= bits) return g;
    const keep = bits - from;
    return g & (0xffff << (16 - keep)) & 0xffff;
  });
  return `${kept.map((g) => g.toString(16)).join(':')}/${bits}`;
}

function expandV6(address: string): number[] {
  const [head, tail = ''] = address.split('%')[0].split('::');
  const parse = (s: string) => (s ? s.split(':').map((x) => parseInt(x, 16) || 0) : []);
  const a = parse(head), b = address.includes('::') ? parse(tail) : [];
  return [...a, ...new Array(Math.max(0, 8 - a.length - b.length)).fill(0), ...b].slice(0, 8);
}

/** An identity has standing once checks confirmed enough of its work since its last fault. */
export function hasStanding(reputation: { verifiedSinceFault: number } | null | undefined): boolean {
  return !!reputation && !onProbation(reputation);
}

/**
 * Up to `count` of `ranked` (best first), never two from one network, and of those with standing
 * first when `standing` is given: evaluators, uploaders, tie-breakers. `exclude` networks are taken.
 */
export function seatsFrom<T>(ranked: readonly T[], count: number, networkOf: (x: T) => string, standing?: (x: T) => boolean, exclude: Iterable<string> = []): T[] {
  const order = standing ? [...ranked.filter(standing), ...ranked.filter((x) => !standing(x))] : [...ranked];
  const taken = new Set(exclude);
  const out: T[] = [];
  for (const x of order) {
    if (out.length >= count) break;
    const net = networkOf(x);
    if (taken.has(net)) continue;
    taken.add(net);
    out.push(x);
  }
  return out;
}

/**
 * Whether one more member from `network` would make it a majority of the job's members: a network's
 * first member always may join; a second needs the others to outnumber it.
 */
export function networkWouldDominate(membersFromNetwork: number, present: number): boolean {
  return membersFromNetwork >= 1 && (membersFromNetwork + 1) * 2 > present + 1;
}
